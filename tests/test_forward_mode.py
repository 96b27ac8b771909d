"""Forward mode over the recorded graph (``push_forward``), behind ``jvp`` and the
forward-mode Jacobian: closed forms, agreement with reverse mode, every fallback."""

from __future__ import annotations

import numpy as np
import pytest

import funcdiff as fd
from funcdiff.autograd.forward import push_forward
from funcdiff.functional import jacobian, jvp

RNG = np.random.default_rng(7)


def test_jvp_of_tanh_matvec_times_x_closed_form() -> None:
    # f(x) = tanh(A x) * x:  J v = tanh(A x) * v + x * (1 - tanh(A x)^2) * (A v)
    A, x0, v0 = RNG.normal(size=(6, 6)), RNG.normal(size=6), RNG.normal(size=6)
    out, t = jvp(lambda x: np.tanh(A @ x) * x, fd.tensor(x0), fd.tensor(v0))
    th = np.tanh(A @ x0)
    np.testing.assert_allclose(out.numpy(), th * x0, rtol=1e-14)
    np.testing.assert_allclose(t.numpy(), th * v0 + x0 * (1 - th**2) * (A @ v0), rtol=1e-12)


def test_batched_tangents_equal_a_loop_and_finite_differences() -> None:
    A = RNG.normal(size=(4, 3))
    x = fd.tensor(RNG.normal(size=3), requires_grad=True)
    y = np.sum(np.exp(A @ x) * x[0], axis=0) - x**2
    V = RNG.normal(size=(5, 3))
    (batched,) = push_forward([y], {x._gradient_edge(): V}, create_graph=False, batched=True)
    f = lambda z: np.sum(np.exp(A @ z) * z[0], axis=0) - z**2
    h = 1e-6
    for b, v in enumerate(V):
        (single,) = push_forward([y], {x._gradient_edge(): v}, create_graph=False)
        np.testing.assert_allclose(batched[b], single, rtol=1e-13, atol=1e-15)
        fdiff = (f(x.data + h * v) - f(x.data - h * v)) / (2 * h)
        np.testing.assert_allclose(single, fdiff, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize(
    "a_shape, b_shape, wrt",
    [
        ((2, 3, 4), (4,), 0),  # stacked matrices times a vector
        ((2, 3, 4), (4,), 1),
        ((3,), (2, 3, 4), 0),  # a vector times stacked matrices
        ((3,), (2, 3, 4), 1),
        ((3, 4), (2, 4, 2), 1),
        ((4,), (4,), 1),  # inner product
        ((3, 4), (4, 2), 0),
    ],
)
def test_forward_mode_jacobian_of_matmul_equals_reverse(a_shape, b_shape, wrt) -> None:
    # A batch of tangents through matmul: one product where broadcasting allows, the
    # transposed vjp elsewhere; both must equal the reverse-mode Jacobian.
    a, b = RNG.normal(size=a_shape), RNG.normal(size=b_shape)
    if wrt == 0:
        f, point = (lambda t: np.matmul(t, b)), a
    else:
        f, point = (lambda t: np.matmul(a, t)), b
    rev = jacobian(f, fd.tensor(point), vectorize=True)
    for vectorize in (True, False):
        fwd = jacobian(f, fd.tensor(point), vectorize=vectorize, strategy="forward-mode")
        np.testing.assert_allclose(fwd.numpy(), rev.numpy(), rtol=1e-13, atol=1e-14)


class _Cube(fd.Function):
    """x^3 with a hand-written backward: no tangent rule, so forward mode transposes it."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.data**3 if isinstance(x, fd.Tensor) else x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * g * x * x


def test_custom_function_goes_through_its_transposed_backward() -> None:
    x0, v0 = np.array([0.5, -1.5, 2.0]), np.array([1.0, 2.0, -0.5])
    _, t = jvp(lambda x: np.sin(_Cube.apply(x)), fd.tensor(x0), fd.tensor(v0))
    np.testing.assert_allclose(t.numpy(), np.cos(x0**3) * 3 * x0**2 * v0, rtol=1e-13)


def test_deep_chain_needs_no_recursion() -> None:
    # 30000 recorded operations: the walk is iterative.
    x = fd.tensor(np.array([0.3, -0.2]), requires_grad=True)
    y = x
    for _ in range(15000):
        y = y * 1.0001
        y = y - 0.0
    (t,) = push_forward([y], {x._gradient_edge(): np.ones(2)}, create_graph=False)
    np.testing.assert_allclose(t, np.full(2, 1.0001**15000), rtol=1e-10)


def test_a_saved_value_modified_in_place_is_refused() -> None:
    x = fd.tensor(np.array([0.1, 0.2]), requires_grad=True)
    a = x * 2.0
    y = np.sin(a)  # sin's derivative reads a
    a += 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        push_forward([y], {x._gradient_edge(): np.ones(2)}, create_graph=False)


def test_outputs_independent_of_the_seeds_get_no_tangent() -> None:
    x = fd.tensor(np.array([1.0, 2.0]), requires_grad=True)
    z = fd.tensor(np.array([3.0]), requires_grad=True)
    y1, y2 = x * 2.0, np.sin(z)
    t1, t2 = push_forward([y1, y2], {x._gradient_edge(): np.ones(2)}, create_graph=False)
    np.testing.assert_array_equal(t1, [2.0, 2.0])
    assert t2 is None
    # through jvp: an output that is a constant gets a zero tangent (torch's semantics)
    _, t = jvp(lambda x: (x * 2.0, fd.tensor([5.0, 6.0, 7.0])), x, fd.tensor([1.0, -1.0]))
    np.testing.assert_array_equal(t[0].numpy(), [2.0, -2.0])
    np.testing.assert_array_equal(t[1].numpy(), np.zeros(3))


def test_jvp_never_returns_the_callers_tangent() -> None:
    v = fd.tensor([1.0, 2.0])
    _, t = jvp(lambda x: x, fd.tensor([0.0, 0.0]), v)
    np.testing.assert_array_equal(t.numpy(), v.numpy())
    t.data[0] = 5.0
    assert v.data[0] == 1.0


def test_hvp_forward_over_reverse_equals_the_hessian_times_v() -> None:
    # logsumexp, solve and cumsum have no tangent maps: their vjps are transposed.
    from funcdiff.functional import hessian, hvp, vhp
    from funcdiff.special import logsumexp

    A = RNG.normal(size=(5, 4))
    M = np.eye(4) * 3.0 + RNG.normal(size=(4, 4)) * 0.2

    def f(x):
        return logsumexp(A @ x) + np.sum(np.linalg.solve(M, x) ** 2) + np.sum(np.cumsum(x) ** 3)

    x0, v0 = RNG.normal(size=4), RNG.normal(size=4)
    H = hessian(f, fd.tensor(x0)).numpy()
    np.testing.assert_allclose(H, H.T, rtol=1e-12, atol=1e-12)
    _, hv = hvp(f, fd.tensor(x0), fd.tensor(v0))
    _, vh = vhp(f, fd.tensor(x0), fd.tensor(v0))
    np.testing.assert_allclose(hv.numpy(), H @ v0, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(vh.numpy(), hv.numpy(), rtol=1e-12, atol=1e-12)
    # create_graph: d/dx <H(x) v, w> is the third derivative, checked by differences
    w = RNG.normal(size=4)
    x = fd.tensor(x0, requires_grad=True)
    _, hv_t = hvp(f, x, fd.tensor(v0), create_graph=True)
    (third,) = fd.grad(np.sum(hv_t * w), x)
    h = 1e-5
    fdiff = np.array(
        [
            (
                hvp(f, fd.tensor(x0 + h * e), fd.tensor(v0))[1].numpy() @ w
                - hvp(f, fd.tensor(x0 - h * e), fd.tensor(v0))[1].numpy() @ w
            )
            / (2 * h)
            for e in np.eye(4)
        ]
    )
    np.testing.assert_allclose(third.numpy(), fdiff, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- diagonal rules
def _count_transposes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count transposed-vjp calls, wherever a module holds ``transpose_vjp``."""
    import sys

    from funcdiff.autograd import forward

    original = forward.transpose_vjp
    calls = [0]

    def counting(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith("funcdiff") and getattr(module, "transpose_vjp", None) is original:
            monkeypatch.setattr(module, "transpose_vjp", counting)
    return calls


def test_jvp_of_erf_takes_the_diagonal_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    import scipy.special

    calls = _count_transposes(monkeypatch)
    x0, v0 = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))
    out, t = jvp(scipy.special.erf, fd.tensor(x0), fd.tensor(v0))
    assert calls[0] == 0
    np.testing.assert_allclose(out.numpy(), scipy.special.erf(x0), rtol=1e-15)
    np.testing.assert_allclose(t.numpy(), 2 / np.sqrt(np.pi) * np.exp(-(x0**2)) * v0, rtol=1e-13)


