"""Tensors holding arrays of another backend: the strict stand-in for CuPy.

Every test runs the same computation on ndarrays and on
:class:`support.strict_array.StrictArray` and asserts equal values and that every
array that comes back is of the stand-in's type (never silently converted to NumPy).
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
from support.backend_results import assert_same, flat
from support.strict_array import HOST_READS, BareArray, MissingArray, StrictArray

import funcdiff as fd
import funcdiff.replay as replay
from funcdiff import functional as F
from funcdiff.rules import all_rules
from funcdiff.testing import call_case, materialize_case

RNG = np.random.default_rng(0)


def _s(a, cls=StrictArray):
    return cls(np.array(a, dtype=float))


def _host(x):
    return x.data._a if isinstance(x, fd.Tensor) else x._a


def _assert_same(reference, got, tol=1e-10):
    assert_same(reference, got, StrictArray, lambda a: a._a, tol)


# ------------------------------------------------------------------ the Tensor itself
def test_tensor_keeps_the_type_through_ops_backward_and_grad():
    x = fd.tensor(_s([0.5, 2.0]), requires_grad=True)
    assert type(x.data) is StrictArray
    y = np.sum(np.sin(x) * x**2 + np.exp(-x) / (1.0 + x))
    assert type(y.data) is StrictArray
    y.backward()
    a = np.array([0.5, 2.0])
    expected = (
        2 * a * np.sin(a) + a**2 * np.cos(a) - np.exp(-a) / (1 + a) - np.exp(-a) / (1 + a) ** 2
    )
    assert type(x.grad.data) is StrictArray
    np.testing.assert_allclose(x.grad.data._a, expected, rtol=1e-12)
    (g,) = fd.grad(np.sum(x**3), x, create_graph=True)
    (h,) = fd.grad(np.sum(g), x)
    assert type(g.data) is StrictArray and type(h.data) is StrictArray
    np.testing.assert_allclose(h.data._a, 6 * a, rtol=1e-12)


def test_indexing_scatter_and_reductions_keep_the_type():
    a = RNG.standard_normal((4, 3))
    for cls in (StrictArray,):
        x = fd.tensor(cls(a.copy()), requires_grad=True)
        idx = np.array([0, 2, 0])  # a host integer index array is allowed
        y = np.sum(x[idx, 1:] ** 2) + np.max(x) + np.mean(np.cumsum(x, axis=0))
        (g,) = fd.grad(y, x)
        xr = fd.tensor(a, requires_grad=True)
        yr = np.sum(xr[idx, 1:] ** 2) + np.max(xr) + np.mean(np.cumsum(xr, axis=0))
        (gr,) = fd.grad(yr, xr)
        _assert_same(gr, g)


def test_conversions_to_the_host_raise_or_are_explicit():
    x = fd.tensor(_s([1.0, 2.0]))
    with pytest.raises(TypeError, match="StrictArray.*host"):
        np.asarray(x)
    with pytest.raises(TypeError, match="numpy\\(\\).*StrictArray"):
        x.numpy()
    before = HOST_READS[0]
    assert np.sum(x).item() == 3.0  # the one explicit way to a number
    assert HOST_READS[0] == before + 1
    assert "StrictArray" in repr(x)


def test_a_tensor_of_a_device_array_reads_nothing_from_the_device():
    x = fd.tensor(_s(RNG.standard_normal(5)), requires_grad=True)
    before = HOST_READS[0]
    F.hessian(lambda x: np.sum(np.tanh(x) * x**2), x)
    vg = replay.value_and_grad(lambda x: np.sum(np.cos(x) ** 2))
    vg(x.data)  # records
    vg(x.data * 2.0)  # replays
    assert HOST_READS[0] == before


def test_mixing_host_and_device_values_raises():
    x = fd.tensor(_s([1.0, 2.0]), requires_grad=True)
    with pytest.raises(TypeError, match="numpy.add mixes host numpy.ndarray values with .*Strict"):
        x + np.array([1.0, 2.0])
    assert np.sum(x[np.array([1, 0])] * 2.0).item() == 6.0  # a host index is fine
    with pytest.raises(TypeError, match="mixes host numpy.ndarray"):
        fd.grad(x * 2.0, x, np.ones(2))


def test_a_function_the_backend_lacks_raises_naming_it_and_the_type():
    x = fd.tensor(_s([1.0, 2.0], MissingArray), requires_grad=True)
    with pytest.raises(TypeError, match="cumsum cannot run on .*MissingArray arrays"):
        np.cumsum(x)
    with pytest.raises(TypeError, match="StrictArray"):
        StrictArray(np.ones(2)) + MissingArray(np.ones(2))


# ------------------------------------------------------------------ scipy.special
@pytest.mark.parametrize("cls", [StrictArray, BareArray])
@pytest.mark.parametrize(
    "name, lo, hi, order",
    [
        ("erf", -2, 2, 2),
        ("erfc", -2, 2, 1),
        ("gammaln", 0.5, 4, 1),
        ("expit", -3, 3, 2),
        ("ndtr", -3, 3, 1),
        ("xlogy", 0.5, 3, 1),
    ],
)
def test_scipy_special_runs_as_the_backends_own(cls, name, lo, hi, order):
    """StrictArray answers scipy.special itself (as CuPy does); BareArray only NumPy's
    ufuncs, so these reach the special module funcdiff finds in its registry."""
    import scipy.special as sp

    fn = getattr(sp, name)
    a = RNG.uniform(lo, hi, 5)

    def f(x):
        y = fn(x, x + 0.5) if name == "xlogy" else fn(x)
        return np.sum(y * y) if order == 1 else np.sum(y)

    reference = F.hessian(f, a) if order == 2 else F.vjp(f, a)[1]
    got = F.hessian(f, cls(a.copy())) if order == 2 else F.vjp(f, cls(a.copy()))[1]
    assert type(flat(got)[0]) is cls
    np.testing.assert_allclose(_host(got), reference, rtol=1e-10, atol=1e-12)


def test_registry_names_the_backend_modules():
    import funcdiff.backends as backends

    assert backends.registered_backends()["cupy"] == ("cupy", "cupyx.scipy.special")
    assert backends.special_module(_s([1.0])).erf.__name__ == "erf"
    with pytest.raises(TypeError, match="top-level module name"):
        backends.register_backend("a.b")


# ------------------------------------------------------------------ scipy.linalg
_STRUCTURES = [
    None,
    "gen",
    "banded",
    "diagonal",
    "tridiagonal",
    "upper triangular",
    "lower triangular",
    "sym",
    "her",
    "pos",
]


def _matrices(complex_: bool):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 4)) + (1j * rng.standard_normal((4, 4)) if complex_ else 0)
    spd = a @ np.conj(a.T) + 4 * np.eye(4)
    # the triangle the symmetric solvers do not read holds other values
    return a + 4 * np.eye(4), spd + np.tril(rng.standard_normal((4, 4)), -1), a


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("lower", [False, True])
def test_scipy_linalg_on_the_stand_in_equals_scipy(complex_, lower):
    """scipy.linalg.solve/inv/det/eigh/cho_factor/cho_solve on a device array give SciPy's
    values through numpy.linalg (the options that keep their meaning there)."""
    import scipy.linalg as sl

    from funcdiff import linalg as fl

    general, spd, plain = _matrices(complex_)
    b = np.random.default_rng(4).standard_normal((4, 2))
    for assume_a in _STRUCTURES:
        m = spd if assume_a in ("sym", "her", "pos") else general
        got = fl.solve(StrictArray(m.copy()), StrictArray(b.copy()), assume_a=assume_a, lower=lower)
        np.testing.assert_allclose(got._a, sl.solve(m, b, assume_a=assume_a, lower=lower), 1e-10)
        if assume_a in (None, "gen", "upper triangular", "lower triangular", "sym", "her", "pos"):
            got = fl.inv(StrictArray(m.copy()), assume_a=assume_a, lower=lower)
            np.testing.assert_allclose(got._a, sl.inv(m, assume_a=assume_a, lower=lower), 1e-10)
    if not complex_:
        got = fl.solve(StrictArray(general.copy()), StrictArray(b.copy()), transposed=True)
        np.testing.assert_allclose(got._a, sl.solve(general, b, transposed=True), 1e-10)
    np.testing.assert_allclose(fl.det(StrictArray(plain.copy()))._a, sl.det(plain), 1e-10)
    c, flag = fl.cho_factor(StrictArray(spd.copy()), lower=lower)
    c_ref, _ = sl.cho_factor(spd, lower=lower)
    assert flag is lower and type(c) is StrictArray
    np.testing.assert_allclose(c._a, c_ref, 1e-10)  # the triangle not factored is a's
    x = fl.cho_solve((c, lower), StrictArray(b.copy()))
    np.testing.assert_allclose(x._a, sl.cho_solve((c_ref, lower), b), 1e-10)
    w, v = fl.eigh(StrictArray(spd.copy()), lower=lower)
    w_ref, v_ref = sl.eigh(spd, lower=lower)
    np.testing.assert_allclose(w._a, w_ref, 1e-10)
    np.testing.assert_allclose(np.abs(v._a), np.abs(v_ref), 1e-8)  # up to a phase
    np.testing.assert_allclose(
        fl.eigh(StrictArray(spd.copy()), lower=lower, eigvals_only=True)._a, w_ref, 1e-10
    )


@pytest.mark.parametrize("bands", [(1, 0), (0, 2), (2, 1), (0, 0)])
def test_solve_banded_on_the_stand_in_equals_scipy(bands):
    import scipy.linalg as sl

    from funcdiff import linalg as fl

    rng = np.random.default_rng(5)
    ab = rng.uniform(0.5, 1.0, (sum(bands) + 1, 5))
    ab[bands[1]] += 3.0  # a dominant diagonal
    for b in (rng.standard_normal(5), rng.standard_normal((5, 2))):
        got = fl.solve_banded(bands, StrictArray(ab.copy()), StrictArray(b.copy()))
        assert type(got) is StrictArray
        np.testing.assert_allclose(got._a, sl.solve_banded(bands, ab, b), 1e-12)
    with pytest.raises(ValueError, match="number of lower and upper diagonals"):
        fl.solve_banded((1, 1), StrictArray(ab[:1].copy()), StrictArray(np.ones(5)))


def test_betaincc_on_the_stand_in_equals_scipy_in_the_tails():
    """cupyx.scipy.special has no betaincc: on device arrays it comes from betainc."""
    import scipy.special as sp
    from support.strict_array import special

    assert not hasattr(special, "betaincc")  # as in CuPy 14
    rng = np.random.default_rng(6)
    n = 4000
    a, b = 10 ** rng.uniform(-1, 1.5, n), 10 ** rng.uniform(-1, 1.5, n)
    x = np.concatenate(
        [
            rng.uniform(0, 1, n // 2),
            10 ** rng.uniform(-15, 0, n // 4),
            1 - 10 ** rng.uniform(-15, 0, n // 4),
        ]
    )
    x[:3] = (0.0, 1.0, np.nan)
    expected = sp.betaincc(a, b, x)
    got = fd.tensor(StrictArray(x.copy()))
    got = sp.betaincc(fd.tensor(StrictArray(a)), fd.tensor(StrictArray(b)), got).data
    assert type(got) is StrictArray
    np.testing.assert_allclose(got._a, expected, rtol=1e-12, atol=0, equal_nan=True)


def test_scipy_linalg_options_without_a_counterpart_raise_on_the_stand_in():
    import scipy.linalg as sl

    from funcdiff import linalg as fl

    general, spd, _ = _matrices(False)
    # SciPy's inv with "diagonal" keeps the off-diagonal entries: nothing to match here
    with pytest.raises(TypeError, match="inv cannot run on .*StrictArray.*diagonal"):
        fl.inv(fd.tensor(StrictArray(general.copy())), assume_a="diagonal")
    with pytest.raises(np.linalg.LinAlgError):  # not positive definite, as SciPy says
        fl.solve(StrictArray(-spd), StrictArray(np.ones(4)), assume_a="pos")
    with pytest.raises(np.linalg.LinAlgError):
        sl.solve(-spd, np.ones(4), assume_a="pos")
    with pytest.raises(TypeError, match="sqrtm cannot run on .*StrictArray"):
        fl.sqrtm(fd.tensor(StrictArray(spd.copy())))


def _recovered_programs():
    """Functions whose rules run on backend arrays through counterparts: rewritten
    derivatives, functions computed from the backend's, scipy.linalg via numpy.linalg."""
    import scipy.special as sp

    from funcdiff import linalg as fl
    from funcdiff import signal as fs

    def spd(x):  # a positive definite matrix built from x, on x's device
        return np.diag(x + 3.0) + 0.1 * np.outer(x, x)

    return {
        "bessel": lambda x: np.sum(sp.j1(x) * sp.y1(x + 2.0) + sp.i1e(x) * sp.k1(x + 1.5)),
        "i1_k1e": lambda x: np.sum(sp.i1(x) ** 2 + sp.k1e(x + 1.0)),
        "zeta": lambda x: np.sum(sp.zeta(x + 2.0) + sp.zeta(x + 1.5, x + 1.0)),
        "betaincc": lambda x: np.sum(sp.betaincc(2.0, 3.0, x * 0.5) ** 2),
        "solve": lambda x: np.sum(fl.solve(spd(x), x, assume_a="pos") ** 2),
        "eigh_inv_det": lambda x: (
            np.sum(fl.eigh(spd(x), eigvals_only=True) ** 3)
            + np.sum(fl.inv(spd(x)))
            + fl.det(spd(x))
        ),
        "cho": lambda x: np.sum(fl.cho_solve(fl.cho_factor(spd(x)), x**2)),
        "banded": lambda x: np.sum(fl.solve_banded((1, 0), np.stack([x + 3.0, x]), x) ** 2),
        "convolve": lambda x: np.sum(fs.convolve(x, x**2) ** 2),
    }


