"""Running rules on Tensors: dispatch, graph nodes and in-place semantics.

``nodes`` holds the node classes a recorded operation creates, ``dispatch`` runs a
rule on Tensors and records it (NumPy functions too: ``__array_function__``),
``inplace`` gives ``t op= x`` and ``t[i] = x`` NumPy's semantics, ``protocol`` routes
ufunc calls (``__array_ufunc__``, including ``out=``) to the rules.
"""

from funcdiff.ops.dispatch import array_function, astype, call, call_positional, call_ufunc, getitem
from funcdiff.ops.inplace import inplace_ufunc, setitem
from funcdiff.ops.protocol import array_ufunc

__all__ = [
    "call",
    "call_positional",
    "call_ufunc",
    "getitem",
    "astype",
    "inplace_ufunc",
    "setitem",
    "array_ufunc",
    "array_function",
]
