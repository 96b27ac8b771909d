"""The live views of each base Tensor.

An in-place change of a base (or of one of its views) re-derives its live views from
the base's new history (:mod:`funcdiff.ops.inplace`), as torch's views do; this
registry is how it finds them. The operation layer registers each view it creates.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from funcdiff._core.tensor import Tensor

__all__ = ["register_view", "live_views"]


#: The views of each base Tensor, by the base's id: ``[weakref to the base, weakrefs to
#: its views...]``. An in-place change of the base (or of one of its views) re-derives
#: the live views from the base's new history. Keyed by id, since Tensors compare
#: elementwise; the entry goes with the base.
_VIEWS: dict[int, list] = {}


def _forget_base(key: int) -> Callable[[Any], None]:
    def forget(_: Any) -> None:
        _VIEWS.pop(key, None)

    return forget


def register_view(view: Tensor, base: Tensor) -> None:
    """Record that ``view`` aliases part of ``base``'s memory (``view._view_of``)."""
    view._view_of = base
    key = id(base)
    refs = _VIEWS.get(key)
    if refs is None or refs[0]() is not base:
        refs = _VIEWS[key] = [weakref.ref(base, _forget_base(key))]
    elif len(refs) > 64 and len(refs) & (len(refs) - 1) == 0:
        refs[1:] = [r for r in refs[1:] if r() is not None]  # drop dead views now and then
    refs.append(weakref.ref(view))


def live_views(base: Tensor) -> list[Tensor]:
    """The views of ``base`` that are still alive, oldest first."""
    refs = _VIEWS.get(id(base))
    if refs is None or refs[0]() is not base:
        return []
    views = [v for v in (r() for r in refs[1:]) if v is not None]
    refs[1:] = [weakref.ref(v) for v in views]
    return views
