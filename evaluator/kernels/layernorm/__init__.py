"""LayerNorm over the last dimension with an elementwise affine (nn.LayerNorm, eps 1e-5),
and the same with the residual add fused in front of it: `layernorm_residual` (post-norm,
the sum is not kept) and `add_layernorm` (pre-norm, the sum is written out too).

In: shape (rows, hidden); inputs x[rows, hidden], weight[hidden], bias[hidden] (the
fused families take x, r[rows, hidden], weight, bias). Out: y = (x - mean) /
sqrt(var + eps) * weight + bias in the input dtype (of x + r for the fused families; with
add_layernorm, also x + r), compared against `torch.nn.functional.layer_norm`. Statistics are fp32 and two-pass
(mean first,
then the centred sum of squares) so rows with a large mean do not lose precision.
Schedules: on CUDA, `block_rows` rows per block held in registers with block-wide
reductions, or for long rows `chunk`-column streaming passes; on CPU, a loop over
rows with the row in a stack buffer (or re-read from the input when it would not fit).
"""

# No `from __future__ import annotations`: TileLang evaluates the annotations of the
# kernel signatures in `_entry`, whose body does not mention rows, cols or dtype, so
# string annotations could not be resolved through its closure.
import functools
from typing import Any, Callable

import torch
import torch.nn.functional as F

from ...results import Hardware, KernelConfig, Shape
from .. import common as C
from .. import rows as R
from ...routing.calls import DERIVED, arg
from ..base import Schedule

ACCUM = "float32"
EPS = 1e-5
# The functions a model calls a layer norm by: nn.LayerNorm calls the first, some code the
# second directly, and the mode sees whichever the model called.
LAYER_NORM_CALLS = (F.layer_norm, torch.layer_norm)


# `residual`: False (LN(x)), True (LN(x + r), the sum in fp32), or SUM (the sum rounded
# to the input dtype, written out beside LN of that rounded sum: a pre-norm block's
# residual stream, which the next residual add reads again).
SUM = R.SUM


def _load(X, Rz, i, j, residual, T, dtype: str = ""):
    """One input element in fp32; with the fused residual, x + r (added in fp32 before
    the statistics, which is what LN(x + r) in the input dtype rounds away at most). With
    SUM, the sum rounded to the input dtype first: the value the kernel writes out, and
    the one PyTorch's add then layer_norm normalise."""
    x = T.cast(X[i, j], ACCUM)
    if residual == SUM:
        return T.cast(T.cast(x + T.cast(Rz[i, j], ACCUM), dtype), ACCUM)
    return x + T.cast(Rz[i, j], ACCUM) if residual else x


def _at(residual, i, j) -> tuple:
    """Where the norm of element (i, j) goes: Y[i, j], or with SUM Y[0, i, j] (the sum is Y[1, i, j])."""
    return (0, i, j) if residual == SUM else (i, j)


def _entry(T, rows: int, cols: int, dtype: str, residual, body):
    """The kernel's signature around a `T.macro` body: (X, Wt, B) -> Y, or with the fused
    residual (X, R, Wt, B) -> Y, or with SUM (X, R, Wt, B) -> Y[2, rows, cols] (the norm,
    then the sum: one output tensor, so every check and timer sees one result). The plain
    form passes X as the unused residual."""
    if residual == SUM:

        @T.prim_func
        def add_layernorm(
            X: T.Tensor((rows, cols), dtype),
            Rz: T.Tensor((rows, cols), dtype),
            Wt: T.Tensor((cols,), dtype),
            B: T.Tensor((cols,), dtype),
            Y: T.Tensor((2, rows, cols), dtype),
        ):
            body(X, Rz, Wt, B, Y)

        return add_layernorm

    if residual:

        @T.prim_func
        def layernorm_residual(
            X: T.Tensor((rows, cols), dtype),
            Rz: T.Tensor((rows, cols), dtype),
            Wt: T.Tensor((cols,), dtype),
            B: T.Tensor((cols,), dtype),
            Y: T.Tensor((rows, cols), dtype),
        ):
            body(X, Rz, Wt, B, Y)

        return layernorm_residual

    @T.prim_func
    def layernorm(
        X: T.Tensor((rows, cols), dtype),
        Wt: T.Tensor((cols,), dtype),
        B: T.Tensor((cols,), dtype),
        Y: T.Tensor((rows, cols), dtype),
    ):
        body(X, X, Wt, B, Y)

    return layernorm