@pytest.mark.parametrize("name", sorted(_recovered_programs()))
def test_recovered_rules_to_second_order_keep_the_type(name):
    f = _recovered_programs()[name]
    a = 0.3 + 0.2 * np.arange(3.0)
    _assert_same(F.hessian(f, a), F.hessian(f, StrictArray(a.copy())))


# ------------------------------------------------------------------ functional, replay
def _f(x):
    return np.sum(np.tanh(x) * x**2) + np.prod(np.cos(x))


def _g(x):
    return np.sin(x) * np.sum(x**2)


@pytest.mark.parametrize(
    "name",
    [
        "vjp",
        "jvp",
        "jacobian",
        "jacobian_vectorized",
        "jacobian_forward",
        "hessian",
        "hessian_vectorized",
        "hvp",
        "vhp",
        "hessian_of_jacobian",
    ],
)
def test_functional_to_second_order_keeps_the_type(name):
    a, v = RNG.standard_normal(4), RNG.standard_normal(4)
    calls = {
        "vjp": lambda x, v: F.vjp(_g, x, v),
        "jvp": lambda x, v: F.jvp(_g, x, v),
        "jacobian": lambda x, v: F.jacobian(_g, x),
        "jacobian_vectorized": lambda x, v: F.jacobian(_g, x, vectorize=True),
        "jacobian_forward": lambda x, v: F.jacobian(_g, x, vectorize=True, strategy="forward-mode"),
        "hessian": lambda x, v: F.hessian(_f, x),
        "hessian_vectorized": lambda x, v: F.hessian(_f, x, vectorize=True),
        "hvp": lambda x, v: F.hvp(_f, x, v),
        "vhp": lambda x, v: F.vhp(_f, x, v),
        "hessian_of_jacobian": lambda x, v: F.jacobian(
            lambda y: F.jacobian(_g, y, create_graph=True), x
        ),
    }
    _assert_same(calls[name](a, v), calls[name](StrictArray(a.copy()), StrictArray(v.copy())))


