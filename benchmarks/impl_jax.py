"""JAX adapter (CPU, float64 via jax_enable_x64, one thread): eager and jax.jit."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

from benchmarks import problems as P
from benchmarks._common import Variant

NAME = "jax"
COLUMNS = ("jax", "jax.jit")

jax: Any = None
jnp: Any = None
M: Any = None


def load() -> dict[str, str]:
    global jax, jnp, M
    jax = importlib.import_module("jax")
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    jnp = importlib.import_module("jax.numpy")
    jaxlib = importlib.import_module("jaxlib")
    M = SimpleNamespace(tanh=jnp.tanh, sin=jnp.sin, exp=jnp.exp, sum=jnp.sum)
    return {"jax": jax.__version__, "jaxlib": getattr(jaxlib, "__version__", "?")}


def _a(x: Any) -> Any:
    return jax.device_put(jnp.asarray(x, dtype=jnp.float64))


def _both(setting: str, op: Any, *args: Any, main: bool = True) -> list[Variant]:
    """The same operation eagerly and under jax.jit (compiled on the check call).

    ``--quick`` runs leave out eager jax (its first calls compile every primitive, which
    takes seconds) and the jit settings other than the ``main`` one.
    """
    jitted = jax.jit(op)
    block = jax.block_until_ready
    return [
        Variant("jax", setting, lambda: block(op(*args)), quick=False),
        Variant("jax.jit", setting, lambda: block(jitted(*args)), quick=main),
    ]


def variants(problem: P.Problem) -> list[Variant]:
    d = problem.data
    pid = problem.pid
    out: list[Variant] = []
    if pid in ("B1", "B5"):
        if pid == "B1":
            f = P.b1_loss(M, _a(d["W"]), _a(d["b"]))
        else:
            f = P.tiny_chain(M, _a(d["c"]), _a(d["d"]))
        out += _both("value_and_grad", jax.value_and_grad(f), _a(d["x"]))
    elif pid == "B2":
        f = P.tanh_mv(M, _a(d["A"]))
        x = _a(d["x"])
        out += _both("jacrev", jax.jacrev(f), x)
        out += _both("jacfwd", jax.jacfwd(f), x, main=False)
    elif pid == "B3":
        f = P.rosen(M)
        x = _a(d["x"])
        out += _both("hessian (jacfwd(jacrev))", jax.hessian(f), x)
        out += _both("jacrev(jacrev)", jax.jacrev(jax.jacrev(f)), x, main=False)
    elif pid == "B4":
        g = jax.grad(P.rosen(M))

        def hvp(x, v):
            return jax.jvp(g, (x,), (v,))[1]

        out += _both("jvp(grad)", hvp, _a(d["x"]), _a(d["v"]))
    elif pid == "B6":
        f = P.tanh_mv(M, _a(d["A"]))
        x = _a(d["x"])
        if problem.key.endswith("jvp"):

            def jvp(x, v):
                return jax.jvp(f, (x,), (v,))

            out += _both("jvp", jvp, x, _a(d["v"]))
        else:

            def vjp(x, u):
                y, fn = jax.vjp(f, x)
                return y, fn(u)[0]

            out += _both("vjp", vjp, x, _a(d["u"]))
    elif pid == "B7":
        f = P.three_two(M)
        xs = tuple(_a(d[k]) for k in ("x", "y", "z"))
        out += _both("jacrev", jax.jacrev(f, argnums=(0, 1, 2)), *xs)
        out += _both("jacfwd", jax.jacfwd(f, argnums=(0, 1, 2)), *xs, main=False)
    return out