def _cpu_program(shape: Shape, dtype: str, cfg: dict[str, Any], residual: bool | str = False):
    import tilelang.cpu.language as T

    rows, cols = shape
    BR, buffered = cfg["block_rows"], cfg["buffered"]
    inv_n = 1.0 / cols

    @T.macro
    def buffered_body(X, Rz, Wt, B, Y):
        with T.Kernel(T.ceildiv(rows, BR)) as bx:
            buf = T.alloc_local((cols,), ACCUM)
            s = T.alloc_var(ACCUM)
            v = T.alloc_var(ACCUM)
            for r in T.serial(BR):
                if bx * BR + r < rows:
                    s = T.float32(0)
                    for j in T.serial(cols):
                        buf[j] = _load(X, Rz, bx * BR + r, j, residual, T, dtype)
                        s += buf[j]
                        if residual == SUM:
                            Y[1, bx * BR + r, j] = T.cast(buf[j], dtype)
                    mean = s * T.float32(inv_n)
                    v = T.float32(0)
                    for j in T.serial(cols):
                        buf[j] = buf[j] - mean
                        v += buf[j] * buf[j]
                    rstd = T.rsqrt(v * T.float32(inv_n) + T.float32(cfg["eps"]))
                    for j in T.serial(cols):
                        Y[_at(residual, bx * BR + r, j)] = T.cast(
                            buf[j] * rstd * T.cast(Wt[j], ACCUM) + T.cast(B[j], ACCUM), dtype
                        )

    @T.macro
    def stream_body(X, Rz, Wt, B, Y):
        with T.Kernel(T.ceildiv(rows, BR)) as bx:
            s = T.alloc_var(ACCUM)
            v = T.alloc_var(ACCUM)
            for r in T.serial(BR):
                if bx * BR + r < rows:
                    s = T.float32(0)
                    for j in T.serial(cols):
                        s += _load(X, Rz, bx * BR + r, j, residual, T, dtype)
                    mean = s * T.float32(inv_n)
                    v = T.float32(0)
                    for j in T.serial(cols):
                        v += (_load(X, Rz, bx * BR + r, j, residual, T, dtype) - mean) * (
                            _load(X, Rz, bx * BR + r, j, residual, T, dtype) - mean
                        )
                    rstd = T.rsqrt(v * T.float32(inv_n) + T.float32(cfg["eps"]))
                    for j in T.serial(cols):
                        Y[_at(residual, bx * BR + r, j)] = T.cast(
                            (_load(X, Rz, bx * BR + r, j, residual, T, dtype) - mean) * rstd * T.cast(Wt[j], ACCUM)
                            + T.cast(B[j], ACCUM),
                            dtype,
                        )
                        if residual == SUM:
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
        def rows_body(X, Rz, Wt, B, Y):
            with T.Kernel(T.ceildiv(rows, BR), threads=threads) as bx:
                x = T.alloc_fragment((BR, BN), ACCUM)
                sq = T.alloc_fragment((BR, BN), ACCUM)
                mean = T.alloc_fragment((BR,), ACCUM)
                var = T.alloc_fragment((BR,), ACCUM)
                # Padding reads as 0 so it adds nothing to the sums.
                for i, j in T.Parallel(BR, BN):
                    x[i, j] = T.if_then_else(
                        (j < cols) and (bx * BR + i < rows),
                        _load(X, Rz, bx * BR + i, j, residual, T, dtype),
                        T.float32(0),
                    )
                if residual == SUM:
                    for i, j in T.Parallel(BR, BN):
                        if (j < cols) and (bx * BR + i < rows):
                            Y[1, bx * BR + i, j] = T.cast(x[i, j], dtype)
                T.reduce_sum(x, mean, dim=1)
                for i in T.Parallel(BR):
                    mean[i] = mean[i] * T.float32(inv_n)
                for i, j in T.Parallel(BR, BN):
                    x[i, j] = T.if_then_else(j < cols, x[i, j] - mean[i], T.float32(0))
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(sq, var, dim=1)
                for i in T.Parallel(BR):
                    var[i] = T.rsqrt(var[i] * T.float32(inv_n) + T.float32(cfg["eps"]))
                for i, j in T.Parallel(BR, BN):
                    if (j < cols) and (bx * BR + i < rows):
                        Y[_at(residual, bx * BR + i, j)] = T.cast(
                            x[i, j] * var[i] * T.cast(Wt[j], ACCUM) + T.cast(B[j], ACCUM), dtype
                        )

        return _entry(T, rows, cols, dtype, residual, rows_body)

    n_chunks = C.ceildiv(cols, chunk)

    @T.macro
    def stream_body(X, Rz, Wt, B, Y):
        with T.Kernel(rows, threads=threads) as bx:
            x = T.alloc_fragment((chunk,), ACCUM)
            part = T.alloc_fragment((1,), ACCUM)
            total = T.alloc_fragment((1,), ACCUM)
            mean = T.alloc_fragment((1,), ACCUM)
            rstd = T.alloc_fragment((1,), ACCUM)
            total[0] = T.float32(0)
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    x[j] = T.if_then_else(
                        c * chunk + j < cols, _load(X, Rz, bx, c * chunk + j, residual, T, dtype), T.float32(0)
                    )
                T.reduce_sum(x, part, dim=0, clear=True)
                total[0] = total[0] + part[0]
            mean[0] = total[0] * T.float32(inv_n)
            # Second pass for the centred variance (the row is L2-resident by now).
            total[0] = T.float32(0)
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    x[j] = T.if_then_else(
                        c * chunk + j < cols,
                        _load(X, Rz, bx, c * chunk + j, residual, T, dtype) - mean[0],
                        T.float32(0),
                    )
                    x[j] = x[j] * x[j]
                T.reduce_sum(x, part, dim=0, clear=True)
                total[0] = total[0] + part[0]
            rstd[0] = T.rsqrt(total[0] * T.float32(inv_n) + T.float32(cfg["eps"]))
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    if c * chunk + j < cols:
                        Y[_at(residual, bx, c * chunk + j)] = T.cast(
                            (_load(X, Rz, bx, c * chunk + j, residual, T, dtype) - mean[0])
                            * rstd[0]
                            * T.cast(Wt[c * chunk + j], ACCUM)
                            + T.cast(B[c * chunk + j], ACCUM),
                            dtype,
                        )
                        if residual == SUM:
                            Y[1, bx, c * chunk + j] = T.cast(_load(X, Rz, bx, c * chunk + j, residual, T, dtype), dtype)

    return _entry(T, rows, cols, dtype, residual, stream_body)


