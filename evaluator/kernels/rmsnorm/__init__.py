"""RMSNorm over the last dimension with a weight (nn.RMSNorm, eps 1e-6), and the same
with a pre-norm residual add fused in front of it, the sum written out too (`add_rmsnorm`).

In: shape (rows, hidden); inputs x[rows, hidden], weight[hidden] (the fused family: x,
r[rows, hidden], weight). Out: y = x / sqrt(mean(x^2) + eps) * weight in the input dtype
(of x + r, and x + r itself, for the fused family), compared against
`torch.nn.functional.rms_norm(x, (hidden,), weight, 1e-6)`. Statistics are fp32.
Schedules: on CUDA, `block_rows` rows per block held in registers with a block-wide
sum of squares, or for long rows `chunk`-column streaming passes; on CPU, a loop over
rows with the row in a stack buffer (or re-read from the input when it would not fit).
"""

# No `from __future__ import annotations`: TileLang evaluates the kernel signatures'
# annotations in `_entry`, whose closure must resolve them.
import functools
from typing import Any, Callable

import torch
import torch.nn.functional as F

from ...results import Shape
from .. import common as C
from .. import rows as R
from ...routing.calls import DERIVED, arg
from ...routing.router import Route
from ..base import Schedule

ACCUM = "float32"
EPS = 1e-6
# nn.RMSNorm calls F.rms_norm; code that calls torch.rms_norm directly reaches the mode as that.
RMS_NORM_CALLS = (F.rms_norm, torch.rms_norm)


def _load(X, Rz, i, j, residual, T, dtype: str):
    """One input element in fp32; with SUM, x + r rounded to the input dtype (the value
    written out as the sum, and the one PyTorch's add then rms_norm normalises)."""
    if residual == R.SUM:
        return T.cast(T.cast(T.cast(X[i, j], ACCUM) + T.cast(Rz[i, j], ACCUM), dtype), ACCUM)
    return T.cast(X[i, j], ACCUM)


def _at(residual, i, j) -> tuple:
    """Where the norm of element (i, j) goes: Y[i, j], or with SUM Y[0, i, j] (the sum is Y[1, i, j])."""
    return (0, i, j) if residual == R.SUM else (i, j)


def _entry(T, rows: int, cols: int, dtype: str, residual, body):
    """The kernel's signature around a `T.macro` body: (X, Wt) -> Y, or with SUM
    (X, R, Wt) -> Y[2, rows, cols] (the norm, then the sum). The plain form passes X as
    the unused residual."""
    if residual == R.SUM:

        @T.prim_func
        def add_rmsnorm(
            X: T.Tensor((rows, cols), dtype),
            Rz: T.Tensor((rows, cols), dtype),
            Wt: T.Tensor((cols,), dtype),
            Y: T.Tensor((2, rows, cols), dtype),
        ):
            body(X, Rz, Wt, Y)

        return add_rmsnorm

    @T.prim_func
    def rmsnorm(X: T.Tensor((rows, cols), dtype), Wt: T.Tensor((cols,), dtype), Y: T.Tensor((rows, cols), dtype)):
        body(X, X, Wt, Y)

    return rmsnorm


