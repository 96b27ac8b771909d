"""Which SciPy function converted a Tensor to an ndarray or a number, for the errors
that refuse the conversion (SciPy does not dispatch to Tensors: only the call stack
shows it; read on error paths only)."""

from __future__ import annotations

from funcdiff._core.alternatives import alternative, stats_method_name

__all__ = ["scipy_caller", "scipy_advice"]

#: Frames of these modules sit between SciPy and the conversion: skipped.
_OWN_MODULES = (__name__, "funcdiff._core.tensor")


def scipy_caller() -> str | None:
    """The public SciPy function converting a tensor (``scipy.linalg.expm``,
    ``scipy.stats.norm.logpdf``), if any."""
    # SciPy does not dispatch to Tensors: only the call stack (read on error paths) shows
    # it. NumPy frames are skipped; the outermost public one of the first SciPy frames wins.
    import sys
    import types

    def public_name(module: str, name: str) -> str | None:
        parts = module.split(".")
        public = ".".join(parts[: next((i for i, p in enumerate(parts) if p[:1] == "_"), None)])
        found = getattr(sys.modules.get(public), name, None) if name[:1] != "_" else None
        return f"{public}.{name}" if public != "scipy" and found is not None else None

    frame: types.FrameType | None = sys._getframe(1)
    caller = None
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        top = module.partition(".")[0]
        if top == "scipy":
            found = public_name(module, frame.f_code.co_name)
            local = frame.f_locals
            if found is None and "self" in local:  # a scipy.stats distribution's method
                found = stats_method_name(frame.f_code.co_name, local["self"])
            for value in local.values() if found is None else ():
                if isinstance(value, types.FunctionType):  # a decorator's wrapped function
                    found = found or public_name(value.__module__, value.__name__)
            caller = found or caller
        elif top != "numpy" and module not in _OWN_MODULES:
            break
        frame = frame.f_back
    return caller


def scipy_advice(caller: str) -> str:
    """What to do about ``caller``, a SciPy function that refused a Tensor."""
    instead = alternative(caller)
    if instead is None:
        return f"funcdiff has no rule for {caller}."
    return f"use {instead}, which accepts Tensors."
