"""PyTorch adapter (CPU build, float64, one thread): torch.autograd(.functional) and torch.func."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

from benchmarks import problems as P
from benchmarks._common import Variant

NAME = "torch"
COLUMNS = ("torch.autograd", "torch.func")

torch: Any = None
TF: Any = None  # torch.autograd.functional
tfunc: Any = None  # torch.func
M: Any = None


def load() -> dict[str, str]:
    global torch, TF, tfunc, M
    torch = importlib.import_module("torch")
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set, or parallel work has started
        pass
    torch.set_default_dtype(torch.float64)
    TF = importlib.import_module("torch.autograd.functional")
    tfunc = importlib.import_module("torch.func")
    M = SimpleNamespace(tanh=torch.tanh, sin=torch.sin, exp=torch.exp, sum=torch.sum)
    return {"torch": torch.__version__}


def _t(a: Any) -> Any:
    return torch.from_numpy(a.copy())


def _label(kw: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in kw.items()) or "default"


def _second(arrays: list) -> list:
    return arrays[1:]


def variants(problem: P.Problem) -> list[Variant]:
    d = problem.data
    pid = problem.pid
    A, F = "torch.autograd", "torch.func"
    out: list[Variant] = []
    if pid in ("B1", "B5"):
        if pid == "B1":
            f = P.b1_loss(M, _t(d["W"]), _t(d["b"]))
        else:
            f = P.tiny_chain(M, _t(d["c"]), _t(d["d"]))
        x = _t(d["x"])
        xl = x.clone().requires_grad_(True)

        def grad_call():
            v = f(xl)
            return v, torch.autograd.grad(v, xl)[0]

        g_and_v = tfunc.grad_and_value(f)
        out += [
            Variant(A, "autograd.grad", grad_call),
            Variant(F, "grad_and_value", lambda: g_and_v(x)[::-1]),
        ]
    elif pid == "B2":
        f = P.tanh_mv(M, _t(d["A"]))
        x = _t(d["x"])
        for kw in (
            {"vectorize": False},
            {"vectorize": True},
            {"vectorize": True, "strategy": "forward-mode"},
        ):
            # vectorize=True takes about a second at n=1000: left out of --quick runs.
            quick = not kw["vectorize"] or x.shape[0] < 1000
            out.append(Variant(A, _label(kw), lambda kw=kw: TF.jacobian(f, x, **kw), quick=quick))
        jr, jf = tfunc.jacrev(f), tfunc.jacfwd(f)
        out += [Variant(F, "jacrev", lambda: jr(x)), Variant(F, "jacfwd", lambda: jf(x))]
    elif pid == "B3":
        f = P.rosen(M)
        x = _t(d["x"])
        for kw in (
            {"vectorize": False},
            {"vectorize": True},
            {"vectorize": True, "outer_jacobian_strategy": "forward-mode"},
        ):
            out.append(Variant(A, _label(kw), lambda kw=kw: TF.hessian(f, x, **kw)))
        h_fr, h_rr = tfunc.hessian(f), tfunc.jacrev(tfunc.jacrev(f))
        out += [
            Variant(F, "hessian (jacfwd(jacrev))", lambda: h_fr(x)),
            Variant(F, "jacrev(jacrev)", lambda: h_rr(x)),
        ]
    elif pid == "B4":
        f = P.rosen(M)
        x, v = _t(d["x"]), _t(d["v"])
        out += [
            Variant(A, "hvp", lambda: TF.hvp(f, x, v), pick=_second),
            Variant(A, "vhp", lambda: TF.vhp(f, x, v), pick=_second),
        ]
        g = tfunc.grad(f)

        def fwd_over_rev():
            return tfunc.jvp(g, (x,), (v,))[1]

        def rev_over_rev():
            return tfunc.vjp(g, x)[1](v)[0]

        out += [
            Variant(F, "jvp(grad)", fwd_over_rev),
            Variant(F, "vjp(grad)", rev_over_rev),
        ]
    elif pid == "B6":
        f = P.tanh_mv(M, _t(d["A"]))
        x = _t(d["x"])
        if problem.key.endswith("jvp"):
            v = _t(d["v"])
            out += [
                Variant(A, "functional.jvp", lambda: TF.jvp(f, x, v)),
                Variant(F, "jvp", lambda: tfunc.jvp(f, (x,), (v,))),
            ]
        else:
            u = _t(d["u"])

            def func_vjp():
                y, fn = tfunc.vjp(f, x)
                return y, fn(u)[0]

            out += [
                Variant(A, "functional.vjp", lambda: TF.vjp(f, x, u)),
                Variant(F, "vjp", func_vjp),
            ]
    elif pid == "B7":
        f = P.three_two(M)
        xs = tuple(_t(d[k]) for k in ("x", "y", "z"))
        for kw in (
            {"vectorize": False},
            {"vectorize": True},
            {"vectorize": True, "strategy": "forward-mode"},
        ):
            out.append(Variant(A, _label(kw), lambda kw=kw: TF.jacobian(f, xs, **kw)))
        jr = tfunc.jacrev(f, argnums=(0, 1, 2))
        jf = tfunc.jacfwd(f, argnums=(0, 1, 2))
        out += [Variant(F, "jacrev", lambda: jr(*xs)), Variant(F, "jacfwd", lambda: jf(*xs))]
    return out