class LayerNormFamily(R.RowFamily):
    name = "layernorm"
    title = "LayerNorm (affine, last dim)"
    aten_ops = frozenset({"aten::layer_norm", "aten::native_layer_norm"})
    shape_names = ("rows", "hidden")
    extra_inputs = 2
    cpu_schedule = Schedule(R.CPU_DEFAULTS, _cpu_program)
    gpu_schedule = Schedule(R.GPU_DEFAULTS, _gpu_program)
    params = {"eps": EPS}

    # Where one row over 128 threads is 25-32 values a thread (hidden 4096), it leads: three
    # H200 sweeps at 16384x4096 ran it 1.526-1.533x PyTorch, within 0.4% of the best, where
    # the shared rule's first (1 x 256, 16 values) ran 1.436-1.440x (under
    # reports/examples/kernels/: h200-2026-12-01/kernel_sweep_gemm_skinny_attention_rows.json,
    # h200-2026-12-01/kernel_sweep_conv2d_rows_attention.json,
    # h200-2026-12-03/kernel_sweep_attention_views_rows.json). Measured for layernorm only.
    WIDE_FIRST = {"block_rows": 1, "threads": 128, "chunk": 0}

    def search_space(self, shape: Shape, dtype: str, hardware: Hardware) -> list[KernelConfig]:
        space = super().search_space(shape, dtype, hardware)
        wide = 24 < R.gpu_elems_per_thread(self.WIDE_FIRST, shape[1]) <= 32
        if self.name == "layernorm" and wide and self.WIDE_FIRST in space:
            space = [self.WIDE_FIRST] + [c for c in space if c != self.WIDE_FIRST]
        return space

    def standard_shapes(self, device: str) -> list[Shape]:
        if device == "cpu":
            return [(256, 128), (1024, 512), (2048, 1024), R.awkward_shape((1024, 512))]
        return [(4096, 1024), (16384, 4096), (8192, 8192), (4096, 16384), R.awkward_shape((16384, 4096))]

    def make_inputs(self, shape: Shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
        rows, cols = C.check_shape(shape, self.shape_names, self.name)
        dtype = C.canonical_dtype(dtype)
        g = C.generator(seed)
        # A non-zero mean checks that the kernel centres before squaring.
        x = C.randn((rows, cols), dtype, device, g, scale=1.0, shift=0.5)
        w = C.randn((cols,), dtype, device, g, scale=0.1, shift=1.0)
        b = C.randn((cols,), dtype, device, g, scale=0.1)
        return x, w, b

    def reference(self, *inputs: torch.Tensor) -> torch.Tensor:
        x, w, b = inputs
        return F.layer_norm(x, (x.shape[-1],), w, b, EPS)

    def flops(self, shape: Shape) -> float:
        rows, cols = shape
        # sum, centre, square-accumulate, scale, affine (mul + add): ~8 per element.
        return 8.0 * rows * cols

    def bytes(self, shape: Shape, dtype: str) -> float:
        rows, cols = shape
        return float((2 * rows * cols + 2 * cols) * C.dtype_bytes(C.canonical_dtype(dtype)))

    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        # Outputs are O(1..4); the low-precision values cover about one output ulp.
        return {"float32": (2e-5, 2e-5), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2)}[C.canonical_dtype(dtype)]

    functions = LAYER_NORM_CALLS

    def route(self, func: Callable, args: tuple, kwargs: dict, dtype: str):
        x, shape = arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "normalized_shape")
        w, b = arg(args, kwargs, 2, "weight"), arg(args, kwargs, 3, "bias")
        eps = arg(args, kwargs, 4, "eps", 1e-5)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if len(shape) != 1:
            return "normalises over more than the last dim"
        cols = int(shape[0])
        # No affine parameters is the same kernel with weight 1 and bias 0.
        if w is None:
            w = DERIVED.constant("ones", cols, x.dtype, x.device, 1.0)
        if b is None:
            b = DERIVED.constant("zeros", cols, x.dtype, x.device, 0.0)
        return R.row_route(x, cols, (w, b), dtype, {"eps": float(eps)})