def _cpu_program(shape: Shape, dtype: str, cfg: dict[str, Any], residual: bool | str = False):
    import tilelang.cpu.language as T

    rows, cols = shape
    BR, buffered = cfg["block_rows"], cfg["buffered"]
    inv_n = 1.0 / cols

    @T.macro
    def buffered_body(X, Rz, Wt, Y):
        with T.Kernel(T.ceildiv(rows, BR)) as bx:
            buf = T.alloc_local((cols,), ACCUM)
            ss = T.alloc_var(ACCUM)
            for r in T.serial(BR):
                if bx * BR + r < rows:
                    ss = T.float32(0)
                    for j in T.serial(cols):
                        buf[j] = _load(X, Rz, bx * BR + r, j, residual, T, dtype)
                        ss += buf[j] * buf[j]
                        if residual == R.SUM:
                            Y[1, bx * BR + r, j] = T.cast(buf[j], dtype)
                    rstd = T.rsqrt(ss * T.float32(inv_n) + T.float32(cfg["eps"]))
                    for j in T.serial(cols):
                        Y[_at(residual, bx * BR + r, j)] = T.cast(buf[j] * rstd * T.cast(Wt[j], ACCUM), dtype)

    @T.macro
    def stream_body(X, Rz, Wt, Y):
        with T.Kernel(T.ceildiv(rows, BR)) as bx:
            ss = T.alloc_var(ACCUM)
            for r in T.serial(BR):
                if bx * BR + r < rows:
                    ss = T.float32(0)
                    for j in T.serial(cols):
                        ss += _load(X, Rz, bx * BR + r, j, residual, T, dtype) * _load(
                            X, Rz, bx * BR + r, j, residual, T, dtype
                        )
                    rstd = T.rsqrt(ss * T.float32(inv_n) + T.float32(cfg["eps"]))
                    for j in T.serial(cols):
                        Y[_at(residual, bx * BR + r, j)] = T.cast(
                            _load(X, Rz, bx * BR + r, j, residual, T, dtype) * rstd * T.cast(Wt[j], ACCUM), dtype
                        )
                        if residual == R.SUM:
                            Y[1, bx * BR + r, j] = T.cast(_load(X, Rz, bx * BR + r, j, residual, T, dtype), dtype)

    return _entry(T, rows, cols, dtype, residual, buffered_body if buffered else stream_body)


def _gpu_program(shape: Shape, dtype: str, cfg: dict[str, Any], residual: bool | str = False):
    import tilelang.language as T

    rows, cols = shape
    BR, threads, chunk = cfg["block_rows"], cfg["threads"], cfg["chunk"]
    inv_n = 1.0 / cols

    if chunk == 0:
        BN = R.padded_cols(cols, threads, BR)

        @T.macro
        def rows_body(X, Rz, Wt, Y):
            with T.Kernel(T.ceildiv(rows, BR), threads=threads) as bx:
                x = T.alloc_fragment((BR, BN), ACCUM)
                sq = T.alloc_fragment((BR, BN), ACCUM)
                rstd = T.alloc_fragment((BR,), ACCUM)
                for i, j in T.Parallel(BR, BN):
                    x[i, j] = T.if_then_else(
                        (j < cols) and (bx * BR + i < rows),
                        _load(X, Rz, bx * BR + i, j, residual, T, dtype),
                        T.float32(0),
                    )
                    sq[i, j] = x[i, j] * x[i, j]
                if residual == R.SUM:
                    for i, j in T.Parallel(BR, BN):
                        if (j < cols) and (bx * BR + i < rows):
                            Y[1, bx * BR + i, j] = T.cast(x[i, j], dtype)
                T.reduce_sum(sq, rstd, dim=1)
                for i in T.Parallel(BR):
                    rstd[i] = T.rsqrt(rstd[i] * T.float32(inv_n) + T.float32(cfg["eps"]))
                for i, j in T.Parallel(BR, BN):
                    if (j < cols) and (bx * BR + i < rows):
                        Y[_at(residual, bx * BR + i, j)] = T.cast(x[i, j] * rstd[i] * T.cast(Wt[j], ACCUM), dtype)

        return _entry(T, rows, cols, dtype, residual, rows_body)

    n_chunks = C.ceildiv(cols, chunk)

    @T.macro
    def stream_body(X, Rz, Wt, Y):
        with T.Kernel(rows, threads=threads) as bx:
            x = T.alloc_fragment((chunk,), ACCUM)
            part = T.alloc_fragment((1,), ACCUM)
            total = T.alloc_fragment((1,), ACCUM)
            total[0] = T.float32(0)
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    x[j] = T.if_then_else(
                        c * chunk + j < cols, _load(X, Rz, bx, c * chunk + j, residual, T, dtype), T.float32(0)
                    )
                    x[j] = x[j] * x[j]
                T.reduce_sum(x, part, dim=0, clear=True)
                total[0] = total[0] + part[0]
            total[0] = T.rsqrt(total[0] * T.float32(inv_n) + T.float32(cfg["eps"]))
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    if c * chunk + j < cols:
                        Y[_at(residual, bx, c * chunk + j)] = T.cast(
                            _load(X, Rz, bx, c * chunk + j, residual, T, dtype)
                            * total[0]
                            * T.cast(Wt[c * chunk + j], ACCUM),
                            dtype,
                        )
                        if residual == R.SUM:
                            Y[1, bx, c * chunk + j] = T.cast(_load(X, Rz, bx, c * chunk + j, residual, T, dtype), dtype)

    return _entry(T, rows, cols, dtype, residual, stream_body)


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

    functions = RMS_NORM_CALLS

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


