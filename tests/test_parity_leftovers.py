"""torch.autograd parity: a custom Function's jvp under gradcheck, forward-mode tangents
under no_grad, ``np.imag`` as a view, ``np.put_along_axis`` on Tensors and NumPy's own
scalar types in ``funcdiff.numpy``.

Each behaviour is compared with torch 2.13 where it is installed (those tests skip
without it) and otherwise with closed forms and central differences.
"""

from __future__ import annotations

from typing import Any

import pytest

import funcdiff as fd
from funcdiff.check import GradcheckError


def _torch() -> Any:
    return pytest.importorskip("torch")


# ---------------------------------------------------------------- gradcheck uses jvp
def _cube(jvp_factor: float | None, calls: list[int]) -> type:
    """``x**3`` as a custom Function; a jvp ``jvp_factor * x**2 * t`` when given (3 is
    right, anything else wrong), none otherwise."""

    class Cube(fd.autograd.Function):
        @staticmethod
        def forward(x):
            return x**3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3.0 * x**2 * g

    if jvp_factor is not None:

        def jvp(ctx, t):
            calls.append(1)
            (x,) = ctx.saved_tensors
            return jvp_factor * x**2 * t

        Cube.jvp = staticmethod(jvp)  # type: ignore[attr-defined]
    return Cube


@pytest.mark.parametrize("fast_mode", [False, True])
def test_gradcheck_forward_ad_uses_the_functions_jvp(fast_mode: bool) -> None:
    x = fd.tensor([0.5, -1.2, 2.0], requires_grad=True)
    calls: list[int] = []
    right = _cube(3.0, calls)
    assert fd.gradcheck(right.apply, (x,), check_forward_ad=True, fast_mode=fast_mode)
    assert calls, "gradcheck(check_forward_ad=True) did not call the Function's jvp"
    # A wrong jvp with a right backward: only the forward-mode check can see it.
    wrong = _cube(2.0, [])
    assert fd.gradcheck(wrong.apply, (x,), fast_mode=fast_mode)
    with pytest.raises(GradcheckError, match="computed with forward mode mismatch") as info:
        fd.gradcheck(
            wrong.apply, (x,), check_forward_ad=True, check_backward_ad=False, fast_mode=fast_mode
        )
    # d/dx x**3 at 2.0 is 12; the wrong jvp gives 8: the table names that element.
    assert "12" in str(info.value) and "8" in str(info.value)
    # Without a jvp forward mode transposes backward, and the check still passes.
    plain = _cube(None, [])
    assert fd.gradcheck(plain.apply, (x,), check_forward_ad=True, fast_mode=fast_mode)
    assert fd.gradcheck(plain.apply, (x,), check_forward_ad=True, check_batched_forward_grad=True)


def test_gradcheck_forward_ad_agrees_with_torch_on_a_wrong_jvp() -> None:
    torch = _torch()

    class TorchCube(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x**3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3.0 * x**2 * g

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return 2.0 * x**2 * t

    values = [0.5, -1.2, 2.0]
    tx = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    x = fd.tensor(values, requires_grad=True)
    for check in (torch.autograd.gradcheck, fd.gradcheck):
        fn = TorchCube.apply if check is torch.autograd.gradcheck else _cube(2.0, []).apply
        arg = tx if check is torch.autograd.gradcheck else x
        assert check(fn, (arg,), check_forward_ad=False)
        assert not check(
            fn, (arg,), check_forward_ad=True, check_backward_ad=False, raise_exception=False
        )
