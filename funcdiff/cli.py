"""The ``funcdiff`` command line: check a function's derivatives against finite differences.

Usage::

    python -m funcdiff                                # the built-in demonstration
    python -m funcdiff check MODULE:FUNCTION --at VALUES [--at VALUES ...]
                       [--order 2] [--method richardson] [--plot sweep.png] [--json]

``MODULE`` is an importable module name (the current directory is searched first) or
a path to a ``.py`` file; ``FUNCTION`` may be dotted (``Class.method``). Each ``--at``
gives one positional argument: a comma list (``1,2.5,3``; a single number is a
scalar, ``2.5,`` a one-element vector), a JSON list (``[[1,2],[3,4]]``) or a ``.npy``
file. The function is ordinary NumPy code; funcdiff runs it on Tensors.

``--jac MODULE:FUNCTION`` checks a hand-written Jacobian (the gradient of a scalar
function) instead of funcdiff's, and ``--hess MODULE:FUNCTION`` (with ``--order 2``) a
hand-written Hessian; the function then only needs to run on ndarrays.

Exit status (:data:`EXIT_CODES`): 0 if nothing failed (inconclusive elements, e.g.
kinks, do not fail), 1 if a derivative disagrees with finite differences, 2 for bad
command-line arguments, 3 if the function (or ``--jac``/``--hess``) could not be
loaded, raised, or returned something that is not real numbers. Errors are one line
on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from funcdiff.check import DerivativeReport, check_derivatives

__all__ = ["EXIT_CODES", "main", "parse_values", "load_function"]

PROG = "funcdiff"

EXIT_PASS, EXIT_MISMATCH, EXIT_USAGE, EXIT_FUNCTION = 0, 1, 2, 3
EXIT_CODES = {
    EXIT_PASS: "every derivative agrees (inconclusive elements, e.g. kinks, do not fail)",
    EXIT_MISMATCH: "a derivative disagrees with finite differences",
    EXIT_USAGE: "bad command-line arguments",
    EXIT_FUNCTION: "the function (or --jac/--hess) could not be loaded, raised, or "
    "returned something other than real numbers",
}


class UsageError(Exception):
    """A bad command-line argument: reported on one line, exit status 2."""


class FunctionError(Exception):
    """The user's function could not be loaded or raised: one line, exit status 3."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Check derivatives computed by funcdiff against finite differences. "
        "Without a command, run the built-in demonstration.",
    )
    sub = parser.add_subparsers(dest="command")
    check = sub.add_parser(
        "check",
        help="check MODULE:FUNCTION at given points",
        description="Check the derivatives of MODULE:FUNCTION at the point given by --at.",
        epilog="exit status:\n"
        + "\n".join(f"  {code}  {text}" for code, text in EXIT_CODES.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument(
        "function",
        metavar="MODULE:FUNCTION",
        help="module name or path to a .py file, a colon, the function's name",
    )
    check.add_argument(
        "--at",
        action="append",
        metavar="VALUES",
        default=[],
        help="one positional argument: comma list, JSON list or .npy path "
        "(repeat for each argument)",
    )
    check.add_argument(
        "--order",
        type=int,
        choices=(1, 2),
        default=1,
        help="2 also checks Hessian blocks and jvp/vjp consistency",
    )
    check.add_argument(
        "--method",
        choices=("central", "richardson", "complex-step"),
        default="central",
        help="finite-difference method (default central)",
    )
    check.add_argument(
        "--jac",
        metavar="MODULE:FUNCTION",
        default=None,
        help="check this hand-written Jacobian (gradient of a scalar function) instead of "
        "funcdiff's; it takes the same arguments as the function",
    )
    check.add_argument(
        "--hess",
        metavar="MODULE:FUNCTION",
        default=None,
        help="with --order 2: check this hand-written Hessian of a scalar function",
    )
    check.add_argument("--rtol", type=float, default=None, help="relative tolerance")
    check.add_argument("--atol", type=float, default=None, help="absolute tolerance")
    check.add_argument(
        "--fast", action="store_true", help="project on random directions first (large inputs)"
    )
    check.add_argument("--seed", type=int, default=0, help="seed of random directions")
    check.add_argument(
        "--plot",
        metavar="PATH",
        default=None,
        help="write the error-versus-step chart of the worst element (needs matplotlib)",
    )
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    sub.add_parser("demo", help="run the built-in demonstration (the default)")
    return parser


# ---------------------------------------------------------------------- arguments
def parse_values(text: str) -> np.ndarray:
    """Turn one ``--at`` argument into a float64 array.

    Examples
    --------
    >>> parse_values("1, 2.5,3")
    array([1. , 2.5, 3. ])
    >>> parse_values("2.5").shape, parse_values("2.5,").shape
    ((), (1,))
    >>> parse_values("[[1, 2], [3, 4]]").shape
    (2, 2)
    """
    t = text.strip()
    if not t:
        raise UsageError("--at: empty value; give numbers like 1,2,3, a JSON list or a .npy file")
    if t.lower().endswith(".npy"):
        if not os.path.isfile(t):
            raise UsageError(f"--at {t}: no such .npy file")
        try:
            arr = np.load(t, allow_pickle=False)
        except Exception as exc:  # noqa: BLE001  (any unreadable file is a usage error)
            raise UsageError(f"--at {t}: cannot read the .npy file ({exc})") from None
    elif t.startswith("["):
        try:
            data = json.loads(t)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--at {text!r}: not valid JSON ({exc.msg})") from None
        arr = _numeric_array(data, text)
    else:
        parts = [p.strip() for p in t.split(",")]
        vector = len(parts) > 1
        if vector and parts[-1] == "":
            parts = parts[:-1]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            raise UsageError(
                f"--at {text!r}: cannot parse as numbers; give a comma list like 1,2.5,3, "
                "a JSON list like [[1,2],[3,4]] or a .npy file"
            ) from None
        arr = np.array(values if vector else values[0], dtype=np.float64)
    if arr.dtype.kind not in "biuf":
        raise UsageError(f"--at {text!r}: expected real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise UsageError(f"--at {text!r}: values must be finite")
    return arr


def _numeric_array(data: Any, text: str) -> np.ndarray:
    def bad_leaf(v: Any) -> bool:
        if isinstance(v, list):
            return any(bad_leaf(w) for w in v)
        return isinstance(v, bool) or not isinstance(v, (int, float))

    if bad_leaf(data):
        raise UsageError(f"--at {text!r}: the JSON must hold only numbers")
    try:
        return np.array(data, dtype=np.float64)
    except ValueError:
        raise UsageError(f"--at {text!r}: the nested lists are ragged (not rectangular)") from None


def load_function(spec: str) -> tuple[Callable[..., Any], str]:
    """Import ``MODULE:FUNCTION`` (module name or .py path); return it and its label."""
    module_part, sep, attr = spec.rpartition(":")
    if not sep or not module_part or not attr:
        raise UsageError(f"expected MODULE:FUNCTION (for example mymodule:loss), got {spec!r}")
    if module_part.endswith(".py") or os.sep in module_part or "/" in module_part:
        if not os.path.isfile(module_part):
            raise FunctionError(f"cannot import {module_part!r}: no such file")
        name = os.path.splitext(os.path.basename(module_part))[0]
        try:
            loader_spec = importlib.util.spec_from_file_location(name, module_part)
            if loader_spec is None or loader_spec.loader is None:
                raise ImportError("not a Python source file")
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001
            raise FunctionError(
                f"importing {module_part!r} failed: {type(exc).__name__}: {exc}"
            ) from None
    else:
        cwd = os.getcwd()
        if cwd not in sys.path:
            sys.path.insert(0, cwd)
        try:
            module = importlib.import_module(module_part)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if module_part == missing or module_part.startswith(missing + "."):
                raise FunctionError(
                    f"cannot import module {module_part!r}: no module named {missing!r}"
                ) from None
            raise FunctionError(f"importing module {module_part!r} failed: {exc}") from None
        except Exception as exc:  # noqa: BLE001
            raise FunctionError(
                f"importing module {module_part!r} failed: {type(exc).__name__}: {exc}"
            ) from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise FunctionError(f"module {module_part!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise FunctionError(f"{spec!r} is not callable (it is a {type(obj).__name__})")
    return obj, spec


def _check_arity(func: Callable[..., Any], spec: str, count: int) -> None:
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    if count < len(required) or (not varargs and count > len(positional)):
        names = ", ".join(p.name for p in positional)
        expected = (
            f"{len(required)}"
            if len(required) == len(positional) or varargs
            else f"{len(required)} to {len(positional)}"
        )
        raise UsageError(
            f"{spec} takes {expected} positional argument(s) ({names}) but {count} --at "
            f"value(s) were given; give one --at per argument"
        )


def _probe(func: Callable[..., Any], spec: str, values: Sequence[np.ndarray]) -> None:
    """Call the function once: wrong shapes and bad values fail here, as usage errors.

    Plain ndarrays first (the function is NumPy code); if that fails, Tensors without
    gradient recording, for functions that use Tensor methods.
    """
    from funcdiff import no_grad, tensor

    def call(args: Sequence[Any]) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with np.errstate(all="ignore"):
                return func(*args)

    try:
        out = call(values)
    except Exception as exc:  # noqa: BLE001  (reported as a usage error unless Tensors work)
        try:
            with no_grad():
                out = call([tensor(v) for v in values])
        except Exception:  # noqa: BLE001
            shapes = ", ".join(str(v.shape) for v in values)
            raise FunctionError(
                f"calling {spec} at the given --at values (shapes {shapes}) raised "
                f"{type(exc).__name__}: {exc}".replace("\n", " ")
            ) from None
    items = out if isinstance(out, (tuple, list)) else [out]
    for o in items:
        data = o if isinstance(o, np.ndarray) else getattr(o, "data", o)
        try:
            kind = np.asarray(data).dtype.kind
        except Exception:  # noqa: BLE001
            kind = "O"
        if kind not in "biuf":
            raise FunctionError(
                f"{spec} returned {type(o).__name__}; it must return numbers or "
                "arrays of real numbers"
            )


# ---------------------------------------------------------------------- commands
def _run_check(args: argparse.Namespace) -> int:
    if not args.at:
        raise UsageError("give the point with --at VALUES (one --at per positional argument)")
    if args.plot:
        folder = os.path.dirname(os.path.abspath(args.plot))
        if not os.path.isdir(folder):
            raise UsageError(f"--plot {args.plot}: directory {folder!r} does not exist")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError(
                "--plot needs matplotlib; install it with "
                "`pip install funcdiff[plot]` (or `pip install matplotlib`)"
            ) from None
    for name in ("rtol", "atol"):
        value = getattr(args, name)
        if value is not None and not value >= 0:
            raise UsageError(f"--{name} must be a non-negative number, got {value}")
    if args.hess and args.order != 2:
        raise UsageError("--hess checks second derivatives: add --order 2")
    if args.jac and args.order == 2 and not args.hess:
        raise UsageError("--order 2 with --jac needs --hess (the Hessian to check)")
    values = [parse_values(v) for v in args.at]
    func, spec = load_function(args.function)
    jac = load_function(args.jac)[0] if args.jac else None
    hess = load_function(args.hess)[0] if args.hess else None
    _check_arity(func, spec, len(values))
    _probe(func, spec, values)
    try:
        report = check_derivatives(
            func,
            tuple(values),
            order=args.order,
            method=args.method,
            rtol=args.rtol,
            atol=args.atol,
            fast_mode=args.fast,
            seed=args.seed,
            jac=jac,
            hess=hess,
        )
    except ValueError as exc:
        if args.method == "complex-step" and "complex" in str(exc):
            raise UsageError(str(exc).replace("\n", " ")) from None
        raise FunctionError(f"could not check {spec}: {exc}") from None
    except Exception as exc:  # noqa: BLE001  (one line instead of a traceback)
        raise FunctionError(f"could not check {spec}: {type(exc).__name__}: {exc}") from None
    payload = report.to_dict() if args.json else None
    if args.json:
        print(json.dumps(payload, indent=2, allow_nan=False))
    else:
        print(report)
    if args.plot:
        sweep = report.step_sweep()
        sweep.plot(args.plot)
        print(
            f"step sweep of {sweep.label} at {sweep.element} written to {args.plot}",
            file=sys.stderr if args.json else sys.stdout,
        )
    return EXIT_PASS if report.ok else EXIT_MISMATCH


# ---------------------------------------------------------------------- the demonstration
def _rosenbrock(x: Any) -> Any:
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def _rosen_grad_buggy(x: np.ndarray) -> np.ndarray:
    # A classic hand-written mistake: the last component misses its 200 (x_n - x_{n-1}^2).
    g = np.zeros_like(x)
    g[:-1] = -400.0 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2.0 * (1.0 - x[:-1])
    g[1:-1] += 200.0 * (x[1:-1] - x[:-2] ** 2)
    return g


def _hand_written_rosenbrock() -> Callable[[Any], Any]:
    from funcdiff import Function, Tensor, tensor

    class HandWrittenRosenbrock(Function):
        """Rosenbrock with a hand-written (and wrong) backward."""

        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.x = np.array(x.data if isinstance(x, Tensor) else x, dtype=np.float64)
            return np.asarray(_rosenbrock(ctx.x))

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * tensor(_rosen_grad_buggy(ctx.x))

    def rosenbrock_hand_written(x: Any) -> Any:
        return HandWrittenRosenbrock.apply(x)

    return rosenbrock_hand_written


def _demo_problems() -> list[tuple[str, Callable[..., Any], tuple, int, bool]]:
    rng = np.random.default_rng(2024)
    x = np.round(rng.uniform(-1.5, 1.5, 8), 3)
    features = rng.standard_normal((40, 3))
    labels = (rng.uniform(size=40) < 0.5).astype(np.float64)

    def log_likelihood(w: Any, b: Any) -> Any:
        z = features @ w + b
        return np.sum(labels * z - np.logaddexp(0.0, z))

    rhs = np.array([1.0, -2.0, 0.5])

    def quadratic_form_inverse(A: Any) -> Any:
        return rhs @ np.linalg.inv(A) @ rhs

    A = np.array([[4.0, 1.0, 0.5], [0.3, 3.0, 0.2], [0.1, 0.4, 2.5]])
    return [
        ("Rosenbrock function, 8 variables", _rosenbrock, (x,), 2, True),
        (
            "logistic-regression log-likelihood",
            log_likelihood,
            (np.array([0.5, -1.0, 0.25]), np.array(0.1)),
            2,
            True,
        ),
        (
            "quadratic form with a matrix inverse, b^T inv(A) b",
            quadratic_form_inverse,
            (A,),
            2,
            True,
        ),
        (
            "Rosenbrock with a hand-written gradient (deliberately wrong)",
            _hand_written_rosenbrock(),
            (x,),
            1,
            False,
        ),
    ]


def _run_demo() -> int:
    start = time.perf_counter()
    print("funcdiff: derivatives of NumPy code, checked against finite differences\n")
    as_expected = True
    summary = []
    for title, func, inputs, order, correct in _demo_problems():
        print("=" * 100)
        print(title)
        print("=" * 100)
        try:
            report: DerivativeReport = check_derivatives(func, inputs, order=order)
        except TypeError as exc:
            if "no derivative rule" in str(exc):
                print(f"skipped: {exc}\n")
                summary.append(f"skipped ({title}): a derivative rule is missing")
                continue
            raise
        print(report)
        print()
        if correct:
            ok = report.ok
            summary.append(f"{'passed' if ok else 'FAILED'}: {title}")
            as_expected &= ok
        else:
            caught = not report.ok
            as_expected &= caught
            bad = next((p for p in report.pairs if p.verdict == "fail"), None)
            if caught and bad is not None and bad.worst is not None:
                w = bad.worst
                summary.append(
                    f"caught: {title}: worst element {w.label}: AD {w.ad:.9g}, "
                    f"finite differences {w.fd:.9g}"
                )
            else:
                summary.append(f"NOT CAUGHT: {title}")
    print("=" * 100)
    for line in summary:
        print(line)
    verdict = (
        "all as expected"
        if as_expected
        else "UNEXPECTED RESULT (a correct derivative failed, or the bug was missed)"
    )
    print(f"{verdict}; {time.perf_counter() - start:.2f} s")
    print("\nCheck your own function:  python -m funcdiff check MODULE:FUNCTION --at 1,2,3")
    return 0 if as_expected else 1


def _glue_values(argv: list[str]) -> list[str]:
    """``--at -1,2`` -> ``--at=-1,2``: argparse would take ``-1,2`` for an option."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in ("--at", "--rtol", "--atol") and i + 1 < len(argv):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m funcdiff`` and of the ``funcdiff`` script."""
    try:
        args = _parser().parse_args(_glue_values(list(sys.argv[1:] if argv is None else argv)))
        if args.command == "check":
            return _run_check(args)
        return _run_demo()
    except UsageError as exc:
        print(f"{PROG}: error: {exc}".replace("\n", " "), file=sys.stderr)
        return EXIT_USAGE
    except FunctionError as exc:
        print(f"{PROG}: error: {exc}".replace("\n", " "), file=sys.stderr)
        return EXIT_FUNCTION
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as Unix tools do.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1
