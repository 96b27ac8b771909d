"""What a type checker infers for code that uses Tensors.

``mypy`` checks this file with the package (``[tool.mypy] files`` in pyproject.toml),
so the types that ``py.typed`` promises are tested where users meet them: the
operators and methods that :mod:`funcdiff._methods` installs on the class at import
are declared on :class:`funcdiff.Tensor` for type checkers, and each ``assert_type``
below fails the check when a declaration is missing or wrong. Nothing here runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import assert_type

    import numpy as np

    import funcdiff as fd
    from funcdiff import Tensor

    x = fd.tensor([1.0, 2.0], requires_grad=True)
    a = np.ones(2)
    assert_type(x, Tensor)

    # Operators, reflected operators and comparisons give Tensors.
    assert_type(x + 1.0, Tensor)
    assert_type(2.0 * x, Tensor)
    assert_type(x - a, Tensor)
    assert_type(1.0 / x, Tensor)
    assert_type(x**2, Tensor)
    assert_type(2.0**x, Tensor)
    assert_type(x @ x, Tensor)
    assert_type(x // 2, Tensor)
    assert_type(x % 2, Tensor)
    assert_type(-x, Tensor)
    assert_type(+x, Tensor)
    assert_type(abs(x), Tensor)
    assert_type(x == 1.0, Tensor)
    assert_type(x != 1.0, Tensor)
    assert_type(x < 1.0, Tensor)
    assert_type(x >= 1.0, Tensor)
    assert_type(x[0], Tensor)
    assert_type(x[1:], Tensor)

    # In-place operators keep the variable a Tensor.
    y = x.detach()
    y += 1.0
    y *= x
    assert_type(y, Tensor)
    y[0] = 3.0

    # The installed methods and the class's own.
    assert_type(x.exp(), Tensor)
    assert_type(x.sigmoid(), Tensor)
    assert_type(x.pow(2), Tensor)
    assert_type(x.abs(), Tensor)
    assert_type(x.clamp(0.0), Tensor)
    assert_type(x.clamp(max=1.0), Tensor)
    assert_type(x.astype(np.float32), Tensor)
    assert_type(x.copy(), Tensor)
    assert_type(x.zero_(), Tensor)
    assert_type(x.sum(), Tensor)
    assert_type(x.reshape(2, 1), Tensor)
    assert_type(x.T, Tensor)
    assert_type(x.data, np.ndarray)
    assert_type(x.grad, Tensor | None)
    assert_type(x.requires_grad, bool)
    assert_type(x.backward(), None)
    assert_type(x.backward(np.ones(2), retain_graph=True, inputs=[x]), None)
    assert_type(fd.grad(x.sum(), x), tuple[Tensor | None, ...])
