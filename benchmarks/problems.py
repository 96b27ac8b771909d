"""The benchmark problems: data, the plain NumPy forward, and an independent reference.

Every library computes the same mathematical object from the same float64 data. The
references are closed forms or SciPy's own derivatives (``scipy.optimize.rosen_hess``,
``rosen_hess_prod``); a library whose answer disagrees with the reference gets a FAILED
cell instead of a time.

Functions are written once against a small namespace ``m`` (``m.tanh``, ``m.sum``, ...)
so that every library runs the same formula with its own primitives; funcdiff runs the
NumPy version itself, which is the point of funcdiff.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import scipy.optimize

NP = SimpleNamespace(tanh=np.tanh, sin=np.sin, exp=np.exp, sum=np.sum)


# --------------------------------------------------------------------- the functions
def b1_loss(m: Any, W: Any, b: Any) -> Callable:
    """``x -> sum(tanh(W @ x + b) ** 2)`` (W and b are constants, the gradient is in x)."""

    def f(x):
        return m.sum(m.tanh(W @ x + b) ** 2)

    return f


def tanh_mv(m: Any, A: Any) -> Callable:
    """``x -> tanh(A @ x) * x`` (B2 and B6)."""

    def f(x):
        return m.tanh(A @ x) * x

    return f


def rosen(m: Any) -> Callable:
    """The Rosenbrock function in ``scipy.optimize.rosen``'s formula."""

    def f(x):
        return m.sum(100.0 * (x[1:] - x[:-1] ** 2.0) ** 2.0 + (1 - x[:-1]) ** 2.0)

    return f


B5_OPS = 1000


