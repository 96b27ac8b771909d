"""Verify derivatives against finite differences.

Two entry points:

* :func:`gradcheck` and :func:`gradgradcheck` follow ``torch.autograd.gradcheck``
  (same signatures, defaults and pass rule), but a failure names the worst
  elements in a short table instead of printing two full Jacobians.
* :func:`check_derivatives` returns a :class:`DerivativeReport`: for every
  (output, input) pair the largest absolute and relative errors with their
  multi-indices, the AD value, the finite-difference value and its error estimate at
  the worst element, and a verdict ``pass``, ``fail`` or ``inconclusive``.

How :func:`check_derivatives` differentiates numerically
---------------------------------------------------------
* Steps are relative to each element and depend on the dtype: ``h = c * s`` with
  ``c = eps**(1/3)`` (central) or ``eps**(1/5)`` (Richardson) of the lower-precision
  dtype among the input and the outputs, and ``s = max(|x|, 1)``; for ``|x| < 1/16``
  also ``s = |x|``. Where the error estimate is still poor, steps 16 times larger or
  smaller are tried (up to 16**4 either way) and each element keeps the step with the
  smallest estimate: inputs near 1e6 (``sin``) and near 1e-6 (``log``) both work.
* Every element is evaluated at ``x +- h`` and ``x +- 2h``. The difference between the
  two central quotients estimates the error of the finite difference, to which a
  rounding term ``eps * |f| / h`` is added.
* One-sided quotients at ``h`` and ``2h`` detect kinks: for a smooth function
  ``2 (F(h) - B(h)) - (F(2h) - B(2h))`` is O(h^3); at a kink it stays at the jump of
  the slope. Such elements are inconclusive (or failures when the AD value is outside
  the one-sided interval).
* ``fast_mode=True`` first compares each block along two random directions, with a
  Richardson-extrapolated directional difference, and passes it there only with a
  certificate that no element can be off by more than its tolerance
  (:mod:`funcdiff.check.projection`); other blocks are re-run element-wise. An
  element's tolerance there is at least the element-wise check's rounding floor
  ``6 eps |f| / h``, so large sums still certify in a few dozen evaluations.
* ``method="complex-step"`` evaluates ``func`` on complex ndarrays, ``Im f(x + ih)/h``,
  and cross-checks every element against central differences; where they disagree
  (``abs``, comparisons, ``conj``: code that is not analytic) central differences are
  used.

With ``jac=`` (and ``hess=``) the analytical side is the user's hand-written
derivative, evaluated once at the check point (``hess``'s finite differences run on
``jac`` if given); otherwise it uses the engine only: ``funcdiff.grad`` with a batch of basis
cotangents (``is_grads_batched=True``) gives a whole Jacobian block in one backward
pass; Hessians come from double backward; Jacobian-vector products from the
double-backward trick.
"""

# Two families, each module importing only from those before it in its list.
# Shared by both: _common (the exception, values, formatting, precision, complex
# functions).
# check_derivatives: targets (what is differentiated); finite_differences (quotients,
# error estimates, the step sweep's quotients); results (the report and its records);
# analytical (the derivative under test: AD or the user's jac/hess); judge (one block's
# verdict); projection (fast mode's certified projections); blocks (every block of a
# target); consistency (checks without finite differences); derivative_check
# (check_derivatives).
# torch's checks, in the gradcheck package: gradcheck.jacobians (the case, the numerical
# Jacobian, the analytical side's checks); gradcheck.fast (fast mode); gradcheck itself
# (gradcheck, gradgradcheck).
from funcdiff.check._common import GradcheckError
from funcdiff.check.derivative_check import check_derivatives
from funcdiff.check.gradcheck import gradcheck, gradgradcheck
from funcdiff.check.results import (
    ConsistencyCheck,
    DerivativeReport,
    ElementResult,
    PairResult,
    StepSweep,
)

__all__ = [
    "GradcheckError",
    "gradcheck",
    "gradgradcheck",
    "check_derivatives",
    "DerivativeReport",
    "PairResult",
    "ElementResult",
    "ConsistencyCheck",
    "StepSweep",
]

# Tracebacks and pickles name it funcdiff.check.GradcheckError, where users import it from.
GradcheckError.__module__ = __name__
