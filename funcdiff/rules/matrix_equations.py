"""``scipy.linalg`` rules for matrix equations: ``solve_sylvester``, ``sqrtm`` and
``solve_banded``.

The Sylvester equation ``A X + X B = Q`` is its own adjoint's kind: the cotangent of
``Q`` solves ``A^T Y + Y B^T = G``, and the square root's vjp is one Sylvester solve
(``X dX + dX X = dA``). Both vjps call the recorded ``solve_sylvester``, so every order of
derivative is available; complex matrices follow the plain-transpose convention of
holomorphic functions. The public faces are in :mod:`funcdiff.linalg`.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> from funcdiff.linalg import sqrtm
>>> a = fd.tensor([[4.0, 0.0], [0.0, 9.0]], requires_grad=True)
>>> np.trace(sqrtm(a)).backward()  # d/da tr(sqrt(a)) = a^(-1/2) / 2
>>> np.round(a.grad.numpy(), 12)
array([[0.25      , 0.        ],
       [0.        , 0.16666667]])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

from funcdiff._core.registry import Rule, dispatching, register
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.linalg_common import mT
from funcdiff.rules.structure import DENSE

__all__ = ["solve_sylvester", "sqrtm"]


def _each_matrix(solve: Any, *operands: Any) -> Any:
    """``solve`` on each matrix of stacked operands (SciPy's solver takes one matrix;
    a batch of cotangents, or stacked inputs, arrive with leading axes)."""
    lead = np.broadcast_shapes(*(tuple(np.shape(x)[:-2]) for x in operands))
    if not lead:
        return solve(*operands)
    expanded = [np.broadcast_to(x, lead + tuple(np.shape(x)[-2:])) for x in operands]
    flat = [np.reshape(x, (-1,) + tuple(np.shape(x)[-2:])) for x in expanded]
    results = [solve(*(x[i] for x in flat)) for i in range(int(np.prod(lead)))]
    stacked = np.stack(results)
    return np.reshape(stacked, lead + tuple(np.shape(stacked)[-2:]))


# ---------------------------------------------------------------- solve_sylvester
@dispatching
def solve_sylvester(a, b, q):
    """``scipy.linalg.solve_sylvester`` (``A X + X B = Q``), also for stacks of matrices."""
    return _each_matrix(scipy.linalg.solve_sylvester, a, b, q)


def _sylvester_vjp_all(needs, g, ans, a, b, q):
    # dX solves A dX + dX B = dQ - dA X - X dB; the cotangent of Q, Y, solves the
    # transposed equation, and those of A and B follow from it.
    y = solve_sylvester(mT(a), mT(b), g)
    return (
        -np.matmul(y, mT(ans)) if needs[0] else None,
        -np.matmul(mT(ans), y) if needs[1] else None,
        y if needs[2] else None,
    )


register(
    Rule(
        "scipy.linalg.solve_sylvester",
        solve_sylvester.__wrapped__,
        vjp_all=_sylvester_vjp_all,
        cases=(
            Case((Arg((3, 3), kind="wellcond"), Arg((2, 2), kind="wellcond"), Arg((3, 2)))),
            Case((Arg((2, 2), kind="wellcond"), Arg((2, 2), kind="spd"), Arg((2, 2), diff=False))),
        ),
        convention="A and -B must share no eigenvalue (SciPy's condition for a solution)",
        family="linalg",
        structure=DENSE,
        complex=True,
        arg_names=("a", "b", "q"),
    ),
    scipy.linalg.solve_sylvester,
    solve_sylvester,
)


# ---------------------------------------------------------------- sqrtm
@dispatching
def sqrtm(a):
    """``scipy.linalg.sqrtm``: the principal square root (complex where ``a`` has
    negative real eigenvalues, as SciPy's)."""
    return scipy.linalg.sqrtm(a)


def _sqrtm_vjp(g, ans, a):
    # X X = A gives X dX + dX X = dA: the cotangent solves X^T Y + Y X^T = G.
    return solve_sylvester(mT(ans), mT(ans), g)


register(
    Rule(
        "scipy.linalg.sqrtm",
        sqrtm.__wrapped__,
        vjps={0: _sqrtm_vjp},
        cases=(
            Case((Arg((3, 3), kind="spd"),)),
            Case((Arg((2, 2, 2), kind="wellcond"),)),
            Case((Arg((1, 1), 0.5, 2.0),)),
        ),
        convention="the principal square root; its derivative needs X and -X to share no "
        "eigenvalue (a singular root has none)",
        family="linalg",
        structure=DENSE,
        complex=True,
    ),
    scipy.linalg.sqrtm,
    sqrtm,
)
