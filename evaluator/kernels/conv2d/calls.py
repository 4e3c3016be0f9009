"""Reading one convolution call: its stride and padding arguments as the conv2d family's
shape needs them, and the memory layout of its input.

In: the values F.conv2d / the aten convolution ops receive (ints, pairs, "same" or
"valid"), and a 4-D tensor's sizes and strides. Out: (h, w) pairs or None when the call
is not one the family computes, and whether the tensor is channels_last. The profiler
(conv2d.problem_shape) and the router (conv2d.route) both decide with these, so a
kernel tuned for a profiled call is the one its call is routed to.
"""

from __future__ import annotations

from typing import Any, Sequence

from ...results import Shape


def channels_last(shape: Shape) -> Shape:
    """The same convolution on channels_last tensors (its groups, if any, kept)."""
    return tuple(shape[:9]) + (0,) + tuple(shape[10:])


def strides_are_channels_last(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a 4-D tensor of `sizes` with `strides` is channels_last and not also plainly
    contiguous (C == 1 or H == W == 1 are both: those run as NCHW). The profiler and the
    router decide the layout with this one rule, so a tuned kernel is the one routed."""
    N, Cn, H, W = (int(v) for v in sizes)
    contiguous = [Cn * H * W, H * W, W, 1]
    last = [H * W * Cn, 1, W * Cn, Cn]

    def same(a: Sequence[int]) -> bool:  # size-1 dims may carry any stride
        return all(int(st) == want or int(n) == 1 for st, want, n in zip(strides, a, sizes))

    return same(last) and not same(contiguous)


def pair(value: Any) -> tuple[int, int] | None:
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            return int(value[0]), int(value[0])
        if len(value) == 2:
            return int(value[0]), int(value[1])
        return None
    if isinstance(value, int):
        return value, value
    return None


def string_padding(mode: str, R: int, S: int, stride: tuple[int, int] | None) -> tuple[int, int] | None:
    if mode == "valid":
        return 0, 0
    # "same" is symmetric only for odd filters (PyTorch allows it only at stride 1).
    if mode == "same" and stride == (1, 1) and R % 2 and S % 2:
        return (R - 1) // 2, (S - 1) // 2
    return None
