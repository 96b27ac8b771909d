"""HIPS autograd adapter (autograd.numpy, float64)."""

from __future__ import annotations

import importlib
import importlib.metadata
from types import SimpleNamespace
from typing import Any

from benchmarks import problems as P
from benchmarks._common import Variant

NAME = "autograd"
COLUMNS = ("autograd",)

ag: Any = None
M: Any = None


def load() -> dict[str, str]:
    global ag, M
    ag = importlib.import_module("autograd")
    anp = importlib.import_module("autograd.numpy")
    M = SimpleNamespace(tanh=anp.tanh, sin=anp.sin, exp=anp.exp, sum=anp.sum)
    return {"autograd": importlib.metadata.version("autograd")}


def variants(problem: P.Problem) -> list[Variant]:
    d = problem.data
    pid = problem.pid
    C = "autograd"
    if pid in ("B1", "B5"):
        if pid == "B1":
            f = P.b1_loss(M, d["W"], d["b"])
        else:
            f = P.tiny_chain(M, d["c"], d["d"])
        vg = ag.value_and_grad(f)
        x = d["x"]
        return [Variant(C, "value_and_grad", lambda: vg(x))]
    if pid == "B2":
        jac = ag.jacobian(P.tanh_mv(M, d["A"]))
        x = d["x"]
        return [Variant(C, "jacobian", lambda: jac(x))]
    if pid == "B3":
        hess = ag.hessian(P.rosen(M))
        x = d["x"]
        return [Variant(C, "hessian", lambda: hess(x))]
    if pid == "B4":
        htp = ag.hessian_tensor_product(P.rosen(M))
        x, v = d["x"], d["v"]
        return [Variant(C, "hessian_tensor_product", lambda: htp(x, v))]
    if pid == "B6":
        f = P.tanh_mv(M, d["A"])
        x = d["x"]
        if problem.key.endswith("jvp"):
            v = d["v"]
            fwd = ag.make_jvp(f)
            rev = ag.differential_operators.make_jvp_reversemode(f)
            return [
                Variant(C, "make_jvp (forward mode)", lambda: fwd(x)(v)),
                Variant(C, "make_jvp_reversemode", lambda: rev(x)(v), ref_pick=_second),
            ]
        u = d["u"]

        def vjp_call():
            fn, y = ag.make_vjp(f)(x)
            return y, fn(u)

        return [Variant(C, "make_vjp", vjp_call)]
    if pid == "B7":
        f = P.three_two(M)
        xs = tuple(d[k] for k in ("x", "y", "z"))
        # autograd's jacobian needs an array output: one jacobian per output and input.
        jacs = [ag.jacobian(lambda *a, i=i: f(*a)[i], j) for i in range(2) for j in range(3)]
        return [Variant(C, "jacobian per block", lambda: [jac(*xs) for jac in jacs])]
    return []


def _second(arrays: list) -> list:
    return arrays[1:]
