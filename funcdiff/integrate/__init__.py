"""Derivatives through SciPy's ODE solvers and quadrature.

:func:`solve_ivp`, :func:`odeint` and :func:`quad` have SciPy's signatures and run
SciPy's solvers. When an input is a funcdiff Tensor, the result is a Tensor whose
derivatives are those of the exact solution: forward sensitivities solved with the
state, or an adjoint solved backward on the forward solution's dense output, never the
derivative of the solver's steps.

>>> import numpy as np
>>> import funcdiff as fd
>>> from funcdiff.integrate import solve_ivp
>>> y0 = fd.tensor([1.0, 0.0], requires_grad=True)
>>> res = solve_ivp(lambda t, y: np.stack([y[1], -y[0]]), (0.0, np.pi / 2), y0,
...                 t_eval=[np.pi / 2], rtol=1e-10, atol=1e-12)
>>> np.round(fd.grad(res.y[1, 0], y0)[0].data, 6)     # y1(pi/2) = -y0[0]
array([-1.,  0.])
"""

from funcdiff.integrate._odeint import odeint
from funcdiff.integrate._quad import quad
from funcdiff.integrate._solve_ivp import solve_ivp

__all__ = ["solve_ivp", "odeint", "quad"]
