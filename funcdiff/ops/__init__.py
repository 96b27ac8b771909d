"""Running rules on Tensors: dispatch, graph nodes and in-place semantics.

``nodes`` holds the node classes a recorded operation creates, ``dispatch`` runs a
rule on Tensors and records it, ``inplace`` gives ``t op= x`` and ``t[i] = x`` NumPy's
semantics, ``protocol`` routes NumPy's ``__array_ufunc__`` and ``__array_function__``
calls to the rules.
"""
