"""Error messages say what is wrong, in the user's terms.

A complex input to the functional API is named as complex (not as a wrong type), and a
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


# --------------------------------------------------------------------------- complex input
COMPLEX_VALUES = [
    pytest.param(np.array([1 + 1j]), "complex128", id="ndarray-complex128"),
    pytest.param(np.array([1 + 1j], dtype=np.complex64), "complex64", id="ndarray-complex64"),
    pytest.param(1 + 2j, "complex128", id="python-complex"),
    pytest.param(np.complex64(1j), "complex64", id="numpy-complex-scalar"),
]

INPUT_CALLS = {
    "vjp": lambda z: vjp(lambda x: x * 2.0, z, np.array([1.0])),
    "jvp": lambda z: jvp(lambda x: x * 2.0, z, np.array([1.0])),
    "jacobian": lambda z: jacobian(lambda x: x * 2.0, z),
    "hessian": lambda z: hessian(_sum_sq, z),
    "hvp": lambda z: hvp(_sum_sq, z, np.array([1.0])),
    "vhp": lambda z: vhp(_sum_sq, z, np.array([1.0])),
}


@pytest.mark.parametrize("fn_name", sorted(INPUT_CALLS))
@pytest.mark.parametrize(("value", "dtype"), COMPLEX_VALUES)
def test_complex_input_is_named_as_complex(fn_name: str, value, dtype: str) -> None:
    with pytest.raises(TypeError) as info:
        INPUT_CALLS[fn_name](value)
    msg = str(info.value)
    assert msg.startswith(f"{fn_name} got a complex value in its inputs argument (dtype {dtype})")
    assert "real and imaginary parts" in msg
    # not the old, self-contradictory "must be a Tensor ... NumPy arrays are accepted"
    assert "must be either a Tensor" not in msg


V_CALLS = {
    "vjp": lambda v: vjp(lambda x: x * 2.0, np.array([1.0]), v),
    "jvp": lambda v: jvp(lambda x: x * 2.0, np.array([1.0]), v),
    "hvp": lambda v: hvp(_sum_sq, np.array([1.0]), v),
    "vhp": lambda v: vhp(_sum_sq, np.array([1.0]), v),
}


@pytest.mark.parametrize("fn_name", sorted(V_CALLS))
def test_complex_v_is_named_as_complex(fn_name: str) -> None:
    with pytest.raises(TypeError, match=rf"^{fn_name} got a complex value in its v argument"):
        V_CALLS[fn_name](np.array([1j]))


def test_complex_entry_of_a_tuple_names_its_index() -> None:
    with pytest.raises(TypeError, match=r"inputs argument \(value at index 1, dtype complex128\)"):
        jacobian(lambda x, y: x * y, (np.array([1.0]), np.array([2j])))
    with pytest.raises(TypeError, match=r"v argument \(value at index 0, dtype complex64\)"):
        vjp(lambda x, y: (x, y), (np.array([1.0]), np.array([2.0])), (np.complex64(1j), 1.0))


def test_real_values_of_a_complex_number_still_work() -> None:
    # What the message advises: differentiate with respect to the parts.
    z = np.array([1.0 + 2.0j])
    _, (gr, gi) = vjp(lambda a, b: a * a + b * b, (z.real, z.imag), np.array([1.0]))
    np.testing.assert_array_equal(gr.numpy(), [2.0])
    np.testing.assert_array_equal(gi.numpy(), [4.0])


def test_tensor_refuses_complex_numbers() -> None:
    for value in (1 + 2j, np.array([1 + 1j])):
        with pytest.raises(TypeError, match="expects real numbers .* complex numbers"):
            fd.tensor(value, requires_grad=True)


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
