"""The Tensor's former home, kept importable: it moved to :mod:`funcdiff._core.tensor`.

Pickles of Tensors written by earlier versions name ``funcdiff._tensor._rebuild``;
they load through this alias.
"""

from funcdiff._core.tensor import Tensor, _rebuild, as_tensor, tensor

__all__ = ["Tensor", "tensor", "as_tensor", "_rebuild"]
