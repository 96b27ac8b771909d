"""funcdiff on CuPy arrays (a GPU): skipped where CuPy or a CUDA device is missing.

The same checks as ``test_array_backends.py`` runs on the strict stand-in, on the real
backend: values equal to the NumPy path, every array a ``cupy.ndarray``, clear TypeErrors
where CuPy lacks a function. What only a GPU shows is CuPy's own gaps (missing
functions, signatures that differ from NumPy's).
"""

from __future__ import annotations

import numpy as np
import pytest
from support.backend_results import assert_same

import funcdiff as fd
import funcdiff.replay as replay
from funcdiff import functional as F
from funcdiff.rules import all_rules
from funcdiff.testing import call_case, materialize_case

cupy = pytest.importorskip("cupy")
try:
    _DEVICES = cupy.cuda.runtime.getDeviceCount()
except Exception:  # no driver, no device
    _DEVICES = 0
pytestmark = pytest.mark.skipif(_DEVICES == 0, reason="no CUDA device")

RNG = np.random.default_rng(0)


def _assert_same(reference, got, tol=1e-10):
    assert_same(reference, got, cupy.ndarray, cupy.asnumpy, tol)


def _f(x):
    return np.sum(np.tanh(x) * x**2) + np.sum(np.cos(x)) ** 2


def _g(x):
    return np.sin(x) * np.sum(x**2)


def test_tensor_backward_and_grad_keep_cupy_arrays():
    a = RNG.standard_normal(6)
    x = fd.tensor(cupy.asarray(a), requires_grad=True)
    y = np.sum(np.sin(x) * x**2)
    y.backward()
    assert isinstance(x.grad.data, cupy.ndarray)
    np.testing.assert_allclose(
        cupy.asnumpy(x.grad.data), 2 * a * np.sin(a) + a**2 * np.cos(a), rtol=1e-12
    )
    with pytest.raises(TypeError, match="cupy"):
        np.asarray(x.detach())
    with pytest.raises(TypeError, match="cupy"):
        x.detach().numpy()
    with pytest.raises(TypeError):
        x + np.ones(6)


@pytest.mark.parametrize("name", ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"])
def test_functional_keeps_cupy_arrays(name):
    a, v = RNG.standard_normal(5), RNG.standard_normal(5)
    calls = {
        "vjp": lambda x, v: F.vjp(_g, x, v),
        "jvp": lambda x, v: F.jvp(_g, x, v),
        "jacobian": lambda x, v: F.jacobian(_g, x, vectorize=True),
        "hessian": lambda x, v: F.hessian(_f, x, vectorize=True),
        "hvp": lambda x, v: F.hvp(_f, x, v),
        "vhp": lambda x, v: F.vhp(_f, x, v),
    }
    _assert_same(calls[name](a, v), calls[name](cupy.asarray(a), cupy.asarray(v)))


@pytest.mark.parametrize("name, lo, hi", [("erf", -2, 2), ("expit", -3, 3)])
def test_special_functions_to_second_order_on_cupy(name, lo, hi):
    import scipy.special as sp

    fn = getattr(sp, name)
    a = RNG.uniform(lo, hi, 5)
    _assert_same(
        F.hessian(lambda x: np.sum(fn(x)), a),
        F.hessian(lambda x: np.sum(fn(x)), cupy.asarray(a)),
    )


@pytest.mark.parametrize(
    "name, lo, hi", [("erfc", -2, 2), ("gammaln", 0.5, 4), ("ndtr", -3, 3), ("xlogy", 0.5, 3)]
)
def test_special_functions_first_order_on_cupy(name, lo, hi):
    import scipy.special as sp

    fn = getattr(sp, name)
    a = RNG.uniform(lo, hi, 5)

    def f(x):
        y = fn(x, x + 0.5) if name == "xlogy" else fn(x)
        return np.sum(y * y)

    _assert_same(F.vjp(f, a)[1], F.vjp(f, cupy.asarray(a))[1])


def test_replay_records_once_per_array_type_on_cupy():
    vg = replay.value_and_grad(_f)
    for _ in range(3):
        a = RNG.standard_normal(5)
        reference = vg(a)
        value, grad = vg(cupy.asarray(a))
        assert isinstance(value, cupy.ndarray) and value.shape == ()
        _assert_same(reference, (value, grad))
    assert vg.cache_info()["trace_count"] == 2


def test_the_rule_table_on_cupy():
    """Every differentiable rule case: it runs and matches NumPy, or it raises a
    TypeError naming the function and ``cupy.ndarray``."""

    def device(x):
        if isinstance(x, np.ndarray) and x.dtype.kind in "fcb":
            return cupy.asarray(x)
        return [device(i) for i in x] if isinstance(x, list) else x

    def run(rule, case, index, on_device):
        args, slots, kwargs = materialize_case(case, np.random.default_rng(index + 7))
        if on_device:
            args, kwargs = [device(a) for a in args], {k: device(v) for k, v in kwargs.items()}
        ts = [fd.tensor(device(v) if on_device else v, requires_grad=True) for *_, v in slots]
        result = call_case(rule, args, slots, kwargs, ts)
        result = case.output(result) if case.output is not None else result
        items = result if isinstance(result, (tuple, list)) else (result,)
        outs = [o for o in items if isinstance(o, fd.Tensor) and o.dtype.kind == "f"]
        total = 0.0
        for o in outs:
            w = np.random.default_rng(1).standard_normal(o.shape)
            total = total + np.sum(o * (cupy.asarray(w) if on_device else w))
        grads = fd.grad(total, ts, allow_unused=True) if outs and ts else ()
        return [o.data for o in outs] + [g.data for g in grads if g is not None]

    ran, refused, wrong = 0, [], []
    for rule in all_rules():
        if not rule.differentiable:
            continue
        for i, case in enumerate(rule.cases):
            try:
                reference = run(rule, case, i, False)
            except Exception:
                continue
            try:
                got = run(rule, case, i, True)
            except TypeError as exc:
                refused.append((rule.name, str(exc)))
                continue
            except Exception as exc:
                wrong.append((rule.name, repr(exc)))
                continue
            if all(
                isinstance(b, cupy.ndarray)
                and np.allclose(a, cupy.asnumpy(b), rtol=1e-8, atol=1e-10, equal_nan=True)
                for a, b in zip(reference, got)
            ):
                ran += 1
            else:
                wrong.append((rule.name, "values or type differ"))
    total = ran + len(refused) + len(wrong)
    print(f"rule cases on CuPy: {ran} of {total} ran, {len(refused)} refused")
    assert not wrong, wrong[:10]
    assert all("cupy" in message for _, message in refused), refused[:10]
