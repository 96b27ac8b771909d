"""torch.autograd parity: custom Functions (modern style, jvp, mark_dirty, materialize
grads), grad-mode decorators, ``backward(inputs=)`` on non-leaves, Node API.

Every test asserts a closed form or finite differences; where torch is installed the
same program also runs in torch and the numbers must agree.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

import funcdiff as fd
from funcdiff import functional as F

A = np.array([[1.0, 2.0, 0.0], [0.0, -1.0, 3.0]])


def leaf(values) -> fd.Tensor:
    return fd.tensor(np.asarray(values, dtype=float), requires_grad=True)


# ----------------------------------------------------------------- the silent wrongs
def test_backward_inputs_fill_the_grad_of_a_non_leaf() -> None:
    x = leaf([1.0, 2.0])
    h = x * 3.0
    (h * h).sum().backward(inputs=[h])
    np.testing.assert_allclose(h.grad.data, 2 * 3.0 * np.array([1.0, 2.0]))
    assert x.grad is None  # only the given inputs accumulate
    torch = pytest.importorskip("torch")
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    th = tx * 3.0
    (th * th).sum().backward(inputs=[th])
    np.testing.assert_allclose(h.grad.data, th.grad.numpy())


@pytest.mark.parametrize("mode", [fd.no_grad, fd.inference_mode, fd.enable_grad])
def test_grad_mode_decorators_without_parentheses(mode) -> None:
    @mode
    def double(x):
        return x * 2.0, fd.is_grad_enabled()

    @mode()
    def double_called(x):
        return x * 2.0, fd.is_grad_enabled()

    x = leaf([1.5])
    with fd.no_grad() if mode is fd.enable_grad else fd.enable_grad():
        (y, enabled), (_, enabled_called) = double(x), double_called(x)
    assert isinstance(y, fd.Tensor) and float(y.data[0]) == 3.0
    assert enabled == enabled_called == (mode is fd.enable_grad)
    assert y.requires_grad == (mode is fd.enable_grad)
    assert fd.is_inference_mode_enabled() is False


def test_inference_mode_is_reported() -> None:
    with fd.inference_mode():
        assert fd.is_inference_mode_enabled()
    assert not fd.is_inference_mode_enabled()


class SquareInPlace(fd.Function):
    """torch's mark_dirty pattern: forward squares its input in place and returns it."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x * 1.0)
        x *= x
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_mark_dirty_makes_the_input_the_output() -> None:
    x = leaf([1.0, -2.0, 3.0])
    y = x * 1.0
    out = SquareInPlace.apply(y)
    assert out is y and y.grad_fn.name() == "SquareInPlaceBackward"
    (y * np.array([0.5, 0.5, 2 / 3])).sum().backward()
    np.testing.assert_allclose(x.grad.data, [1.0, -2.0, 4.0])  # 2 x w
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        SquareInPlace.apply(leaf([1.0]))
    torch = pytest.importorskip("torch")

    class TorchSquare(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x.clone())
            x.mul_(x)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    tx = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    ty = tx * 1.0
    TorchSquare.apply(ty)
    (ty * torch.tensor([0.5, 0.5, 2 / 3], dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy())


def test_mark_dirty_refuses_values_saved_before() -> None:
    x = leaf([1.0, 2.0])
    y = x * 1.0
    z = np.sin(y)  # saves y
    SquareInPlace.apply(y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


class DoubleLeavingTensors(fd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return fd.tensor(np.asarray(g.data if isinstance(g, fd.Tensor) else g) * 2.0)


def test_forward_mode_through_a_backward_that_leaves_the_tensors() -> None:
    x = leaf([1.0, 2.0, 3.0])
    _, tangent = F.jvp(DoubleLeavingTensors.apply, x, np.array([1.0, -1.0, 0.5]))
    np.testing.assert_allclose(tangent.data, [2.0, -2.0, 1.0])  # not zeros
    with pytest.raises(RuntimeError, match="jvp staticmethod"):
        # recorded tangents need a recorded (or jvp) derivative: refused, not zero
        F.jvp(DoubleLeavingTensors.apply, x, np.ones(3), create_graph=True)


# ----------------------------------------------------------------- modern Functions
class MatVec(fd.Function):
    """y = A x, modern style, with a backward that uses NumPy and SciPy on ndarrays."""

    @staticmethod
    def forward(x):
        return fd.tensor(A @ x.data)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.matrix = scipy.sparse.csr_matrix(A)
        ctx.seen = ctx.needs_input_grad

    @staticmethod
    def backward(ctx, g):
        assert isinstance(g, np.ndarray)  # first order: ndarrays
        return ctx.matrix.T @ np.asarray(g)


def test_backward_on_ndarrays_under_every_first_order_entry_point() -> None:
    x = leaf([1.0, 2.0, 3.0])
    np.testing.assert_allclose(F.jacobian(MatVec.apply, x).data, A)
    np.testing.assert_allclose(F.jacobian(MatVec.apply, x, vectorize=True).data, A)
    np.testing.assert_allclose(F.jacobian(MatVec.apply, x, strategy="forward-mode").data, A)
    np.testing.assert_allclose(F.jvp(MatVec.apply, x, np.array([1.0, 0, 1]))[1].data, A @ [1, 0, 1])
    np.testing.assert_allclose(F.vjp(MatVec.apply, x, np.array([1.0, 2.0]))[1].data, A.T @ [1, 2])
    assert fd.gradcheck(MatVec.apply, (x,))
    assert fd.check_derivatives(MatVec.apply, x).ok
    y = MatVec.apply(x)
    assert y.grad_fn.ctx.seen == (True,)


class Exp(fd.Function):
    @staticmethod
    def forward(x):
        return np.exp(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * out

    @staticmethod
    def jvp(ctx, t):
        assert np.shape(t) == (3,)  # one tangent, never a batch
        Exp.jvp_calls += 1
        (out,) = ctx.saved_tensors
        return t * out

    jvp_calls = 0


def test_jvp_staticmethod_is_used_by_forward_mode() -> None:
    x = leaf([0.1, -0.5, 1.0])
    Exp.jvp_calls = 0
    _, tangent = F.jvp(Exp.apply, x, np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(tangent.data, np.exp(x.data) * [1, 2, 3])
    assert Exp.jvp_calls == 1
    jac = F.jacobian(Exp.apply, x, strategy="forward-mode")
    np.testing.assert_allclose(jac.data, np.diag(np.exp(x.data)))
    assert Exp.jvp_calls == 4  # one call per column of the batch
    (g,) = fd.grad(Exp.apply(x).sum(), x, create_graph=True)  # second order via backward
    np.testing.assert_allclose(fd.grad(g.sum(), x)[0].data, np.exp(x.data))


class TwoOutputs(fd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2.0, x * 3.0

    @staticmethod
    def backward(ctx, g1, g2):
        TwoOutputs.seen = (g1 is None, g2 is None)
        total = 0.0
        if g1 is not None:
            total = total + 2.0 * g1
        if g2 is not None:
            total = total + 3.0 * g2
        return total


def test_set_materialize_grads_false_passes_none() -> None:
    x = leaf([1.0, 2.0])
    a, _ = TwoOutputs.apply(x)
    a.sum().backward()
    assert TwoOutputs.seen == (False, True)
    np.testing.assert_allclose(x.grad.data, [2.0, 2.0])
    torch = pytest.importorskip("torch")

    class T(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2.0, x * 3.0

        @staticmethod
        def backward(ctx, g1, g2):
            T.seen = (g1 is None, g2 is None)
            return 2.0 * g1

    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    T.apply(tx)[0].sum().backward()
    assert T.seen == TwoOutputs.seen


def test_needs_input_grad_matches_torch() -> None:
    class Probe(fd.Function):
        @staticmethod
        def forward(ctx, a, b, c):
            Probe.needs = ctx.needs_input_grad
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g, g, None

    Probe.apply(leaf([1.0]), fd.tensor([2.0]), 3)
    assert Probe.needs == (True, False, False)


# ----------------------------------------------------------------- anomaly detection
def test_detect_anomaly_names_the_node_and_shows_the_forward_line() -> None:
    from funcdiff.autograd import detect_anomaly, is_anomaly_enabled

    x = leaf([0.0, 1.0])
    with detect_anomaly():
        assert is_anomaly_enabled()
        y = np.sqrt(x) * 0.0  # sqrt'(0) = inf, times 0: NaN in SqrtBackward
        with pytest.raises(RuntimeError) as info:
            y.sum().backward()
    assert not is_anomaly_enabled()
    message = str(info.value)
    assert "Function 'SqrtBackward' returned nan values in its 0th output." in message
    assert "y = np.sqrt(x) * 0.0" in message  # the forward call's traceback
    # Off by default: the same program gives NaN without an error, as in torch.
    x = leaf([0.0, 1.0])
    (np.sqrt(x) * 0.0).sum().backward()
    assert np.isnan(x.grad.data[0]) and x.grad.data[1] == 0.0
    torch = pytest.importorskip("torch")
    tx = torch.tensor([0.0, 1.0], requires_grad=True)
    with pytest.warns(UserWarning), torch.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="returned nan values in its 0th output"):
            (torch.sqrt(tx) * 0.0).sum().backward()


def test_set_detect_anomaly_as_call_context_and_decorator() -> None:
    from funcdiff.autograd import detect_anomaly, is_anomaly_enabled, set_detect_anomaly

    set_detect_anomaly(True)
    try:
        assert is_anomaly_enabled()
    finally:
        set_detect_anomaly(False)
    assert not is_anomaly_enabled()

    @detect_anomaly()
    def decorated():
        return is_anomaly_enabled()

    @set_detect_anomaly(True)
    def also():
        return is_anomaly_enabled()

    assert not is_anomaly_enabled()
    assert decorated() and also() and not is_anomaly_enabled()
    with detect_anomaly(check_nan=False):  # on, without the NaN check
        x = leaf([0.0])
        (np.sqrt(x) * 0.0).sum().backward()
    assert np.isnan(x.grad.data[0])


# ----------------------------------------------------------------- parity items
def test_next_functions_list_constant_operands_as_none() -> None:
    from funcdiff.autograd.graph import Node

    x = leaf([1.0, 2.0])
    y = x * np.ones(2)
    (first, nr), constant = y.grad_fn.next_functions
    assert isinstance(first, Node) and type(first).__name__ == "AccumulateGrad"
    assert (nr, constant) == (0, (None, 0))
    assert len(np.sin(x).grad_fn.next_functions) == 1
    w = np.where(x.detach() > 1.5, x, np.zeros(2))  # the condition is not an operand
    assert [f is None for f, _ in w.grad_fn.next_functions] == [False, True]
    torch = pytest.importorskip("torch")
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    expected = [f is None for f, _ in (tx * torch.ones(2)).grad_fn.next_functions]
    assert [f is None for f, _ in y.grad_fn.next_functions] == expected


def test_node_hooks_see_and_replace_gradients() -> None:
    x = leaf([1.0, 2.0])
    y = x * np.array([3.0, 4.0])
    seen = []
    y.grad_fn.register_prehook(lambda go: seen.append(go[0].data.copy()))
    handle = y.grad_fn.register_hook(lambda gi, go: (gi[0] * 10.0, gi[1]))
    np.sin(y).sum().backward()
    np.testing.assert_allclose(seen[0], np.cos([3.0, 8.0]))
    np.testing.assert_allclose(x.grad.data, 10.0 * np.cos([3.0, 8.0]) * [3.0, 4.0])
    handle.remove()
    x.grad = None
    y = x * np.array([3.0, 4.0])
    grad_inputs = []
    y.grad_fn.register_hook(lambda gi, go: grad_inputs.append(gi))
    y.sum().backward()
    assert grad_inputs[0][1] is None  # the constant operand's slot
    np.testing.assert_allclose(x.grad.data, [3.0, 4.0])


def test_post_accumulate_grad_hook_and_output_nr() -> None:
    w = leaf([1.0, -1.0])
    steps = []

    def sgd(t):  # an optimiser step as torch's docs write it
        with fd.no_grad():
            t -= 0.1 * t.grad
        steps.append(t.grad.data.copy())

    w.register_post_accumulate_grad_hook(sgd)
    (w * w).sum().backward()
    np.testing.assert_allclose(steps[0], [2.0, -2.0])
    np.testing.assert_allclose(w.data, [0.8, -0.8])
    with pytest.raises(RuntimeError, match="non-leaf"):
        (w * 2.0).register_post_accumulate_grad_hook(sgd)
    a, b = np.linalg.eigh(fd.tensor(np.diag([1.0, 2.0])) * w[0])
    assert (a.output_nr, b.output_nr, w.output_nr) == (0, 1, 0)


def test_in_place_update_of_an_ndarray_by_a_tensor() -> None:
    w = np.ones(2)
    w -= fd.tensor([0.5, 1.0])  # no gradient to lose: NumPy's semantics
    assert type(w) is np.ndarray
    np.testing.assert_allclose(w, [0.5, 0.0])
    g = leaf([0.25, 0.25])
    with pytest.raises(RuntimeError, match="lose its gradient"):
        w -= g
    np.testing.assert_allclose(w, [0.5, 0.0])  # unchanged
    with fd.no_grad():
        w -= g
    np.testing.assert_allclose(w, [0.25, -0.25])


def test_every_scipy_special_ufunc_is_reexported() -> None:
    import scipy.special

    from funcdiff import special
    from funcdiff.special import gammaln

    assert gammaln is scipy.special.gammaln
    x = leaf([1.5, 2.5])
    (g,) = fd.grad(gammaln(x).sum(), x)
    np.testing.assert_allclose(g.data, scipy.special.digamma([1.5, 2.5]))
    names = [n for n in dir(scipy.special) if isinstance(getattr(scipy.special, n), np.ufunc)]
    assert all(getattr(special, n) is getattr(scipy.special, n) for n in names)
    assert "erfcx" in dir(special)
    with pytest.raises(AttributeError):
        special.not_a_function  # noqa: B018
