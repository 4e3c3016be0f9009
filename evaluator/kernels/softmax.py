"""Softmax over the last dimension.

In: shape (rows, cols); input x[rows, cols] (any leading dims are flattened into rows by
the caller). Out: y = softmax(x, dim=-1) in the input dtype, compared against
`torch.softmax(x, -1)`. Arithmetic is fp32 whatever the storage dtype.
Schedules: on CUDA, a block handles `block_rows` rows held in registers (one read, one
write, max and sum reduced across the block), or for long rows streams `chunk`-column
pieces with an online max/sum and a second pass; on CPU, a loop over rows with the row
in a stack buffer (or re-read from the input when it would not fit).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from ..results import Shape
from . import _common as C
from . import _rows as R
from ..swap import Route, arg
from .base import Schedule

ACCUM = "float32"
LOG2E = 1.4426950408889634


def _cpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.cpu.language as T

    rows, cols = shape
    BR, buffered = cfg["block_rows"], cfg["buffered"]

    if buffered:
        @T.prim_func
        def softmax_cpu(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype)):
            with T.Kernel(T.ceildiv(rows, BR)) as bx:
                buf = T.alloc_local((cols,), ACCUM)
                m = T.alloc_var(ACCUM)
                s = T.alloc_var(ACCUM)
                for r in T.serial(BR):
                    if bx * BR + r < rows:
                        for j in T.serial(cols):
                            buf[j] = T.cast(X[bx * BR + r, j], ACCUM)
                        m = -T.infinity(ACCUM)
                        for j in T.serial(cols):
                            m = T.max(m, buf[j])
                        s = T.float32(0)
                        # One loop for exp and sum: gcc vectorizes expf via libmvec under -ffast-math.
                        for j in T.serial(cols):
                            buf[j] = T.exp(buf[j] - m)
                            s += buf[j]
                        inv = T.float32(1) / s
                        for j in T.serial(cols):
                            Y[bx * BR + r, j] = T.cast(buf[j] * inv, dtype)

        return softmax_cpu

    @T.prim_func
    def softmax_cpu_stream(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype)):
        with T.Kernel(T.ceildiv(rows, BR)) as bx:
            m = T.alloc_var(ACCUM)
            s = T.alloc_var(ACCUM)
            for r in T.serial(BR):
                if bx * BR + r < rows:
                    m = -T.infinity(ACCUM)
                    for j in T.serial(cols):
                        m = T.max(m, T.cast(X[bx * BR + r, j], ACCUM))
                    s = T.float32(0)
                    for j in T.serial(cols):
                        s += T.exp(T.cast(X[bx * BR + r, j], ACCUM) - m)
                    inv = T.float32(1) / s
                    for j in T.serial(cols):
                        Y[bx * BR + r, j] = T.cast(T.exp(T.cast(X[bx * BR + r, j], ACCUM) - m) * inv, dtype)

    return softmax_cpu_stream


def _gpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.language as T

    rows, cols = shape
    BR, threads, chunk = cfg["block_rows"], cfg["threads"], cfg["chunk"]

    if chunk == 0:
        BN = R.padded_cols(cols, threads, BR)

        @T.prim_func
        def softmax_rows(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype)):
            with T.Kernel(T.ceildiv(rows, BR), threads=threads) as bx:
                x = T.alloc_fragment((BR, BN), ACCUM)
                row_max = T.alloc_fragment((BR,), ACCUM)
                row_sum = T.alloc_fragment((BR,), ACCUM)
                # Padding columns read as -inf so they neither win the max nor add to the sum.
                for i, j in T.Parallel(BR, BN):
                    x[i, j] = T.if_then_else((j < cols) and (bx * BR + i < rows),
                                             T.cast(X[bx * BR + i, j], ACCUM), -T.infinity(ACCUM))
                T.reduce_max(x, row_max, dim=1)
                for i, j in T.Parallel(BR, BN):
                    x[i, j] = T.exp2((x[i, j] - row_max[i]) * LOG2E)
                T.reduce_sum(x, row_sum, dim=1)
                for i, j in T.Parallel(BR, BN):
                    if (j < cols) and (bx * BR + i < rows):
                        Y[bx * BR + i, j] = T.cast(x[i, j] / row_sum[i], dtype)

        return softmax_rows

    n_chunks = C.ceildiv(cols, chunk)

    @T.prim_func
    def softmax_online(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype)):
        with T.Kernel(rows, threads=threads) as bx:
            x = T.alloc_fragment((chunk,), ACCUM)
            c_max = T.alloc_fragment((1,), ACCUM)
            c_sum = T.alloc_fragment((1,), ACCUM)
            run_max = T.alloc_fragment((1,), ACCUM)
            run_sum = T.alloc_fragment((1,), ACCUM)
            run_max[0] = -T.infinity(ACCUM)
            run_sum[0] = T.float32(0)
            # Pass 1: running max and a sum rescaled whenever the max grows.
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    x[j] = T.if_then_else(c * chunk + j < cols, T.cast(X[bx, c * chunk + j], ACCUM),
                                          -T.infinity(ACCUM))
                T.reduce_max(x, c_max, dim=0, clear=True)
                new_max = T.max(run_max[0], c_max[0])
                for j in T.Parallel(chunk):
                    x[j] = T.exp2((x[j] - new_max) * LOG2E)
                T.reduce_sum(x, c_sum, dim=0, clear=True)
                run_sum[0] = run_sum[0] * T.exp2((run_max[0] - new_max) * LOG2E) + c_sum[0]
                run_max[0] = new_max
            # Pass 2: normalise; the second read mostly hits L2 for one row.
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    if c * chunk + j < cols:
                        Y[bx, c * chunk + j] = T.cast(
                            T.exp2((T.cast(X[bx, c * chunk + j], ACCUM) - run_max[0]) * LOG2E) / run_sum[0], dtype)

    return softmax_online


class SoftmaxFamily(R.RowFamily):
    name = "softmax"
    title = "Softmax (last dim)"
    aten_ops = frozenset({"aten::softmax", "aten::_softmax"})
    shape_names = ("rows", "cols")
    extra_inputs = 0
    cpu_schedule = Schedule(R.CPU_DEFAULTS, _cpu_program)
    gpu_schedule = Schedule(R.GPU_DEFAULTS, _gpu_program)

    def standard_shapes(self, device: str) -> list[Shape]:
        if device == "cpu":
            return [(256, 128), (1024, 128), (2048, 1024), R.awkward_shape((1024, 128))]
        return [(4096, 1024), (16384, 4096), (8192, 8192), (2048, 32768), R.awkward_shape((16384, 4096))]

    def make_inputs(self, shape: Shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
        rows, cols = C.check_shape(shape, self.shape_names, self.name)
        dtype = C.canonical_dtype(dtype)
        # Attention-logit-like spread (std 3) so the max subtraction matters.
        return (C.randn((rows, cols), dtype, device, C.generator(seed), scale=3.0),)

    def reference(self, *inputs: torch.Tensor) -> torch.Tensor:
        return torch.softmax(inputs[0], -1)

    def flops(self, shape: Shape) -> float:
        rows, cols = shape
        # max, subtract, exp, sum, divide: 5 operations per element.
        return 5.0 * rows * cols

    def bytes(self, shape: Shape, dtype: str) -> float:
        rows, cols = shape
        return 2.0 * rows * cols * C.dtype_bytes(C.canonical_dtype(dtype))

    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        # Outputs lie in [0, 1]: atol covers about one output ulp near 1.
        return {"float32": (1e-6, 1e-5), "float16": (1e-3, 1e-3), "bfloat16": (4e-3, 1e-2)}[C.canonical_dtype(dtype)]

    functions = (torch.softmax, torch.nn.functional.softmax, torch.Tensor.softmax)

    def route(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> Route | str:
        x = arg(args, kwargs, 0, "input")
        dim = arg(args, kwargs, 1, "dim")
        if func is torch.nn.functional.softmax:
            out_dtype = arg(args, kwargs, 3, "dtype")
        else:
            out_dtype = arg(args, kwargs, 2, "dtype")
        if dim is None or x.dim() == 0 or int(dim) not in (-1, x.dim() - 1):
            return "softmax over a dim other than the last"
        if out_dtype is not None and out_dtype != x.dtype:
            return "softmax with a dtype cast"
        return R.row_route(x, int(x.shape[-1]), (), dtype)


FAMILY = SoftmaxFamily()

from . import register  # noqa: E402  (the registry module defines register before importing us)

register(FAMILY)
