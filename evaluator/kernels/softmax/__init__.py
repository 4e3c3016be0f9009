"""Softmax over the last dimension (or one followed only by dims of size 1).

In: shape (rows, cols); input x[rows, cols] (any leading dims are flattened into rows by
the caller). Out: y = softmax(x, dim=-1) in the input dtype, compared against
`torch.softmax(x, -1)`. Arithmetic is fp32 whatever the storage dtype.
Schedules: on CUDA, a block handles `block_rows` rows held in registers (one read, one
write, max and sum reduced across the block), or for long rows streams `chunk`-column
pieces with an online max/sum and a second pass; on CPU, a loop over rows with the row
in a stack buffer (or re-read from the input when it would not fit).
The CUDA whole-row schedule has a `flat` variant for rows that are not a multiple of 16
bytes (197 fp16 columns: ViT attention), whose global accesses would otherwise be
scalar: the block's rows, one contiguous span of block_rows * cols elements, are copied
into shared memory in 16-byte vectors (block_rows is a multiple of 16 / element bytes,
so the span is whole vectors), reduced per row from there, and the output span written
back the same way; the input's end cuts the last block's copy, element-wise only in its
last vector. The search space offers flat configs first for such rows.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import torch

from ...results import Hardware, KernelConfig, Shape
from .. import common as C
from .. import rows as R
from ...routing.calls import arg
from ...routing.router import Route
from ..base import Schedule

ACCUM = "float32"
LOG2E = 1.4426950408889634

# GPU: `flat` = True stages each block's rows through shared memory as one contiguous
# span so global accesses are 16-byte vectors even when a row is not a multiple of 16
# bytes (197 fp16 columns: scalar 2-byte accesses otherwise). Off by default, so the
# shared configs keep their meaning; whole rows only (chunk = 0).
# fast_math: built with nvcc --use_fast_math (_common.with_fast_math): the exp and the
# division by the row sum as single MUFU instructions (the 37824x197 flat config's sm_90a
# build: 856 SASS instructions without, see benchmarks/ptx_stats.py).
GPU_DEFAULTS = {**R.GPU_DEFAULTS, "flat": False, "fast_math": True}
VEC_BYTES = 16
FLAT_THREADS = (64, 128, 256)
FLAT_MAX_CONFIGS = 4


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


def _exp_rows(T, BR: int, BN: int):
    """A macro: x[i, :] becomes exp(x[i, :] - max of row i) in place and row_sum[i] its
    sum. Padding read as -inf neither wins the max nor adds to the sum."""

    @T.macro
    def exp_rows(x, row_max, row_sum):
        T.reduce_max(x, row_max, dim=1)
        for i, j in T.Parallel(BR, BN):
            x[i, j] = T.exp2((x[i, j] - row_max[i]) * LOG2E)
        T.reduce_sum(x, row_sum, dim=1)

    return exp_rows


def _rows_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.language as T

    rows, cols = shape
    BR, threads = cfg["block_rows"], cfg["threads"]
    BN = R.padded_cols(cols, threads, BR)
    exp_rows = _exp_rows(T, BR, BN)

    @T.prim_func
    def softmax_rows(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype)):
        with T.Kernel(T.ceildiv(rows, BR), threads=threads) as bx:
            x = T.alloc_fragment((BR, BN), ACCUM)
            row_max = T.alloc_fragment((BR,), ACCUM)
            row_sum = T.alloc_fragment((BR,), ACCUM)
            for i, j in T.Parallel(BR, BN):
                x[i, j] = T.if_then_else(
                    (j < cols) and (bx * BR + i < rows), T.cast(X[bx * BR + i, j], ACCUM), -T.infinity(ACCUM)
                )
            exp_rows(x, row_max, row_sum)
            for i, j in T.Parallel(BR, BN):
                if (j < cols) and (bx * BR + i < rows):
                    Y[bx * BR + i, j] = T.cast(x[i, j] / row_sum[i], dtype)

    return softmax_rows


def _copy_span(T, span: int, vec: int, threads: int):
    """A macro: copy `valid` (<= span) elements from src[src_base:] to dst[dst_base:]
    (flat buffers), thread t taking vectors t, t + threads, ... The bases are multiples
    of `vec` (the config check makes block_rows * cols one), so whole vectors compile to
    16-byte accesses; only the one vector the input's end cuts is copied element-wise."""

    @T.macro
    def copy_span(src, dst, src_base, dst_base, valid):
        tx = T.get_thread_binding()
        for k in T.serial(T.ceildiv(span // vec, threads)):
            v = (k * threads + tx) * vec
            if v + vec <= valid:
                for e in T.vectorized(vec):
                    dst[dst_base + v + e] = src[src_base + v + e]
            elif v < valid:
                for e in T.serial(vec):
                    if v + e < valid:
                        dst[dst_base + v + e] = src[src_base + v + e]

    return copy_span


def _flat_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.language as T

    rows, cols = shape
    BR, threads = cfg["block_rows"], cfg["threads"]
    BN = R.padded_cols(cols, threads, BR)
    span, total = BR * cols, rows * cols
    exp_rows = _exp_rows(T, BR, BN)
    copy_span = _copy_span(T, span, VEC_BYTES // C.dtype_bytes(dtype), threads)

    @T.prim_func
    def softmax_flat(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype)):
        with T.Kernel(T.ceildiv(rows, BR), threads=threads) as bx:
            # The block's rows are one contiguous span of the flat tensor, 16-byte aligned
            # where a single row is not; shared memory turns it back into rows.
            Xf = T.reshape(X, (total,))
            Yf = T.reshape(Y, (total,))
            s = T.alloc_shared((span,), dtype)
            x = T.alloc_fragment((BR, BN), ACCUM)
            row_max = T.alloc_fragment((BR,), ACCUM)
            row_sum = T.alloc_fragment((BR,), ACCUM)
            valid = T.min(span, total - bx * span)  # the last block may hold fewer rows
            copy_span(Xf, s, bx * span, 0, valid)
            for i, j in T.Parallel(BR, BN):
                x[i, j] = T.if_then_else(
                    (j < cols) and (bx * BR + i < rows), T.cast(s[i * cols + j], ACCUM), -T.infinity(ACCUM)
                )
            exp_rows(x, row_max, row_sum)
            for i, j in T.Parallel(BR, BN):
                if j < cols:
                    s[i * cols + j] = T.cast(x[i, j] / row_sum[i], dtype)
            copy_span(s, Yf, 0, bx * span, valid)

    return softmax_flat


def _online_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.language as T

    rows, cols = shape
    threads, chunk = cfg["threads"], cfg["chunk"]
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
                    x[j] = T.if_then_else(c * chunk + j < cols, T.cast(X[bx, c * chunk + j], ACCUM), -T.infinity(ACCUM))
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
                            T.exp2((T.cast(X[bx, c * chunk + j], ACCUM) - run_max[0]) * LOG2E) / run_sum[0], dtype
                        )

    return softmax_online


def _gpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    if cfg["flat"]:
        prim = _flat_program(shape, dtype, cfg)
    else:
        prim = _rows_program(shape, dtype, cfg) if cfg["chunk"] == 0 else _online_program(shape, dtype, cfg)
    return C.with_fast_math(prim, cfg["fast_math"])


def flat_step(dtype: str) -> int:
    """What a flat config's block_rows must be a multiple of: then block_rows * cols
    elements are whole 16-byte vectors for every cols, so a config tuned on one shape
    stays buildable on verification's awkward shape (cols moved by a few)."""
    return VEC_BYTES // C.dtype_bytes(dtype)


def flat_smem(cfg: dict[str, Any], cols: int, dtype: str) -> int:
    # The staged span (input, then output in place) plus the reductions' scratch.
    return cfg["block_rows"] * cols * C.dtype_bytes(dtype) + R.reduce_smem(cfg)


def flat_config_error(cfg: dict[str, Any], cols: int, dtype: str) -> str | None:
    if not cfg["flat"]:
        return None
    if cfg["chunk"]:
        return "flat schedules hold whole rows (chunk=0)"
    if cfg["block_rows"] % flat_step(dtype):
        span = cfg["block_rows"] * cols * C.dtype_bytes(dtype)
        return (
            f"flat needs block_rows a multiple of {flat_step(dtype)} for {dtype}: a block's span "
            f"({span} B here) must be whole {VEC_BYTES}-byte vectors for any cols"
        )
    return None


def flat_configs(shape: Shape, dtype: str, hardware: Hardware) -> list[KernelConfig]:
    """Flat configs worth trying first, best guess first: none when rows are already
    16-byte multiples (the plain schedule vectorizes them). Each thread should hold
    8-16 fp32 values, padding included (fewer idles it, more costs registers), 8 first; unlike
    the plain schedule, padding costs no memory traffic (the span copy is dense), so
    there is no limit on it. At least 64 blocks, as in the shared search space."""
    rows, cols = shape
    if cols * C.dtype_bytes(dtype) % VEC_BYTES == 0:
        return []
    cands = []
    for block_rows in (b for b in (1, 2, 4, 8, 16) if b % flat_step(dtype) == 0 and b <= max(1, rows // 64)):
        for threads in FLAT_THREADS:
            cfg = {"block_rows": block_rows, "threads": threads, "chunk": 0, "flat": True}
            if 8 <= R.gpu_elems_per_thread(cfg, cols) <= 16 and C.smem_fits(flat_smem(cfg, cols, dtype), hardware):
                cands.append(cfg)

    def rank(c: dict[str, Any]) -> tuple:
        # Nearest 8 values per thread first, then smaller blocks (more of them to spread
        # over the SMs; the best plain config on 197 columns was 4 rows x 64). Built with
        # fast math, 8 rows x 256 threads (8 values) ran 1.035x PyTorch at 37824x197
        # against 0.979x for 8 x 128 (16 values)
        # (reports/examples/kernels/h200-2026-12-03/kernel_sweep_attention_views_rows.json).
        return (abs(math.log2(R.gpu_elems_per_thread(c, cols) / 8)), c["block_rows"], c["threads"])

    return sorted(cands, key=rank)[:FLAT_MAX_CONFIGS]


class SoftmaxFamily(R.RowFamily):
    name = "softmax"
    title = "Softmax (last dim)"
    aten_ops = frozenset({"aten::softmax", "aten::_softmax"})
    shape_names = ("rows", "cols")
    extra_inputs = 0
    cpu_schedule = Schedule(R.CPU_DEFAULTS, _cpu_program)
    gpu_schedule = Schedule(GPU_DEFAULTS, _gpu_program)

    def standard_shapes(self, device: str) -> list[Shape]:
        if device == "cpu":
            return [(256, 128), (1024, 128), (2048, 1024), R.awkward_shape((1024, 128))]
        return [(4096, 1024), (16384, 4096), (8192, 8192), (2048, 32768), R.awkward_shape((16384, 4096))]

    def search_space(self, shape: Shape, dtype: str, hardware: Hardware) -> list[KernelConfig]:
        space = super().search_space(shape, dtype, hardware)
        if C.is_cpu_target(hardware.target) or hardware.device == "cpu":
            return space
        # Flat configs first where rows are not 16-byte multiples; 12 in all, as before.
        return (flat_configs(self.check(shape), C.canonical_dtype(dtype), hardware) + space)[:12]

    def config_error(self, shape: Shape, dtype: str, config: dict, target: str) -> str | None:
        error = super().config_error(shape, dtype, config, target)
        return error or (None if C.is_cpu_target(target) else flat_config_error(config, shape[1], dtype))

    def limits_error(self, shape: Shape, dtype: str, config: dict, hardware: Hardware) -> str | None:
        if config.get("flat") and not C.targets_cpu(hardware):
            need = flat_smem(config, shape[1], dtype)
            if not C.smem_fits(need, hardware):
                return f"needs {need} B of shared memory, the device allows {hardware.smem_per_block} B"
        return super().limits_error(shape, dtype, config, hardware)

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

    def problem_shape(
        self,
        op: str,
        input_shapes: Sequence[Sequence[int]],
        concrete_inputs: Sequence[Any] | None = None,
        input_strides: Sequence[Sequence[int]] | None = None,
    ) -> Shape | None:
        """(rows, cols) of the dim reduced, read from the profiled call's dim argument where
        the profiler recorded it (the last dim otherwise); None for a dim the route refuses."""
        if op not in self.aten_ops or not input_shapes:
            return None
        dim = concrete_inputs[1] if concrete_inputs and len(concrete_inputs) > 1 else -1
        try:
            x = [int(d) for d in input_shapes[0]]
        except (TypeError, ValueError):
            return None
        d = reduced_dim(x, dim if isinstance(dim, int) else -1)
        return None if d is None else R.problem_shape_last_dim([x[: d + 1]])

    def route(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> Route | str:
        x = arg(args, kwargs, 0, "input")
        dim = arg(args, kwargs, 1, "dim")
        if func is torch.nn.functional.softmax:
            out_dtype = arg(args, kwargs, 3, "dtype")
        else:
            out_dtype = arg(args, kwargs, 2, "dtype")
        d = None if dim is None else reduced_dim(x.shape, int(dim))
        if d is None:
            return "softmax over a dim with a later dim of size > 1"
        if out_dtype is not None and out_dtype != x.dtype:
            return "softmax with a dtype cast"
        if d == x.dim() - 1:
            return R.row_route(x, int(x.shape[-1]), (), dtype)
        route = R.row_route(x.flatten(d), int(x.shape[d]), (), dtype)
        if isinstance(route, str):
            return route
        return dataclasses.replace(route, launch=lambda kernel: route.launch(kernel).reshape(x.shape))


def reduced_dim(shape: Sequence[int], dim: int) -> int | None:
    """The dim a softmax reduces, where its rows lie contiguous as the kernel reads them:
    the last, or one followed only by dims of size 1 (ConvBERT's dynamic convolution
    normalises [R, k, 1] over dim 1); None otherwise."""
    n = len(shape)
    if n == 0 or not -n <= dim < n:
        return None
    d = dim % n
    return d if all(int(s) == 1 for s in shape[d + 1 :]) else None


FAMILY = SoftmaxFamily()


# The registry (evaluator.kernels) registers these, in this order.
FAMILIES = (FAMILY,)
