"""funcdiff adapter: the problems written in plain NumPy, run on funcdiff Tensors.

Every setting of the functional API that could matter is tried (vectorize, strategy,
chunk_size); the table reports the fastest correct one.
"""

from __future__ import annotations

import importlib
from typing import Any

from benchmarks import problems as P
from benchmarks._common import Variant

NAME = "funcdiff"
COLUMNS = ("funcdiff",)

fd: Any = None
F: Any = None  # funcdiff.functional, once it exists
F_MISSING = ""


def load() -> dict[str, str]:
    global fd, F, F_MISSING
    fd = importlib.import_module("funcdiff")
    try:
        F = importlib.import_module("funcdiff.functional")
        missing = [
            n for n in ("jacobian", "hessian", "hvp", "vhp", "jvp", "vjp") if not hasattr(F, n)
        ]
        if missing:
            F_MISSING = f"funcdiff.functional lacks {', '.join(missing)}"
    except ImportError as exc:
        F = None
        F_MISSING = f"funcdiff.functional not available yet ({exc})"
    return {"funcdiff": getattr(fd, "__version__", "?")}


def _has(name: str) -> bool:
    return F is not None and hasattr(F, name)


def _skip(setting: str) -> Variant:
    return Variant("funcdiff", setting, None, note=F_MISSING or "not available")


def _label(kw: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in kw.items()) or "default"


def _jacobian_settings(n: int) -> list[dict]:
    chunk = 100 if n > 100 else None
    settings: list[dict] = [
        {"vectorize": False},
        {"vectorize": True},
        {"vectorize": True, "strategy": "forward-mode"},
    ]
    if chunk:
        settings += [
            {"vectorize": True, "chunk_size": chunk},
            {"vectorize": True, "strategy": "forward-mode", "chunk_size": chunk},
        ]
    return settings


def variants(problem: P.Problem) -> list[Variant]:
    d = problem.data
    pid = problem.pid
    out: list[Variant] = []
    if pid == "B1":
        f = P.b1_loss(P.NP, d["W"], d["b"])
        xt = fd.tensor(d["x"], requires_grad=True)

        def grad_call():
            v = f(xt)
            return v, fd.grad(v, xt)[0]

        def backward_call():
            xt.grad = None
            v = f(xt)
            v.backward()
            return v, xt.grad

        out += [
            Variant("funcdiff", "fd.grad", grad_call),
            Variant("funcdiff", ".backward()", backward_call),
        ]
        if _has("vjp"):
            x0 = fd.tensor(d["x"])
            out.append(Variant("funcdiff", "functional.vjp", lambda: F.vjp(f, x0)))
    elif pid == "B2":
        f = P.tanh_mv(P.NP, d["A"])
        x0 = fd.tensor(d["x"])
        for kw in _jacobian_settings(d["x"].size):
            if not _has("jacobian"):
                out.append(_skip(_label(kw)))
                continue
            out.append(Variant("funcdiff", _label(kw), lambda kw=kw: F.jacobian(f, x0, **kw)))
    elif pid == "B3":
        f = P.rosen(P.NP)
        x0 = fd.tensor(d["x"])
        settings = [
            {"vectorize": False},
            {"vectorize": True},
            {"vectorize": True, "outer_jacobian_strategy": "forward-mode"},
        ]
        for kw in settings:
            if not _has("hessian"):
                out.append(_skip(_label(kw)))
                continue
            out.append(Variant("funcdiff", _label(kw), lambda kw=kw: F.hessian(f, x0, **kw)))
    elif pid == "B4":
        f = P.rosen(P.NP)
        x0, v0 = fd.tensor(d["x"]), fd.tensor(d["v"])
        for name in ("hvp", "vhp"):
            if not _has(name):
                out.append(_skip(name))
                continue
            fn = getattr(F, name)
            out.append(Variant("funcdiff", name, lambda fn=fn: fn(f, x0, v0), pick=_second))
    elif pid == "B5":
        f = P.tiny_chain(P.NP, d["c"], d["d"])
        xt = fd.tensor(d["x"], requires_grad=True)

        def grad_call():
            v = f(xt)
            return v, fd.grad(v, xt)[0]

        def backward_call():
            xt.grad = None
            v = f(xt)
            v.backward()
            return v, xt.grad

        out += [
            Variant("funcdiff", "fd.grad", grad_call),
            Variant("funcdiff", ".backward()", backward_call),
        ]
    elif pid == "B6":
        f = P.tanh_mv(P.NP, d["A"])
        x0 = fd.tensor(d["x"])
        if problem.key.endswith("jvp"):
            name, w = "jvp", fd.tensor(d["v"])
        else:
            name, w = "vjp", fd.tensor(d["u"])
        if _has(name):
            fn = getattr(F, name)
            out.append(Variant("funcdiff", name, lambda: fn(f, x0, w)))
        else:
            out.append(_skip(name))
    elif pid == "B7":
        f = P.three_two(P.NP)
        xs = tuple(fd.tensor(d[k]) for k in ("x", "y", "z"))
        settings = [
            {"vectorize": False},
            {"vectorize": True},
            {"vectorize": True, "strategy": "forward-mode"},
        ]
        for kw in settings:
            if not _has("jacobian"):
                out.append(_skip(_label(kw)))
                continue
            out.append(Variant("funcdiff", _label(kw), lambda kw=kw: F.jacobian(f, xs, **kw)))
    return out


def _second(arrays: list) -> list:
    return arrays[1:]
