"""RMSNorm over the last dimension with a weight (nn.RMSNorm, eps 1e-6).

In: shape (rows, hidden); inputs x[rows, hidden], weight[hidden].
Out: y = x / sqrt(mean(x^2) + eps) * weight in the input dtype, compared against
`torch.nn.functional.rms_norm(x, (hidden,), weight, 1e-6)`. Statistics are fp32.
Schedules: on CUDA, `block_rows` rows per block held in registers with a block-wide
sum of squares, or for long rows `chunk`-column streaming passes; on CPU, a loop over
rows with the row in a stack buffer (or re-read from the input when it would not fit).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F

from ..results import Shape
from . import _common as C
from . import _rows as R
from ..swap import DERIVED, Route, arg
from .base import Schedule

ACCUM = "float32"
EPS = 1e-6


def _cpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.cpu.language as T

    rows, cols = shape
    BR, buffered = cfg["block_rows"], cfg["buffered"]
    inv_n = 1.0 / cols

    if buffered:
        @T.prim_func
        def rmsnorm_cpu(X: T.Tensor((rows, cols), dtype), Wt: T.Tensor((cols,), dtype),
                        Y: T.Tensor((rows, cols), dtype)):
            with T.Kernel(T.ceildiv(rows, BR)) as bx:
                buf = T.alloc_local((cols,), ACCUM)
                ss = T.alloc_var(ACCUM)
                for r in T.serial(BR):
                    if bx * BR + r < rows:
                        ss = T.float32(0)
                        for j in T.serial(cols):
                            buf[j] = T.cast(X[bx * BR + r, j], ACCUM)
                            ss += buf[j] * buf[j]
                        rstd = T.rsqrt(ss * T.float32(inv_n) + T.float32(cfg["eps"]))
                        for j in T.serial(cols):
                            Y[bx * BR + r, j] = T.cast(buf[j] * rstd * T.cast(Wt[j], ACCUM), dtype)

        return rmsnorm_cpu

    @T.prim_func
    def rmsnorm_cpu_stream(X: T.Tensor((rows, cols), dtype), Wt: T.Tensor((cols,), dtype),
                           Y: T.Tensor((rows, cols), dtype)):
        with T.Kernel(T.ceildiv(rows, BR)) as bx:
            ss = T.alloc_var(ACCUM)
            for r in T.serial(BR):
                if bx * BR + r < rows:
                    ss = T.float32(0)
                    for j in T.serial(cols):
                        ss += T.cast(X[bx * BR + r, j], ACCUM) * T.cast(X[bx * BR + r, j], ACCUM)
                    rstd = T.rsqrt(ss * T.float32(inv_n) + T.float32(cfg["eps"]))
                    for j in T.serial(cols):
                        Y[bx * BR + r, j] = T.cast(T.cast(X[bx * BR + r, j], ACCUM) * rstd * T.cast(Wt[j], ACCUM),
                                                   dtype)

    return rmsnorm_cpu_stream


def _gpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.language as T

    rows, cols = shape
    BR, threads, chunk = cfg["block_rows"], cfg["threads"], cfg["chunk"]
    inv_n = 1.0 / cols

    if chunk == 0:
        BN = R.padded_cols(cols, threads, BR)

        @T.prim_func
        def rmsnorm_rows(X: T.Tensor((rows, cols), dtype), Wt: T.Tensor((cols,), dtype),
                         Y: T.Tensor((rows, cols), dtype)):
            with T.Kernel(T.ceildiv(rows, BR), threads=threads) as bx:
                x = T.alloc_fragment((BR, BN), ACCUM)
                sq = T.alloc_fragment((BR, BN), ACCUM)
                rstd = T.alloc_fragment((BR,), ACCUM)
                for i, j in T.Parallel(BR, BN):
                    x[i, j] = T.if_then_else((j < cols) and (bx * BR + i < rows),
                                             T.cast(X[bx * BR + i, j], ACCUM), T.float32(0))
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(sq, rstd, dim=1)
                for i in T.Parallel(BR):
                    rstd[i] = T.rsqrt(rstd[i] * T.float32(inv_n) + T.float32(cfg["eps"]))
                for i, j in T.Parallel(BR, BN):
                    if (j < cols) and (bx * BR + i < rows):
                        Y[bx * BR + i, j] = T.cast(x[i, j] * rstd[i] * T.cast(Wt[j], ACCUM), dtype)

        return rmsnorm_rows

    n_chunks = C.ceildiv(cols, chunk)

    @T.prim_func
    def rmsnorm_stream(X: T.Tensor((rows, cols), dtype), Wt: T.Tensor((cols,), dtype),
                       Y: T.Tensor((rows, cols), dtype)):
        with T.Kernel(rows, threads=threads) as bx:
            x = T.alloc_fragment((chunk,), ACCUM)
            part = T.alloc_fragment((1,), ACCUM)
            total = T.alloc_fragment((1,), ACCUM)
            total[0] = T.float32(0)
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    x[j] = T.if_then_else(c * chunk + j < cols, T.cast(X[bx, c * chunk + j], ACCUM), T.float32(0))
                    x[j] = x[j] * x[j]
                T.reduce_sum(x, part, dim=0, clear=True)
                total[0] = total[0] + part[0]
            total[0] = T.rsqrt(total[0] * T.float32(inv_n) + T.float32(cfg["eps"]))
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    if c * chunk + j < cols:
                        Y[bx, c * chunk + j] = T.cast(
                            T.cast(X[bx, c * chunk + j], ACCUM) * total[0] * T.cast(Wt[c * chunk + j], ACCUM), dtype)

    return rmsnorm_stream


class RMSNormFamily(R.RowFamily):
    name = "rmsnorm"
    title = "RMSNorm (weighted, last dim)"
    aten_ops = frozenset({"aten::rms_norm"})
    shape_names = ("rows", "hidden")
    extra_inputs = 1
    cpu_schedule = Schedule(R.CPU_DEFAULTS, _cpu_program)
    gpu_schedule = Schedule(R.GPU_DEFAULTS, _gpu_program)
    params = {"eps": EPS}

    def standard_shapes(self, device: str) -> list[Shape]:
        if device == "cpu":
            return [(256, 128), (1024, 512), (2048, 1024), R.awkward_shape((1024, 512))]
        return [(4096, 1024), (16384, 4096), (8192, 8192), (4096, 16384), R.awkward_shape((16384, 4096))]

    def make_inputs(self, shape: Shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
        rows, cols = C.check_shape(shape, self.shape_names, self.name)
        dtype = C.canonical_dtype(dtype)
        g = C.generator(seed)
        x = C.randn((rows, cols), dtype, device, g)
        w = C.randn((cols,), dtype, device, g, scale=0.1, shift=1.0)
        return x, w

    def reference(self, *inputs: torch.Tensor) -> torch.Tensor:
        x, w = inputs
        return F.rms_norm(x, (x.shape[-1],), w, EPS)

    def flops(self, shape: Shape) -> float:
        rows, cols = shape
        # square-accumulate (2), scale, weight: ~4 per element.
        return 4.0 * rows * cols

    def bytes(self, shape: Shape, dtype: str) -> float:
        rows, cols = shape
        return float((2 * rows * cols + cols) * C.dtype_bytes(C.canonical_dtype(dtype)))

    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        return {"float32": (2e-5, 2e-5), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2)}[C.canonical_dtype(dtype)]

    functions = (F.rms_norm,)

    def route(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> Route | str:
        x, shape = arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "normalized_shape")
        w, eps = arg(args, kwargs, 2, "weight"), arg(args, kwargs, 3, "eps")
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if len(shape) != 1:
            return "normalises over more than the last dim"
        cols = int(shape[0])
        if eps is None:  # F.rms_norm's default: the dtype's machine epsilon
            eps = torch.finfo(x.dtype).eps
        if w is None:
            w = DERIVED.constant("ones", cols, x.dtype, x.device, 1.0)
        return R.row_route(x, cols, (w,), dtype, {"eps": float(eps)})


FAMILY = RMSNormFamily()

from . import register  # noqa: E402  (the registry module defines register before importing us)

register(FAMILY)