def tiny_chain(m: Any, c: Any, d: Any) -> Callable:
    """1000 elementwise ops on a small array: (sin, * c, + d, tanh) x 250, then a sum.

    The final sum is not counted as one of the 1000 ops.
    """

    def f(x):
        y = x
        for _ in range(B5_OPS // 4):
            y = m.sin(y)
            y = y * c
            y = y + d
            y = m.tanh(y)
        return m.sum(y)

    return f


def three_two(m: Any) -> Callable:
    """B7: ``(x, y, z) -> (x*y + sin z, exp(x)*z - y**2 + sum(x*z))`` on size-5 vectors."""

    def f(x, y, z):
        return x * y + m.sin(z), m.exp(x) * z - y**2 + m.sum(x * z)

    return f


# --------------------------------------------------------------------- references
def b1_reference(W, b, x):
    t = np.tanh(W @ x + b)
    return [np.sum(t * t), (2.0 * t * (1.0 - t * t)) @ W]


def tanh_mv_jacobian(A, x):
    t = np.tanh(A @ x)
    J = ((1.0 - t * t) * x)[:, None] * A
    J[np.diag_indices_from(J)] += t
    return J


def chain_reference(c, d, x):
    """Value and gradient of :func:`tiny_chain` by the complex step (exact to rounding).

    Every output element depends on its own input element only, so one complex-step
    evaluation gives the whole gradient: d f / d x_k = Im f(x + i h e) / h elementwise.
    """
    h = 1e-30
    y = x + 1j * h
    for _ in range(B5_OPS // 4):
        y = np.tanh(np.sin(y) * c + d)
    return [np.sum(y.real), y.imag / h]


def three_two_reference(x, y, z):
    ones = np.ones((x.size, 1))
    return [
        np.diag(y),
        np.diag(x),
        np.diag(np.cos(z)),
        np.diag(np.exp(x) * z) + ones * z,
        np.diag(-2.0 * y),
        np.diag(np.exp(x)) + ones * x,
    ]


# --------------------------------------------------------------------- problem table
@dataclass
class Problem:
    """One row of the results table."""

    key: str  # unique row id, e.g. "B2 n=1000"
    pid: str  # problem family, e.g. "B2"
    label: str
    data: dict[str, np.ndarray]
    forward: Callable[[], Any]  # the plain NumPy forward of the same f
    reference: Callable[[], list]  # flat list of arrays
    rtol: float = 1e-9
    atol: float = 1e-12
    ops: int = 1  # operations per call, for per-op figures (B5)
    extra: dict[str, Any] = field(default_factory=dict)


def make_problems() -> list[Problem]:
    rng = np.random.default_rng(20240521)
    problems = []

    n = 2000
    W = rng.standard_normal((n, n)) / np.sqrt(n)
    b = rng.standard_normal(n)
    x = rng.standard_normal(n)
    f1 = b1_loss(NP, W, b)
    problems.append(
        Problem(
            "B1",
            "B1",
            "value+grad sum(tanh(W@x+b)**2), W 2000x2000",
            {"W": W, "b": b, "x": x},
            (lambda x=x: f1(x)),
            (lambda W=W, b=b, x=x: b1_reference(W, b, x)),
            rtol=1e-9,
            atol=1e-10,
        )
    )

    for n in (300, 1000):
        A = rng.standard_normal((n, n)) / np.sqrt(n)
        x = rng.standard_normal(n)
        f2 = tanh_mv(NP, A)
        problems.append(
            Problem(
                f"B2 n={n}",
                "B2",
                f"jacobian tanh(A@x)*x, n=m={n}",
                {"A": A, "x": x},
                (lambda f2=f2, x=x: f2(x)),
                (lambda A=A, x=x: [tanh_mv_jacobian(A, x)]),
            )
        )

    for n in (100, 500):
        x = rng.uniform(-2.0, 2.0, n)
        fr = rosen(NP)
        problems.append(
            Problem(
                f"B3 n={n}",
                "B3",
                f"hessian of Rosenbrock, n={n}",
                {"x": x},
                (lambda x=x, fr=fr: fr(x)),
                (lambda x=x: [scipy.optimize.rosen_hess(x)]),
                rtol=1e-10,
                atol=1e-8,
            )
        )

    n = 1_000_000
    x = rng.uniform(-2.0, 2.0, n)
    v = rng.standard_normal(n)
    fr = rosen(NP)
    problems.append(
        Problem(
            "B4",
            "B4",
            "one hvp of Rosenbrock, n=1e6",
            {"x": x, "v": v},
            (lambda x=x: fr(x)),
            (lambda x=x, v=v: [scipy.optimize.rosen_hess_prod(x, v)]),
            rtol=1e-10,
            atol=1e-8,
        )
    )

    x = rng.uniform(-1.0, 1.0, 10)
    # Near-neutral factors keep the gradient of the 1000-op chain well inside float range.
    c = rng.uniform(0.95, 1.05, 10)
    d = rng.uniform(-0.01, 0.01, 10)
    f5 = tiny_chain(NP, c, d)
    problems.append(
        Problem(
            "B5",
            "B5",
            "1000 tiny elementwise ops (size 10), value+grad",
            {"x": x, "c": c, "d": d},
            (lambda x=x: f5(x)),
            (lambda c=c, d=d, x=x: chain_reference(c, d, x)),
            rtol=1e-9,
            atol=0.0,
            ops=B5_OPS,
        )
    )

    n = 1000
    A = rng.standard_normal((n, n)) / np.sqrt(n)
    x = rng.standard_normal(n)
    u = rng.standard_normal(n)
    v = rng.standard_normal(n)
    f6 = tanh_mv(NP, A)
    J6 = []

    def jac6():
        if not J6:
            J6.append(tanh_mv_jacobian(A, x))
        return J6[0]

    data6 = {"A": A, "x": x, "u": u, "v": v}
    problems.append(
        Problem(
            "B6 jvp",
            "B6",
            "one jvp of tanh(A@x)*x, n=1000",
            data6,
            lambda: f6(x),
            lambda: [f6(x), jac6() @ v],
        )
    )
    problems.append(
        Problem(
            "B6 vjp",
            "B6",
            "one vjp of tanh(A@x)*x, n=1000",
            data6,
            lambda: f6(x),
            lambda: [f6(x), u @ jac6()],
        )
    )

    xs = [rng.uniform(-1.0, 1.0, 5) for _ in range(3)]
    f7 = three_two(NP)
    problems.append(
        Problem(
            "B7",
            "B7",
            "full jacobian, 3 inputs -> 2 outputs, size 5",
            {"x": xs[0], "y": xs[1], "z": xs[2]},
            lambda: f7(*xs),
            lambda: three_two_reference(*xs),
        )
    )
    return problems
