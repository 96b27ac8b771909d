"""Error messages say what is wrong, in the user's terms.

A complex value that torch's convention cannot pair with its partner (a complex ``v`` of a
real input, an implicit gradient of a complex output) is refused as by torch, and a
function without a derivative rule is named as the user called it (``scipy.special.zeta``,
not the private ufunc ``numpy._zeta`` that SciPy's wrapper runs).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp

import funcdiff as fd
from funcdiff._core.registry import UFUNC_RULES
from funcdiff.functional import hessian, hvp, jacobian, jvp, vhp, vjp


def _sum_sq(x):
    return np.sum(x * x)


# --------------------------------------------------------------------------- complex values
V_CALLS = {
    "vjp": lambda v: vjp(lambda x: x * 2.0, np.array([1.0]), v),
    "jvp": lambda v: jvp(lambda x: x * 2.0, np.array([1.0]), v),
    "hvp": lambda v: hvp(_sum_sq, np.array([1.0]), v),
    "vhp": lambda v: vhp(_sum_sq, np.array([1.0]), v),
}


@pytest.mark.parametrize("fn_name", sorted(V_CALLS))
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_a_complex_v_of_a_real_value_is_refused_as_by_torch(fn_name: str, dtype) -> None:
    # Keeping only its real part would be a silently wrong product.
    match = rf"Mismatch in dtype: v\[0\] has a dtype of {np.dtype(dtype)} .* float64"
    with pytest.raises(RuntimeError, match=match):
        V_CALLS[fn_name](np.array([1j], dtype=dtype))


def test_a_real_v_of_a_complex_output_is_refused_as_by_torch() -> None:
    with pytest.raises(RuntimeError, match=r"v\[1\] has a dtype of float64 .* complex128"):
        vjp(
            lambda x, y: (x, y * 1j),
            (np.array([1.0]), np.array([2.0])),
            (np.array([1.0]), np.array([1.0])),
        )


@pytest.mark.parametrize("call", ["backward", "hessian", "jacobian"])
def test_an_implicit_gradient_of_a_complex_output_is_refused(call: str) -> None:
    z = np.array([1.0 + 2.0j])
    with pytest.raises(RuntimeError, match="only for real scalar outputs but got complex128"):
        if call == "backward":
            np.sum(fd.tensor(z, requires_grad=True) * 2.0).backward()
        elif call == "hessian":  # its rows are reverse-mode gradients of a complex gradient
            hessian(lambda u: np.sum(np.abs(u) ** 2), z)
        else:
            jacobian(lambda u: u * 2.0, z)


def test_complex_values_in_a_tuple_of_inputs_get_gradients() -> None:
    # d/dy sum(|x y|^2) = 2 |x|^2 y, in the convention dL/dRe + i dL/dIm
    x, y = np.array([1.0, 3.0]), np.array([2.0 - 1.0j, 0.5j])
    _, (gx, gy) = vjp(lambda a, b: np.sum(np.abs(a * b) ** 2), (x, y), np.array(1.0))
    np.testing.assert_allclose(gy.numpy(), 2 * x**2 * y, rtol=1e-14)
    np.testing.assert_allclose(gx.numpy(), 2 * x * np.abs(y) ** 2, rtol=1e-14)
    assert gx.dtype == np.float64 and gy.dtype == np.complex128


def test_real_values_of_a_complex_number_still_work() -> None:
    z = np.array([1.0 + 2.0j])
    _, (gr, gi) = vjp(lambda a, b: a * a + b * b, (z.real, z.imag), np.array([1.0]))
    np.testing.assert_array_equal(gr.numpy(), [2.0])
    np.testing.assert_array_equal(gi.numpy(), [4.0])


def test_a_function_without_a_complex_rule_names_itself() -> None:
    x = fd.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="^numpy.maximum has no complex derivative rule"):
        np.maximum(x * 1j, x)


# --------------------------------------------------------------------------- function names
def _missing_rule_name(call) -> str:
    with pytest.raises(TypeError, match="has no derivative rule for ") as info:
        call()
    msg = str(info.value)
    name = msg.split("has no derivative rule for ", 1)[1].split(",", 1)[0]
    # the rest of the message is unchanged
    assert msg == (
        f"funcdiff has no derivative rule for {name}, so it cannot run on Tensors without "
        "losing the gradient. Use supported functions, or call it on tensor.detach() "
        "if no gradient is needed through it."
    )
    return name


X = fd.tensor([2.0, 3.0], requires_grad=True)

NAMED_CALLS = [
    # a SciPy wrapper that runs a private ufunc (_lambertw; zeta's have rules now)
    pytest.param(lambda: sp.lambertw(X), "scipy.special.lambertw", id="lambertw"),
    # public SciPy ufuncs without a rule
    pytest.param(lambda: sp.spence(X), "scipy.special.spence", id="spence"),
    pytest.param(lambda: sp.dawsn(X), "scipy.special.dawsn", id="dawsn"),
    pytest.param(lambda: sp.ellipk(X * 0.1), "scipy.special.ellipk", id="ellipk"),
    # NumPy's own
    pytest.param(lambda: np.isnat(X), "numpy.isnat", id="numpy-isnat"),
    pytest.param(lambda: np.add.outer(X, X), "numpy.add.outer", id="numpy-method"),
    pytest.param(lambda: sp.agm.outer(X, X), "scipy.special.agm.outer", id="scipy-method"),
]


@pytest.mark.parametrize(("call", "name"), NAMED_CALLS)
def test_missing_rule_names_the_function_called(call, name: str) -> None:
    assert _missing_rule_name(call) == name


def test_named_functions_really_have_no_rule() -> None:
    # The cases above are functions without rules (else the test would test nothing).
    import scipy.special._ufuncs as private

    for ufunc in (private._lambertw, sp.spence, np.isnat):
        assert ufunc not in UFUNC_RULES


def test_in_place_ufunc_without_a_rule_is_named() -> None:
    y = X * 1.0
    with pytest.raises(TypeError, match="no derivative rule for scipy.special.dawsn,"):
        sp.dawsn(y, out=y)


def test_no_gradient_needed_runs_on_the_data() -> None:
    # The name lookup is on the error path only: without requires_grad it just runs.
    c = fd.tensor([2.0, 3.0])
    np.testing.assert_allclose(sp.zeta(c, 1.0).numpy(), sp.zeta(np.array([2.0, 3.0]), 1.0))