class LayerNormResidualFamily(LayerNormFamily):
    """y = LN(x + r): a post-norm transformer's residual join and norm in one pass, so
    x + r never makes a round trip through memory. Profiling sees the add and the norm
    as separate ops; this family takes its shapes from the layernorm rows."""

    name = "layernorm_residual"
    title = "LayerNorm with fused residual add"
    aten_ops = frozenset()
    absorbs = ("elementwise",)  # the add
    profile_family = "layernorm"
    row_inputs = 2
    cpu_schedule = Schedule(R.CPU_DEFAULTS, functools.partial(_cpu_program, residual=True))
    gpu_schedule = Schedule(R.GPU_DEFAULTS, functools.partial(_gpu_program, residual=True))

    def make_inputs(self, shape: Shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
        x, w, b = super().make_inputs(shape, dtype, device, seed)
        rows, cols = shape
        r = C.randn((rows, cols), C.canonical_dtype(dtype), device, C.generator(seed + 7919), scale=1.0)
        return x, r, w, b

    def reference(self, *inputs: torch.Tensor) -> torch.Tensor:
        x, r, w, b = inputs
        return F.layer_norm(x + r, (x.shape[-1],), w, b, EPS)

    def flops(self, shape: Shape) -> float:
        return super().flops(shape) + float(shape[0] * shape[1])

    def bytes(self, shape: Shape, dtype: str) -> float:
        rows, cols = shape
        return super().bytes(shape, dtype) + float(rows * cols * C.dtype_bytes(C.canonical_dtype(dtype)))

    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        # PyTorch rounds x + r to the input dtype before normalising; the kernel does
        # not, which moves a low-precision result by about one more output ulp.
        atol, rtol = super().tolerance(dtype, shape)
        return (2 * atol, 2 * rtol) if C.canonical_dtype(dtype) != "float32" else (atol, rtol)

    # LN(x + r) is two calls, an add and a layer_norm: no function of its own; the router
    # holds the add back (`fuses`) until the norm reads its result.
    functions = ()
    fuses = (torch.Tensor.add, torch.add)
    fused_op = "aten::layer_norm"
    # Whether the kernel also writes the add's result (AddLayerNormFamily), so a later
    # read of the sum finds it computed.
    keeps_first = False

    def first(self, func: Callable, args: tuple, kwargs: dict, dtype: str):
        """x + r of two tensors of one shape, dtype and device, no alpha: the residual join."""
        return R.residual_start(args, kwargs, dtype)

    def second(self, func: Callable, args: tuple, kwargs: dict, start: Any, held: torch.Tensor):
        """F.layer_norm over the last dim of the held sum (nn.LayerNorm after a residual)."""
        route = R.residual_second(
            functools.partial(LayerNormFamily.route, self), func, LAYER_NORM_CALLS, args, kwargs, start, held
        )
        if route is None:
            return None
        x, cols = start.state[0], start.shape[1]
        w, b = (arg(args, kwargs, 2, "weight"), arg(args, kwargs, 3, "bias"))
        w = w if w is not None else DERIVED.constant("ones", cols, x.dtype, x.device, 1.0)
        b = b if b is not None else DERIVED.constant("zeros", cols, x.dtype, x.device, 0.0)
        return R.residual_route(start, route, (w, b), self.keeps_first)


class AddLayerNormFamily(LayerNormResidualFamily):
    """s = x + r and y = LN(s), both written: a pre-norm block's residual join, where the
    sum is the stream the next residual add reads again (timm's ViT, GPT-2: `x = x +
    attn(norm1(x))`, then `norm2(x)`, then `x + mlp(...)`). Unfused, the add reads two
    tensors and writes one that the norm reads back; here the norm reads the two and
    writes both, one pass of the three fewer and one launch. LayerNorm_residual cannot
    take these calls: it never writes the sum, so the next read would compute it again.
    The output is one tensor [2, rows, cols] (norm, then sum); the kernel hands back its
    two halves, as PyTorch's pair of calls returns two tensors."""

    name = "add_layernorm"
    title = "Residual add and LayerNorm, sum kept"
    # The profile scan sees this family's pattern as layernorm_residual's; where the sum
    # is read again after the norm, the shape is this family's (profiling.fusions).
    keeps_first = True
    cpu_schedule = Schedule(R.CPU_DEFAULTS, functools.partial(_cpu_program, residual=SUM))
    gpu_schedule = Schedule(R.GPU_DEFAULTS, functools.partial(_gpu_program, residual=SUM))

    def reference(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, r, w, b = inputs
        s = x + r
        return F.layer_norm(s, (x.shape[-1],), w, b, EPS), s

    def bytes(self, shape: Shape, dtype: str) -> float:
        rows, cols = shape
        return super().bytes(shape, dtype) + float(rows * cols * C.dtype_bytes(C.canonical_dtype(dtype)))

    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        # The kernel normalises the sum rounded as PyTorch's add rounds it: the plain norm's.
        return LayerNormFamily.tolerance(self, dtype, shape)

    def compile(self, resolved, target: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
        return R.Halves(super().compile(resolved, target))


FAMILY = LayerNormFamily()
RESIDUAL = LayerNormResidualFamily()
ADD = AddLayerNormFamily()


# The registry (evaluator.kernels) registers these, in this order.
FAMILIES = (FAMILY, RESIDUAL, ADD)