def _diagonal_cases() -> list:
    from funcdiff.rules import Arg, all_rules

    def differentiated(spec) -> bool:
        items = spec if isinstance(spec, list) else [spec]
        return any(isinstance(s, Arg) and s.diff and s.kind not in ("int", "bool") for s in items)

    return [
        pytest.param(rule, i, case, id=f"{rule.name}-{i}")
        for rule in all_rules()
        if rule.diagonal and rule.differentiable
        for i, case in enumerate(rule.cases)
        if any(differentiated(s) for s in (*case.args, *case.kwargs.values()))
    ]


@pytest.mark.parametrize("rule, index, case", _diagonal_cases())
def test_diagonal_rules_tangent_maps_equal_the_reverse_mode_jvp(
    rule, index, case, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rule declared ``diagonal=True`` pushes tangents through its vjps; they must give
    the reverse-mode product ``J v = d/du <J^T u, v>`` (double backward), batched too."""
    from funcdiff.testing import call_case, materialize_case

    rng = np.random.default_rng(index + 101)
    args, slots, kwargs = materialize_case(case, rng)

    def f(*values):
        result = call_case(rule, args, slots, kwargs, values, case.writes)
        if case.output is not None:
            result = case.output(result)
        items = result if isinstance(result, (tuple, list)) else (result,)
        return [o for o in items if isinstance(o, fd.Tensor) and o.requires_grad]

    x0 = [np.asarray(v, dtype=float) for _, _, v in slots]
    batch = [rng.standard_normal((2,) + x.shape) for x in x0]

    # Reverse mode: J v as the derivative of the vjp with respect to its cotangent.
    expected = []
    for row in range(2):
        xs = [fd.tensor(x, requires_grad=True) for x in x0]
        outs = f(*xs)
        us = [fd.tensor(np.zeros(o.shape), requires_grad=True) for o in outs]
        gs = fd.grad(outs, xs, us, create_graph=True, allow_unused=True, materialize_grads=True)
        dirs = [fd.tensor(b[row]) for b in batch]
        live = [(g, d) for g, d in zip(gs, dirs) if g.requires_grad]
        jv = fd.grad(
            [g for g, _ in live],
            us,
            [d for _, d in live],
            allow_unused=True,
            materialize_grads=True,
        )
        expected.append([np.asarray(t.data) for t in jv])

    calls = _count_transposes(monkeypatch)
    xs = [fd.tensor(x, requires_grad=True) for x in x0]
    outs = f(*xs)
    single = isinstance(rule.fn, np.ufunc) and rule.fn.nout == 1
    for batched in (False, True):
        seeds = {x._gradient_edge(): (b if batched else b[0]) for x, b in zip(xs, batch)}
        pushed = push_forward(outs, seeds, create_graph=False, batched=batched)
        for k, (o, t) in enumerate(zip(outs, pushed)):
            for row in range(2 if batched else 1):
                got = np.zeros(o.shape) if t is None else (t[row] if batched else t)
                np.testing.assert_allclose(
                    got, expected[row][k], rtol=1e-9, atol=1e-12, err_msg=f"batched={batched}"
                )
    if single:  # a one-output ufunc never needs the transposed vjp
        assert calls[0] == 0


def test_third_derivative_of_prod_through_forward_over_reverse_with_create_graph() -> None:
    # The Jacobian of H(x) 1 for prod(x) on three entries is the third derivative
    # contracted with ones: 1 off the diagonal, 0 on it (d^3 prod / dx_i dx_j dx_k is 1
    # for distinct i, j, k). np.prod's backward shifts its cumulative products, so this
    # pushes Tensor tangents through that shift.
    from funcdiff.functional import hvp

    x = np.array([1.5, 2.0, 3.0])
    third = jacobian(
        lambda x: hvp(np.prod, x, fd.tensor(np.ones(3)), create_graph=True)[1], fd.tensor(x)
    )
    np.testing.assert_allclose(np.asarray(third.detach()), 1.0 - np.eye(3), atol=1e-13)
