"""Shared machinery of the row-wise families (softmax, layernorm, rmsnorm): each output
row depends on one input row only, so they share shapes, configs and search spaces.

In: shape (rows, cols), a config and a hardware description. Out: awkward shapes,
search spaces, config checks, the padded fragment width the GPU schedules use, the
route of a last-dim call, `RowFamily`, their common base, and what the norms' fused
residual variants share (the held add, the two halves of a kept sum). The programs
themselves live in the family modules.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch

from ..results import Hardware, KernelConfig, Shape
from ..routing.calls import arg, dtype_mismatch
from ..routing.router import Route, Start
from . import common as C
from .base import KernelFamily

# CPU: `buffered` keeps one row (fp32) in a stack array so it is read from memory
# once; unbuffered schedules re-read the row from the input for each pass.
CPU_DEFAULTS = {"block_rows": 4, "buffered": True}
CPU_ROW_BUFFER_LIMIT = 64 * 1024  # bytes of stack for the row buffer

# GPU: `chunk` = 0 keeps whole rows in registers (one read, one write); otherwise
# rows stream through register chunks of that many columns (long rows).
GPU_DEFAULTS = {"block_rows": 1, "threads": 256, "chunk": 0}
GPU_MAX_REGS_PER_THREAD = 64  # fp32 row elements a thread may hold in a whole-row schedule
VEC = 4  # columns each thread handles contiguously (128-bit fp32 accesses)


def problem_shape_last_dim(input_shapes: Sequence[Sequence[int]]) -> Shape | None:
    try:
        x = [int(d) for d in input_shapes[0]]
    except (IndexError, TypeError, ValueError):
        return None
    if not x:
        return None
    rows = math.prod(x[:-1]) if len(x) > 1 else 1
    if rows <= 0 or x[-1] <= 0:
        return None
    return (rows, x[-1])


def awkward_shape(shape: Shape) -> Shape:
    rows, cols = shape
    return (C.awkward(rows, minimum=3), C.awkward(cols))


def padded_cols(cols: int, threads: int, block_rows: int) -> int:
    """Fragment width for a whole-row schedule. It must be a multiple of what the
    block's threads cover in one vectorized sweep; with several rows per block,
    TileLang 0.1.15's layout inference also needs a power-of-two number of sweeps per
    row ("no available layout found" otherwise, e.g. 16 rows x 160 cols, 128 threads)."""
    per_sweep = max(1, threads * VEC // block_rows)
    sweeps = C.ceildiv(cols, per_sweep)
    if block_rows > 1:
        sweeps = C.next_pow2(sweeps)
    return per_sweep * sweeps


def gpu_elems_per_thread(cfg: dict[str, Any], cols: int) -> int:
    width = padded_cols(cols, cfg["threads"], cfg["block_rows"]) if cfg["chunk"] == 0 else cfg["chunk"]
    return cfg["block_rows"] * width // cfg["threads"]


def gpu_config_error(cfg: dict[str, Any], cols: int) -> str | None:
    if cfg["threads"] % 32 or not 32 <= cfg["threads"] <= 1024:
        return f"threads must be a multiple of 32 in 32..1024, got {cfg['threads']}"
    if cfg["block_rows"] < 1:
        return f"block_rows must be >= 1, got {cfg['block_rows']}"
    if cfg["chunk"]:
        if cfg["block_rows"] != 1:
            return "chunked schedules take one row per block (block_rows=1)"
        if cfg["chunk"] % (cfg["threads"] * VEC):
            return f"chunk must be a multiple of threads*{VEC}, got {cfg['chunk']}"
    if gpu_elems_per_thread(cfg, cols) > 2 * GPU_MAX_REGS_PER_THREAD:
        return f"{gpu_elems_per_thread(cfg, cols)} elements per thread would spill registers; use a chunked config"
    return None


def cpu_config_error(cfg: dict[str, Any], cols: int) -> str | None:
    if cfg["block_rows"] < 1:
        return f"block_rows must be >= 1, got {cfg['block_rows']}"
    if cfg["buffered"] and cols * 4 > CPU_ROW_BUFFER_LIMIT:
        return f"a {cols}-column row buffer exceeds {CPU_ROW_BUFFER_LIMIT} bytes of stack; use buffered=False"
    return None


def search_space(shape: Shape, hardware: Hardware, smem_per_row: Callable[[dict[str, Any]], int]) -> list[KernelConfig]:
    rows, cols = shape
    if C.is_cpu_target(hardware.target) or hardware.device == "cpu":
        fits = cols * 4 <= CPU_ROW_BUFFER_LIMIT
        cands = (
            [
                {"block_rows": 4, "buffered": True},
                {"block_rows": 1, "buffered": True},
                {"block_rows": 16, "buffered": True},
            ]
            if fits
            else []
        )
        cands.append({"block_rows": 4, "buffered": False})
        return C.dedupe(cands)

    whole: list[dict[str, Any]] = []
    for threads in (64, 128, 256, 512):
        for block_rows in (1, 2, 4, 8, 16):
            cfg = {"block_rows": block_rows, "threads": threads, "chunk": 0}
            if gpu_elems_per_thread(cfg, cols) <= GPU_MAX_REGS_PER_THREAD:
                whole.append(cfg)

    def useful(cfg: dict[str, Any]) -> bool:
        # Too few elements per thread or too much padding idles the block; too few
        # blocks idles the GPU.
        waste = padded_cols(cols, cfg["threads"], cfg["block_rows"]) / cols
        return gpu_elems_per_thread(cfg, cols) >= VEC and waste <= 1.5 and cfg["block_rows"] <= max(1, rows // 64)

    cands = [c for c in whole if useful(c)]
    if not cands and whole:
        # Tiny or odd rows: the least padded whole-row config still beats streaming.
        cands = [min(whole, key=lambda c: (padded_cols(cols, c["threads"], c["block_rows"]), -c["threads"]))]
    for threads, chunk in (
        (256, 4096),
        (512, 8192),
        (256, 8192),
        (1024, 8192),
        (512, 4096),
        (128, 2048),
        (256, 2048),
        (1024, 16384),
    ):
        if cols > chunk // 2 or not cands:
            cands.append({"block_rows": 1, "threads": threads, "chunk": chunk})
    cands = [c for c in cands if C.smem_fits(smem_per_row(c), hardware)]

    # Whole-row configs first (one read per element), those closest to 16 elements per
    # thread (enough work to hide latency, few registers) and to 256 threads first;
    # streaming configs last. The first entry is the one to use without tuning.
    def rank(c: dict[str, Any]) -> tuple:
        return (
            c["chunk"] != 0,
            abs(math.log2(max(1, gpu_elems_per_thread(c, cols)) / 16)),
            abs(math.log2(c["threads"] / 256)),
            c["block_rows"],
        )

    return sorted(cands, key=rank)[:12]


def reduce_smem(cfg: dict[str, Any]) -> int:
    # Cross-warp reductions stage one fp32 per warp and row; tiny, but counted.
    return cfg.get("block_rows", 1) * (cfg.get("threads", 256) // 32) * 4 * 4


class RowFamily(KernelFamily):
    """What softmax, layernorm and rmsnorm share: a (rows, cols) problem over the last
    dim, the same configs, search spaces and device limits. Subclasses set `name`,
    `title`, `aten_ops`, `cpu_schedule`/`gpu_schedule` (`Schedule(CPU_DEFAULTS, f)`
    with f(shape, dtype, cfg) -> PrimFunc), and `extra_inputs` (how many per-column
    vectors follow x, e.g. weight and bias) and `row_inputs` (how many (rows, cols)
    tensors come first: 2 when a residual is fused)."""

    shape_names: tuple = ("rows", "cols")
    extra_inputs: int = 0
    row_inputs: int = 1

    def problem_shape(
        self,
        op: str,
        input_shapes: Sequence[Sequence[int]],
        concrete_inputs: Sequence[Any] | None = None,
        input_strides: Sequence[Sequence[int]] | None = None,
    ) -> Shape | None:
        # The profiler does not record the dim argument; our zoo only reduces the last dim.
        if op not in self.aten_ops:
            return None
        return problem_shape_last_dim(input_shapes)

    def awkward_shape(self, shape: Shape) -> Shape:
        return awkward_shape(shape)

    def input_shapes(self, shape: Shape) -> list[tuple[int, ...]]:
        rows, cols = shape
        return [(rows, cols)] * self.row_inputs + [(cols,)] * self.extra_inputs

    def search_space(self, shape: Shape, dtype: str, hardware: Hardware) -> list[KernelConfig]:
        shape = self.check(shape)
        C.canonical_dtype(dtype)
        return search_space(shape, hardware, reduce_smem)

    def config_error(self, shape: Shape, dtype: str, config: dict, target: str) -> str | None:
        cols = shape[1]
        return cpu_config_error(config, cols) if C.is_cpu_target(target) else gpu_config_error(config, cols)

    def limits_error(self, shape: Shape, dtype: str, config: dict, hardware: Hardware) -> str | None:
        if not C.targets_cpu(hardware) and not C.smem_fits(reduce_smem(config), hardware):
            return f"needs {reduce_smem(config)} B of shared memory, the device allows {hardware.smem_per_block} B"
        return None


def aligned_rows(x: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """x as a contiguous (rows, cols) matrix whose data starts on 16 bytes."""
    flat = x.reshape(rows, cols).contiguous()
    if flat.data_ptr() % 16:
        # The GPU schedules read whole 16-byte vectors from the start of the tensor:
        # a view at an odd offset (a slice of a larger buffer) would fault, so it is copied.
        flat = flat.clone()
    return flat


def row_route(
    x: torch.Tensor, cols: int, extras: tuple[torch.Tensor, ...], dtype: str, params: dict | None = None
) -> Route | str:
    """The route of a last-dim row op: x viewed as (rows, cols), per-column vectors after it."""
    bad = dtype_mismatch(dtype, x, *extras)
    if bad:
        return bad
    if x.dim() == 0 or x.numel() == 0 or int(x.shape[-1]) != cols:
        return "empty input or not the last dim"
    if any(e.dim() != 1 or int(e.shape[0]) != cols or not e.is_contiguous() for e in extras):
        return "per-column parameters of another shape"
    rows = x.numel() // cols
    notes = () if x.is_contiguous() else ("input copied to contiguous",)

    def launch(kernel: Callable[..., torch.Tensor]) -> torch.Tensor:
        return kernel(aligned_rows(x, rows, cols), *extras).reshape(x.shape)

    return Route((rows, cols), launch, params=dict(params or {}), notes=notes)


# ---------------------------------------------------------------- the norms' fused residual add

# A norm program's `residual` mode that also writes the sum: the output is [2, rows, cols],
# the norm then x + r rounded to the input dtype (the value normalised, as PyTorch's add
# then norm would). A pre-norm block reads that sum again as its residual stream.
SUM = "sum"


def residual_start(args: tuple, kwargs: dict, dtype: str) -> Start | str:
    """x + r of two tensors of one shape, dtype and device, no alpha: a residual join,
    as the first call of a norm's fused pattern (the problem shape is (rows, last dim))."""
    if len(args) != 2 or kwargs:
        return "not a plain add of two tensors"
    x, r = args
    if (
        not (isinstance(x, torch.Tensor) and isinstance(r, torch.Tensor))
        or x.shape != r.shape
        or x.dim() == 0
        or x.numel() == 0
        or x.device != r.device
    ):
        return "not two tensors of one shape"
    bad = dtype_mismatch(dtype, x, r)
    if bad:
        return bad
    cols = int(x.shape[-1])
    return Start((x.numel() // cols, cols), (tuple(x.shape), x.dtype, x.device), (x, r))


def residual_second(
    norm_route: Callable, func: Callable, want: tuple, args: tuple, kwargs: dict, start: Start, held: torch.Tensor
) -> Route | None:
    """The norm's own route where this call is one of `want` (F.layer_norm and
    torch.layer_norm; the rms_norm pair) on the held sum and normalises all of it, at the
    held add's shape; None otherwise."""
    if func not in want or arg(args, kwargs, 0, "input") is not held:
        return None
    route = norm_route(func, args, kwargs, str(held.dtype).removeprefix("torch."))
    return None if isinstance(route, str) or tuple(route.shape) != tuple(start.shape) else route


def residual_route(start: Start, route: Route, extras: tuple, also_first: bool) -> Route:
    """The fused kernel's route on the held add's two tensors and the norm's `extras`
    (weight, bias): its output (or, keeping the sum, both halves) in the add's shape."""
    x, r = start.state
    rows, cols = start.shape

    def launch(kernel: Callable) -> Any:
        out = kernel(aligned_rows(x, rows, cols), aligned_rows(r, rows, cols), *extras)
        return tuple(o.reshape(x.shape) for o in out) if isinstance(out, tuple) else out.reshape(x.shape)

    notes = () if x.is_contiguous() and r.is_contiguous() else ("input copied to contiguous",)
    return Route(start.shape, launch, params=route.params, notes=notes, also_first=also_first)


class Halves(C.LauncherWrapper):
    """A kept-sum kernel as PyTorch's pair of calls returns: (norm, sum), views of its one output."""

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.launcher(*inputs)
        return out[0], out[1]