@pytest.mark.parametrize("kind", ["value_and_grad", "grad", "hvp", "jacobian", "hessian", "vjp"])
def test_replay_keeps_the_type_and_records_once_per_array_type(kind):
    f = _g if kind in ("jacobian", "vjp") else _f
    transform = getattr(replay, kind)(f)
    points = [RNG.standard_normal(4) for _ in range(3)]
    v = RNG.standard_normal(4)
    extra = (v,) if kind in ("hvp", "vjp") else ()
    for p in points:
        reference = transform(p, *extra)
        got = transform(StrictArray(p.copy()), *(StrictArray(e.copy()) for e in extra))
        _assert_same(reference, got)
    info = transform.cache_info()
    assert info["trace_count"] == 2 and info["replays"] == 4  # one program per type


def test_replay_value_is_a_0d_array_of_the_input_type():
    value, grad = replay.value_and_grad(_f)(StrictArray(np.array([0.3, 0.4])))
    assert type(value) is StrictArray and value.shape == ()
    assert type(grad) is StrictArray


# ------------------------------------------------------------------ the rule table
def _to_device(x):
    if isinstance(x, np.ndarray) and x.dtype.kind in "fcbiu":
        return StrictArray(x.copy())
    if isinstance(x, list):
        return [_to_device(i) for i in x]
    return x


