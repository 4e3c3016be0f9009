"""What an attention shape says about its operands: pitches, key/value heads, the mask.

In: an attention problem shape (B, H, Sq, Skv, D, causal[, q/k/v pitches, kv heads,
mask kind, mask dims]). Out: the row pitches of q, k and v, the key/value heads and which
one a query head reads, the mask's kind, the dims it varies along, the tensor the kernel
reads and its element type. The CPU, GPU and ping-pong programs all read shapes here.
"""

from __future__ import annotations

from typing import Any

from ...results import Shape


def pitches(shape: Shape) -> tuple[int, int, int]:
    """(q, k, v) row pitches in head dims; 0 is contiguous [B, H, S, D]."""
    return tuple(shape[6:9]) if len(shape) > 6 else (0, 0, 0)


def kv_heads(shape: Shape) -> int:
    """The key/value heads: H, or fewer with grouped-query attention."""
    return int(shape[9]) if len(shape) > 9 and shape[9] else int(shape[1])


def kv_head(by: Any, shape: Shape) -> Any:
    """The key/value head query head `by` reads (by itself where every head has its own;
    written so, the programs of such shapes are unchanged)."""
    group = int(shape[1]) // kv_heads(shape)
    return by if group == 1 else by // group


# The mask kinds (shape field 10, `mask`): none, bool (True = attend), additive in the
# inputs' dtype, additive in float32 beside float16/bfloat16 inputs (SDPA takes either).
MASK_NONE, MASK_BOOL, MASK_FLOAT, MASK_FP32 = 0, 1, 2, 3
# A finite stand-in for -inf where a value must order below every finite score (the C
# backend's -ffast-math may fold comparisons with a real -inf): -FLT_MAX, bit for bit.
NEG_MAX_BITS = -8388609  # 0xff7fffff
NEG_INF_BITS = -8388608  # 0xff800000: float32 -inf
NEG_INF_BITS_16 = -1024  # 0xfc00: float16 -inf


def mask_kind(shape: Shape) -> int:
    """The shape's mask kind (MASK_*): 0 without a mask."""
    return int(shape[10]) if len(shape) > 10 else MASK_NONE


def mask_dims(shape: Shape) -> tuple[bool, bool, bool, bool]:
    """Along which of [B, H, Sq, Skv] the mask varies (shape field 11, four binary digits
    in that order: 1011 is a padding mask [B, 1, Sq, Skv]); it broadcasts along the others."""
    digits = f"{int(shape[11]) if len(shape) > 11 else 0:04d}"
    return tuple(d == "1" for d in digits)


def mask_shape(shape: Shape) -> tuple[int, int, int, int]:
    """The mask tensor the kernel reads: [B, H, Sq, Skv] with 1 on each broadcast dim."""
    return tuple(n if full else 1 for n, full in zip((shape[0], shape[1], shape[2], shape[3]), mask_dims(shape)))


def mask_dtype(shape: Shape, dtype: str) -> str:
    """The mask tensor's element type in the kernel: a bool mask is read as its bytes."""
    return {MASK_BOOL: "uint8", MASK_FLOAT: dtype, MASK_FP32: "float32"}[mask_kind(shape)]
