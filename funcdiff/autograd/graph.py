"""The recorded graph, as ``torch.autograd.graph``: the :class:`Node` type, and hooks on
the values saved for backward (:class:`saved_tensors_hooks`).

Examples
--------
>>> import funcdiff as fd
>>> from funcdiff.autograd.graph import Node
>>> x = fd.tensor([1.0, 2.0], requires_grad=True)
>>> isinstance((x * x).grad_fn, Node)
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from funcdiff._core.graph import WATCHERS, Node
from funcdiff.autograd import saved_hooks

__all__ = ["Node", "saved_tensors_hooks"]


def _pack_node(node: Node) -> None:
    hooks = saved_hooks.active()
    if hooks is not None:
        node.pack_saved(*hooks)


class saved_tensors_hooks:
    """Context manager: values saved for backward inside it go through ``pack`` and
    ``unpack``.

    ``pack(tensor)`` is called on each value an operation saves (its inputs and
    output as the derivative rule needs them, and ``ctx.save_for_backward``'s Tensors)
    and may return anything; ``unpack(packed)`` receives exactly what ``pack`` returned
    when backward needs the value, and must return a Tensor of the same values. Use it
    to move saved values elsewhere (to disk, compressed) or to count them. The hooks
    apply in the thread that entered the context; nested contexts use the innermost.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.autograd.graph import saved_tensors_hooks
    >>> packed = []
    >>> def pack(t):
    ...     packed.append(t.shape)
    ...     return t.data.copy()
    >>> x = fd.tensor([1.0, 2.0], requires_grad=True)
    >>> with saved_tensors_hooks(pack, lambda a: fd.tensor(a)):
    ...     y = np.sin(x)
    >>> y.backward(np.ones(2))
    >>> x.grad
    tensor([ 0.54030231, -0.41614684])
    >>> packed
    [(2,)]
    """

    def __init__(self, pack_hook: Callable[[Any], Any], unpack_hook: Callable[[Any], Any]):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("saved_tensors_hooks(pack_hook, unpack_hook) expects two callables")
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> saved_tensors_hooks:
        saved_hooks.push(self.pack_hook, self.unpack_hook)
        WATCHERS.append(_pack_node)
        return self

    def __exit__(self, *exc: object) -> None:
        WATCHERS.remove(_pack_node)
        saved_hooks.pop()