def _run_case(rule, case, index, device):
    args, slots, kwargs = materialize_case(case, np.random.default_rng(index + 7))
    if device:
        args = [_to_device(a) for a in args]
        kwargs = {k: _to_device(v) for k, v in kwargs.items()}
    ts = [fd.tensor(_to_device(v) if device else v, requires_grad=True) for *_, v in slots]
    result = call_case(rule, args, slots, kwargs, ts)
    if case.output is not None:
        result = case.output(result)
    items = result if isinstance(result, (tuple, list)) else (result,)
    outs = [o for o in items if isinstance(o, fd.Tensor) and o.dtype.kind == "f"]
    weights = np.random.default_rng(1)
    total = 0.0
    for o in outs:
        w = weights.standard_normal(o.shape)
        total = total + np.sum(o * (StrictArray(w) if device else w))
    grads = fd.grad(total, ts, allow_unused=True) if outs and ts else ()
    return [o.data for o in outs] + [g.data for g in grads if g is not None]


def _rule_table_outcomes():
    ran, refused, wrong, skipped = [], [], [], []
    for rule in all_rules():
        if not rule.differentiable:
            continue
        for i, case in enumerate(rule.cases):
            try:
                reference = _run_case(rule, case, i, False)
            except RuntimeError:  # an in-place rule (put_along_axis) on a leaf: not here
                skipped.append(rule.name)
                continue
            try:
                got = _run_case(rule, case, i, True)
            except TypeError as exc:
                refused.append((rule.name, str(exc)))
                continue
            except Exception as exc:  # anything else is a bug: a crash, not a refusal
                wrong.append((rule.name, f"{type(exc).__name__}: {exc}"))
                continue
            ok = len(reference) == len(got) and all(
                type(b) is StrictArray
                and np.allclose(a, b._a, rtol=1e-10, atol=1e-12, equal_nan=True)
                for a, b in zip(reference, got)
            )
            (ran if ok else wrong).append((rule.name, "" if ok else "values or type differ"))
    assert len(skipped) <= 5, skipped  # every other case runs on NumPy arrays
    return ran, refused, wrong


