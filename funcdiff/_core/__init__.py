"""The core: Tensor state, the recorded graph, grad modes and the rule registry.

Nothing here imports anything above it in funcdiff: the operators of the Tensor are
installed by :mod:`funcdiff._methods`, the operations by :mod:`funcdiff.ops`, the
engine lives in :mod:`funcdiff.autograd`. See ``docs/architecture.md``.
"""
