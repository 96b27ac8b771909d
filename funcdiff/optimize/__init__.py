"""Exact derivatives for ``scipy.optimize``.

``minimize``, ``least_squares``, ``root``, ``root_scalar`` and ``fixed_point`` wrap
SciPy's functions of the same name and supply exact derivatives computed by funcdiff:
``jac`` always, and ``hess`` or ``hessp`` for the methods that use them. The objective
is plain NumPy code taking a 1-d float64 array.

* Values are cached per ``x`` (the last two points): ``fun``, ``jac``, ``hess`` and
  ``hessp`` at the same point share one recorded forward pass, and every ``hessp``
  at that point reuses one recorded gradient.
* Everything handed back to SciPy is a Python float or a float64 ndarray, never a
  Tensor, so every method (L-BFGS-B's Fortran code included) accepts it.
* :func:`jacobian_operator` and :func:`hessian_operator` give matrix-free
  ``scipy.sparse.linalg.LinearOperator`` objects (``matvec``/``rmatvec``) for
  ``least_squares(tr_solver="lsmr")``, Newton-CG or Krylov solvers.

Which SciPy methods get what (``minimize``)
--------------------------------------------
==================================================  ==========================
method                                              supplied
==================================================  ==========================
Nelder-Mead, Powell, COBYLA, COBYQA                  nothing (derivative-free)
CG, BFGS, L-BFGS-B, TNC, SLSQP, default (None)       ``jac``
Newton-CG, trust-ncg, trust-krylov, trust-constr     ``jac`` and ``hessp``
dogleg, trust-exact                                  ``jac`` and dense ``hess``
==================================================  ==========================

Anything you pass yourself (``jac=``, ``hess=``, ``hessp=``) is used instead.

Sparse derivatives (``sparse=``)
--------------------------------
``least_squares``, ``root`` and ``minimize`` take ``sparse=True`` (or a sparsity
pattern, or ``"auto"``): the Jacobian (the Hessian for ``minimize``) is then computed
by :mod:`funcdiff.sparse`, with its pattern detected from the code at ``x0`` and
coloured once, so each evaluation costs one batched pass with one tangent per colour
instead of one per column. SciPy gets a ``scipy.sparse.csr_array`` where it accepts
one (``least_squares`` with ``method="trf"`` or ``"dogbox"``, ``minimize`` with
``"trust-constr"`` or ``"Newton-CG"``) and the same matrix made dense where it needs
dense input (MINPACK's ``"lm"`` and ``"hybr"``, ``"dogleg"``, ``"trust-exact"``).
``root(method="krylov")`` gets the sparse LU of the Jacobian, refactorised at each
Newton step, as the preconditioner of its inner Krylov solves. ``"auto"`` goes sparse
when the detected pattern holds at most a tenth of the entries and has at least 100
columns.

Replayed derivatives (``replay=True``)
--------------------------------------
With ``replay=True`` the derivatives come from :mod:`funcdiff.replay`: the objective and
its gradient are recorded once (for the shapes of ``x0``) and every later point replays
the recorded NumPy calls, with one call per point for ``fun`` and ``jac`` together
(``minimize``), or a replayed Jacobian (``least_squares``, ``root``). Branches that
change from point to point are guarded and recorded again.

Differentiable solutions (implicit differentiation)
---------------------------------------------------
When ``args`` holds funcdiff Tensors that require grad (directly, or because the call
runs inside :mod:`funcdiff.functional` or under :func:`funcdiff.grad`), the solution is
a Tensor whose derivatives with respect to them follow the implicit function theorem
at the returned point, never the solver's iterations: ``root`` differentiates
``fun(x, *args) = 0``, ``minimize`` ``grad_x fun = 0`` (and ``res.fun`` by the envelope
theorem), ``least_squares`` ``grad_x 0.5 ||fun||^2 = 0`` with its exact Hessian,
``fixed_point`` ``x = func(x, *args)``, ``root_scalar`` ``f(x, *args) = 0`` and
:func:`custom_root` any condition you give. Reverse and forward mode, first and higher
order. The solver itself runs on plain values; the backward solves one linear system with
the exact Jacobian (Hessian) of the condition, dense, or sparse (pattern detected from the
code, sparse LU) when it has at least 100 unknowns and at most a tenth of its entries are
nonzero. ``minimize`` with ``constraints`` differentiates the KKT conditions: the
solution and the multipliers of the active constraints together. A result SciPy reports
unsuccessful, a singular Jacobian and a Tensor closed over instead of passed in ``args``
are refused with an error. See the user guide page "Implicit differentiation".
"""

from funcdiff.optimize._derivatives import (
    Derivatives,
    derivatives,
    hessian_operator,
    jacobian_operator,
)
from funcdiff.optimize._solvers import (
    custom_root,
    fixed_point,
    least_squares,
    minimize,
    root,
    root_scalar,
)

__all__ = [
    "Derivatives",
    "derivatives",
    "minimize",
    "least_squares",
    "root",
    "root_scalar",
    "fixed_point",
    "custom_root",
    "jacobian_operator",
    "hessian_operator",
]