def test_the_rule_table_runs_on_the_stand_in():
    """Every differentiable rule case, first order: it runs and keeps the type, or it is
    refused with a TypeError; never a wrong value or a silent conversion."""
    ran, refused, wrong = _rule_table_outcomes()
    total = len(ran) + len(refused) + len(wrong)
    assert not wrong, wrong[:5]
    # 1309 of 1375; the refused cases are functions CuPy 14 lacks (jv, yv, iv, kv and
    # their scaled forms, kn, stdtr and the t distribution's CDFs, sqrtm,
    # solve_sylvester) and funcdiff.sparse's host-only primitives
    by_rule = collections.Counter(name for name, _ in refused)
    assert len(ran) / total >= 0.95, (len(ran), total, sorted(by_rule.items()))
    unclear = [r for r in refused if "cannot run on support.strict_array.StrictArray" not in r[1]]
    assert not unclear, unclear[:5]


def test_the_gpu_benchmark_programs_run_on_the_stand_in():
    """``benchmarks/gpu.py`` checks these programs on CuPy; here on the stand-in."""
    import importlib.util
    import types
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu.py"
    spec = importlib.util.spec_from_file_location("gpu_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    check_values = module.check_values
    stand_in = types.SimpleNamespace(
        ndarray=StrictArray, asarray=lambda a: StrictArray(np.array(a)), asnumpy=lambda a: a._a
    )
    rows = check_values(np, stand_in)
    assert rows and all(r["ok"] for r in rows), rows


def test_numpy_only_entry_points_refuse_device_arrays_by_name():
    import funcdiff.sparse as fs

    x = _s(np.linspace(0.0, 1.0, 6))
    with pytest.raises(TypeError, match="gradcheck works on NumPy arrays only.*StrictArray"):
        fd.gradcheck(lambda y: y * 2.0, (fd.tensor(x, requires_grad=True),))
    with pytest.raises(TypeError, match="x must be an array of real numbers.*strict_array"):
        fs.prepare_jacobian(lambda y: y[1:] * y[:-1], x)


def test_creation_casts_and_checks_on_the_device():
    a = np.array([1.0, 2.0])
    t = fd.tensor(StrictArray(a), dtype=np.float32, requires_grad=True)
    assert type(t.data) is StrictArray and t.dtype == np.float32
    assert fd.as_tensor(t.data).data is t.data  # no copy, as for ndarrays
    copied = fd.tensor(t.data)
    copied.data[0] = 5.0
    assert t.data._a[0] == 1.0  # tensor() copies, on the device
    with pytest.raises(RuntimeError, match="floating point and complex"):
        fd.tensor(StrictArray(np.array([1, 2])), requires_grad=True)
    with pytest.raises(TypeError, match="mixes host numpy.ndarray"):
        fd.grad(t * 2.0, t, np.ones(2, dtype=np.int64))
    t.grad = StrictArray(np.array([3.0, 4.0]))
    assert type(t.grad.data) is StrictArray


@pytest.mark.parametrize(
    "name", ["grad", "grad_and_value", "hessian", "jacrev", "jacfwd", "jvp", "vjp", "linearize"]
)
def test_func_transforms_keep_the_type(name):
    import funcdiff.func as ff

    a, v = RNG.standard_normal(4), RNG.standard_normal(4)
    calls = {
        "grad": lambda x, v: ff.grad(_f)(x),
        "grad_and_value": lambda x, v: ff.grad_and_value(_f)(x),
        "hessian": lambda x, v: ff.hessian(_f)(x),
        "jacrev": lambda x, v: ff.jacrev(_g)(x),
        "jacfwd": lambda x, v: ff.jacfwd(_g)(x),
        "jvp": lambda x, v: ff.jvp(_g, (x,), (v,)),
        "vjp": lambda x, v: ff.vjp(_g, x)[1](v),
        "linearize": lambda x, v: ff.linearize(_g, x)[1](v),
    }
    _assert_same(calls[name](a, v), calls[name](StrictArray(a.copy()), StrictArray(v.copy())))
