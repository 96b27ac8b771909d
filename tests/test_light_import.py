"""``import funcdiff`` imports no SciPy submodule beyond ``scipy.special`` and none of the
transforms; every public name still works, loaded on first use.

Timing belongs to ``benchmarks/import_time.py``; these tests check which modules load.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import funcdiff as fd

#: Modules that ``import funcdiff`` must leave for first use.
DEFERRED = (
    "scipy.signal",
    "scipy.stats",
    "scipy.optimize",
    "scipy.integrate",
    "scipy.interpolate",
    "scipy.ndimage",
    "scipy.spatial",
    "scipy.linalg",
    "scipy.sparse",
    "funcdiff.check",
    "funcdiff.sparse",
    "funcdiff.replay",
    "funcdiff.optimize",
    "funcdiff.functional",
)


def _fresh(program: str) -> dict:
    """Run ``program`` in a fresh interpreter; it prints a JSON object as its last line."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_funcdiff_defers_scipy_submodules_and_transforms() -> None:
    loaded = _fresh(
        """
        import json, sys
        import funcdiff
        print(json.dumps(sorted(sys.modules)))
        """
    )
    early = [m for m in DEFERRED if m in loaded]
    assert early == [], f"import funcdiff imported {early}"
    assert "scipy.special" in loaded and "funcdiff.rules" in loaded


def test_dispatch_works_before_the_deferred_modules_load() -> None:
    # The rules of SciPy-backed families are registered at import; the SciPy module
    # itself loads on the first call that needs it.
    got = _fresh(
        """
        import json
        import numpy as np
        import funcdiff as fd
        x = fd.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = np.convolve(x, np.array([1.0, -1.0]))
        (g,) = fd.grad(np.sum(y * y), x)
        names = {r.name for r in fd.rules.all_rules()}
        print(json.dumps({
            "grad": g.data.tolist(),
            "registered": sorted(
                n for n in names if n.startswith(("scipy.signal", "scipy.linalg.expm"))
            ),
        }))
        """
    )
    # y = (x0, x1 - x0, x2 - x1, -x2): d/dx sum(y^2) = 2 (y0 - y1, y1 - y2, y2 - y3)
    assert got["grad"] == [0.0, 0.0, 8.0]
    assert got["registered"] == [
        "scipy.linalg.expm",
        "scipy.signal.convolve",
        "scipy.signal.correlate",
    ]


@pytest.mark.parametrize(
    "name",
    ["functional", "linalg", "optimize", "replay", "signal", "sparse", "special", "stats", "check"],
)
def test_submodules_are_attributes(name: str) -> None:
    module = getattr(fd, name)
    assert module.__name__ == f"funcdiff.{name}"
    assert name in dir(fd)


def test_top_level_names_load_on_first_use() -> None:
    from funcdiff.check import DerivativeReport, GradcheckError, check_derivatives, gradcheck
    from funcdiff.sparse import hessian, jacobian

    assert fd.check_derivatives is check_derivatives
    assert fd.gradcheck is gradcheck
    assert fd.DerivativeReport is DerivativeReport and fd.GradcheckError is GradcheckError
    assert fd.sparse_jacobian is jacobian and fd.sparse_hessian is hessian
    for name in fd.__all__:
        assert getattr(fd, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        fd.no_such_name  # noqa: B018


def test_star_import_gives_every_public_name() -> None:
    namespace: dict = {}
    exec("from funcdiff import *", namespace)
    assert set(fd.__all__) <= set(namespace)


def test_a_scipy_function_named_lazily_computes_what_scipy_computes() -> None:
    from funcdiff._core.lazy import LazyReference

    a, b = np.array([1.0, 2.0, 0.5]), np.array([0.25, -1.0])
    ref = LazyReference("scipy.signal", ("convolve",))
    assert (ref.__name__, ref.__module__, ref.__qualname__) == (
        "convolve",
        "scipy.signal",
        "convolve",
    )
    import scipy.signal

    np.testing.assert_array_equal(ref(a, b), scipy.signal.convolve(a, b))
    assert ref.resolve() is scipy.signal.convolve
    assert ref.__doc__ == scipy.signal.convolve.__doc__
    logpdf = LazyReference("scipy.stats").norm.logpdf
    import scipy.stats

    assert logpdf.__self__ is scipy.stats.norm  # once loaded, attributes are SciPy's own