class AddRMSNormFamily(RMSNormFamily):
    """s = x + r and y = RMSNorm(s), both written: the pre-norm residual join of llama-style
    decoders (`h = residual + h`, then `post_attention_layernorm(h)`, then `h` again as the
    next residual). Unfused, the add reads two tensors and writes one the norm reads back;
    here the norm reads the two and writes both. The output is one tensor [2, rows, cols]
    (norm, then sum); the kernel hands back its two halves."""

    name = "add_rmsnorm"
    title = "Residual add and RMSNorm, sum kept"
    aten_ops = frozenset()
    absorbs = ("elementwise",)  # the add
    profile_family = "rmsnorm"
    row_inputs = 2
    cpu_schedule = Schedule(R.CPU_DEFAULTS, functools.partial(_cpu_program, residual=R.SUM))
    gpu_schedule = Schedule(R.GPU_DEFAULTS, functools.partial(_gpu_program, residual=R.SUM))

    def make_inputs(self, shape: Shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
        x, w = super().make_inputs(shape, dtype, device, seed)
        r = C.randn(tuple(shape), C.canonical_dtype(dtype), device, C.generator(seed + 7919))
        return x, r, w

    def reference(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, r, w = inputs
        s = x + r
        return F.rms_norm(s, (x.shape[-1],), w, EPS), s

    def flops(self, shape: Shape) -> float:
        return super().flops(shape) + float(shape[0] * shape[1])

    def bytes(self, shape: Shape, dtype: str) -> float:
        rows, cols = shape
        return super().bytes(shape, dtype) + 2.0 * rows * cols * C.dtype_bytes(C.canonical_dtype(dtype))

    def compile(self, resolved, target: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
        return R.Halves(super().compile(resolved, target))

    # An add and an rms_norm: no function of its own; the router holds the add back.
    functions = ()
    fuses = (torch.Tensor.add, torch.add)
    fused_op = "aten::rms_norm"
    keeps_first = True

    def first(self, func: Callable, args: tuple, kwargs: dict, dtype: str):
        return R.residual_start(args, kwargs, dtype)

    def second(self, func: Callable, args: tuple, kwargs: dict, start: Any, held: torch.Tensor):
        """F.rms_norm over the last dim of the held sum (nn.RMSNorm after a residual)."""
        route = R.residual_second(
            functools.partial(RMSNormFamily.route, self), func, RMS_NORM_CALLS, args, kwargs, start, held
        )
        if route is None:
            return None
        x, cols = start.state[0], start.shape[1]
        w = arg(args, kwargs, 2, "weight")
        w = w if w is not None else DERIVED.constant("ones", cols, x.dtype, x.device, 1.0)
        return R.residual_route(start, route, (w,), also_first=True)


FAMILY = RMSNormFamily()
ADD = AddRMSNormFamily()


# The registry (evaluator.kernels) registers these, in this order.
FAMILIES = (FAMILY, ADD)
