"""Grouped GEMM: a mixture of experts' layers as F.grouped_mm writes them (transformers'
Mixtral and Qwen-MoE experts): the tokens sorted by expert, each expert's weight times
its own rows, the groups cut by cumulative offsets that the router computed on the device.

In: shape (E, M, N, K[, b_t]): Y[offs[g-1]:offs[g]] = A[offs[g-1]:offs[g]] @ B[g] for
each of E groups (group 0 from row 0), A[M, K] the sorted tokens, B[E, K, N] the experts'
weights, and offs[E] int32 on the device; b_t 1 when B is a transposed view of an [E, N,
K] tensor (nn.Linear's layout per expert, what transformers passes), 0 when B lies as
[E, K, N]; left out when 0, so a call has one key. The group sizes are not part of the
shape: they are data, read by the kernel from `offs` on the device (never on the host, so
a model captured in a CUDA graph keeps its kernel), and one compiled kernel serves every
split of M rows into E groups, empty groups included. Out: Y[M, N] in the input dtype,
compared against torch._grouped_mm (or, where PyTorch refuses the operands' strides, the
same product group by group). Rows past offs[E-1] are left unwritten, as PyTorch leaves
them.

Which calls are this family's: every torch._grouped_mm (F.grouped_mm's body) and the
profiler's aten::_grouped_mm. A call with a bias, an out_dtype other than the inputs', a
3-D first operand (groups given by a batch), a 2-D second operand (the weight gradient's
form), no offsets or offsets that are not int32 falls back, counted with its reason. A
non-contiguous A, or a B that lies neither way, is copied to contiguous first (a route
note).

Schedules: CPU (the C backend) a blocked loop nest over fp32 local tiles; CUDA fp16/bf16
shared-memory tiles (B in its storage orientation), a pipelined K loop and T.gemm on the
tensor cores into an fp32 fragment, a grid over padded row tiles that each find their
group from `offs` (`grouped_gemm/programs.py`). fp32 on CUDA has no schedule (T.gemm on
fp32 runs as TF32, which would not match PyTorch's fp32): such a build says so.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch

from ...errors import KernelError
from ...results import Hardware, KernelConfig, Shape
from ...routing.calls import arg, dtype_mismatch
from ...routing.router import Route
from .. import common as C
from ..base import KernelFamily, Resolved, Schedule
from . import programs as P

# F.grouped_mm calls torch._grouped_mm; a torch without it has no grouped call to route.
GROUPED_CALLS = (torch._grouped_mm,) if hasattr(torch, "_grouped_mm") else ()

CPU_DEFAULTS = {"block_M": 32, "block_N": 64, "block_K": 32, "unroll": 1}  # no factor named: the K loop as written
TC_DEFAULTS = {"block_M": 128, "block_N": 128, "block_K": 64, "num_stages": 3, "threads": 128}
# Local tiles become stack arrays in the generated C; keep them well inside a thread's stack.
CPU_LOCAL_LIMIT_BYTES = 128 * 1024
# Where TileLang's copies want operand storage to start (TMA, 16-byte vectors).
ALIGN_BYTES = 16


def _cpu_local(cfg: dict[str, Any]) -> int:
    return (cfg["block_M"] * cfg["block_K"] + cfg["block_K"] * cfg["block_N"] + cfg["block_M"] * cfg["block_N"]) * 4


def _tc_smem(cfg: dict[str, Any], dtype: str) -> int:
    b = C.dtype_bytes(dtype)
    stages = max(1, cfg["num_stages"])
    return ((cfg["block_M"] + cfg["block_N"]) * cfg["block_K"] * stages + cfg["block_M"] * cfg["block_N"]) * b


def split(M: int, E: int, g: torch.Generator) -> torch.Tensor:
    """Cumulative int32 offsets of M rows cut into E uneven groups at random points (so
    some groups may be empty and most sizes are off every tile), ending at M."""
    cuts = torch.randint(0, M + 1, (E - 1,), generator=g).sort().values if E > 1 else torch.empty(0, dtype=torch.long)
    return torch.cat([cuts, torch.tensor([M])]).to(torch.int32)


def per_group(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """The product group by group (host-side offsets: a reference, never a route)."""
    out = torch.zeros(a.shape[0], b.shape[-1], dtype=a.dtype, device=a.device)
    start = 0
    for g, end in enumerate(offs.tolist()):
        if end > start:
            out[start:end] = a[start:end] @ b[g]
        start = max(start, end)
    return out


class GroupedKernel(C.LauncherWrapper):
    """The compiled kernel behind the reference's convention (A[M, K], B[E, K, N] as the
    view it is, offs[E] int32): B reaches TileLang as its storage ([E, N, K] when the
    kernel reads it transposed), offs as it is; KernelError says what differs."""

    def __init__(self, launcher: C.Launcher):
        super().__init__(launcher)
        self.shape = P.full(launcher.shape)
        self._dtype = C.torch_dtype(launcher.dtype)

    def __call__(self, a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        E, M, N, K, b_t = self.shape
        if tuple(a.shape) != (M, K) or tuple(b.shape) != (E, K, N) or tuple(offs.shape) != (E,):
            raise KernelError(
                f"grouped_gemm: kernel built for A {(M, K)}, B {(E, K, N)}, offs {(E,)}; got "
                f"{tuple(a.shape)}, {tuple(b.shape)}, {tuple(offs.shape)}"
            )
        if a.dtype != self._dtype or b.dtype != self._dtype or offs.dtype != torch.int32:
            raise KernelError(
                f"grouped_gemm: kernel built for {self.launcher.dtype} operands and int32 offsets; "
                f"got {a.dtype}, {b.dtype}, {offs.dtype}"
            )
        store = b.transpose(-2, -1) if b_t else b
        if not store.is_contiguous():
            raise KernelError(
                f"grouped_gemm: B of strides {tuple(b.stride())} does not lie as the kernel reads it "
                f"({'an [E, N, K] tensor transposed' if b_t else 'a contiguous [E, K, N]'})"
            )
        return self.launcher.kernel(a.detach().contiguous(), store.detach(), offs.detach().contiguous())


_WRAPPED = C.OnceCache()


class GroupedGemmFamily(KernelFamily):
    name = "grouped_gemm"
    title = "Grouped GEMM (mixture of experts: F.grouped_mm)"
    shape_names = P.NAMES
    optional_dims = 1
    aten_ops = frozenset({"aten::_grouped_mm"})
    # The experts are a grid dimension and b_t a layout: only the matrix dims have tails.
    awkward_dims = ("M", "N", "K")

    # ------------------------------------------------------------ shapes

    def check(self, shape: Sequence[int]) -> Shape:
        """The shape as ints in its shortest form, or KernelError saying what a valid one is."""
        try:
            dims = tuple(int(s) for s in shape)
        except (TypeError, ValueError):
            dims = ()
        if not (4 <= len(dims) <= 5 and min(dims[:4]) > 0 and P.full(dims)[4] in (0, 1)):
            raise KernelError(
                "grouped_gemm: shape must be (E, M, N, K[, b_t]): four positive ints and b_t 0 or 1, "
                f"got {tuple(shape)}"
            )
        return dims[:4] if P.full(dims)[4] == 0 else dims

    def problem_shape(
        self,
        op: str,
        input_shapes: Sequence[Sequence[int]],
        concrete_inputs: Sequence[Any] | None = None,
        input_strides: Sequence[Sequence[int]] | None = None,
    ) -> Shape | None:
        """The shape the route will see for one profiled aten::_grouped_mm: A 2-D, B 3-D,
        offsets of E, no bias; b_t from B's recorded strides (0 where none were recorded)."""
        try:
            shapes = [list(s) if isinstance(s, (list, tuple)) else [] for s in input_shapes]
            if op != "aten::_grouped_mm" or len(shapes) < 3:
                return None
            a, b, offs = shapes[:3]
            if len(a) != 2 or len(b) != 3 or offs != [b[0]] or a[1] != b[1]:
                return None
            if len(shapes) > 3 and shapes[3]:  # a bias
                return None
            strides = [list(s) if isinstance(s, (list, tuple)) else [] for s in (input_strides or [])]
            sb = strides[1] if len(strides) > 1 and len(strides[1]) == 3 else []
            b_t = int(bool(sb) and (b[1] == 1 or sb[1] == 1) and sb[2] != 1)
            return self.check((b[0], a[0], b[2], a[1], b_t))
        except (IndexError, TypeError, ValueError, KernelError):
            return None

    def layout_free(self, shape: Shape) -> Shape:
        """(E, M, N, K): B's strides say the rest."""
        return self.check(tuple(shape)[:4])

    def standard_shapes(self, device: str) -> list[Shape]:
        if device == "cpu":
            # Each stays well under 50 ms per TileLang call on one core.
            medium = (4, 256, 128, 64, 1)
            return [(4, 128, 64, 64, 1), medium, (8, 256, 128, 128), self.awkward_shape(medium)]
        # Mixtral-8x7B's experts (top-2 of 8, 4096 tokens: 8192 rows; w1/w3 and w2),
        # Qwen1.5-MoE's (top-4 of 60 at 2048 tokens), a decode step, and tails.
        return [
            (8, 8192, 14336, 4096, 1),
            (8, 8192, 4096, 14336, 1),
            (60, 8192, 1408, 2048, 1),
            (8, 64, 14336, 4096, 1),
            self.awkward_shape((8, 8192, 4096, 4096, 1)),
        ]

    # ------------------------------------------------------------ data

    def make_inputs(self, shape: Shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
        """A[M, K], B[E, K, N] (a transposed view of an [E, N, K] tensor when b_t) and
        offs[E] int32: M rows cut into E uneven groups at points drawn from the seed."""
        E, M, N, K, b_t = P.full(self.check(shape))
        dtype = C.canonical_dtype(dtype)
        g = C.generator(seed)
        a = C.randn((M, K), dtype, device, g)
        # B scaled by 1/sqrt(K) keeps outputs O(1) for every K, so one tolerance fits all.
        if b_t:
            b = C.randn((E, N, K), dtype, device, g, scale=1.0 / math.sqrt(K)).transpose(-2, -1)
        else:
            b = C.randn((E, K, N), dtype, device, g, scale=1.0 / math.sqrt(K))
        return a, b, split(M, E, g).to(device)

    def reference(self, *inputs: torch.Tensor) -> torch.Tensor:
        """torch._grouped_mm, or the same product group by group where PyTorch refuses the
        operands (its CPU and CUDA paths want 16-byte strides; CUDA wants bf16 on sm80+)."""
        a, b, offs = inputs
        if GROUPED_CALLS:
            try:
                return torch._grouped_mm(a, b, offs=offs)
            except (RuntimeError, NotImplementedError):
                pass
        return per_group(a, b, offs)

    def input_shapes(self, shape: Shape) -> list[tuple[int, ...]]:
        """The storage the compiled kernel reads (`GroupedKernel` makes it from the views)."""
        E, M, N, K, _ = P.full(self.check(shape))
        return [(M, K), P.b_storage(shape), (E,)]

    # ------------------------------------------------------------ metrics

    def flops(self, shape: Shape) -> float:
        _, M, N, K = self.check(shape)[:4]
        return 2.0 * M * N * K

    def bytes(self, shape: Shape, dtype: str) -> float:
        E, M, N, K = self.check(shape)[:4]
        return float((M * K + E * K * N + M * N) * C.dtype_bytes(C.canonical_dtype(dtype)) + 4 * E)

    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        """Both sides accumulate in fp32; the difference is summation order (grows ~sqrt(K))
        and one output rounding. Without a shape, K = 1024 is assumed."""
        dtype = C.canonical_dtype(dtype)
        k = int(shape[3]) if shape is not None else 1024
        grow = max(1.0, math.sqrt(k / 256.0))
        base = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
        return (base * grow, base * grow)

    # ------------------------------------------------------------ tuning

    def search_space(self, shape: Shape, dtype: str, hardware: Hardware) -> list[KernelConfig]:
        E, M, N, K = self.check(shape)[:4]
        dtype = C.canonical_dtype(dtype)
        if C.targets_cpu(hardware) or hardware.device == "cpu":
            out = []
            for bM, bN, bK in ((32, 64, 32), (16, 64, 64), (64, 64, 32), (32, 128, 32)):
                cfg = {
                    "block_M": min(bM, C.round_up(max(1, M // E), 8)),
                    "block_N": min(bN, C.round_up(N, 8)),
                    "block_K": min(bK, C.round_up(K, 8)),
                }
                cfg["unroll"] = C.cpu_unroll(cfg["block_K"])  # the K loop split by hand (C.CPU_UNROLL)
                if _cpu_local(cfg) <= CPU_LOCAL_LIMIT_BYTES:
                    out.append(cfg)
            return C.dedupe(out)
        raw = [
            # (block_M, block_N, block_K, num_stages, threads). A group's last tile is
            # partly padding, so short groups (decode, many experts) want 64-row tiles;
            # long ones 128 rows, two warpgroups on 128x256. Measured on the H100 (bf16,
            # kernels/h100-2026-12-05/bench_grouped_gemm_*.json): 128x256 with two
            # warpgroups won both Mixtral expert shapes by 1.28x and 1.38x over 128x128,
            # and 64x256 Qwen-MoE's 34-row groups, so each leads its order.
            (128, 256, 64, 3, 256),
            (128, 128, 64, 3, 128),
            (64, 256, 64, 3, 128),
            (64, 128, 64, 3, 128),
            (128, 128, 32, 4, 128),
            (64, 64, 64, 4, 128),
            # Two stages for a device with 64 KB of shared memory a block (the MI300X).
            (64, 128, 32, 2, 128),
            (64, 64, 64, 2, 128),
        ]
        cands = [{"block_M": a, "block_N": b, "block_K": k, "num_stages": s, "threads": t} for a, b, k, s, t in raw]
        cands = [c for c in cands if c["block_N"] <= max(64, C.next_pow2(N))]
        if M // E <= 128:  # groups of a tile or less: the padding of 128-row tiles dominates
            cands = [c for c in cands if c["block_M"] == 64] + [c for c in cands if c["block_M"] != 64]
        return C.dedupe(c for c in cands if self.reject_reason(shape, dtype, c, hardware) is None)

    def limits_error(self, shape: Shape, dtype: str, cfg: dict, hw: Hardware) -> str | None:
        if C.targets_cpu(hw):
            local = _cpu_local(cfg)
            return None if local <= CPU_LOCAL_LIMIT_BYTES else f"local tiles need {local} B of stack"
        smem = _tc_smem(cfg, dtype)
        if not C.smem_fits(smem, hw):
            return f"needs {smem} B of shared memory, the device allows {hw.smem_per_block} B per block"
        return None

    # ------------------------------------------------------------ build

    def schedule(self, shape: Shape, dtype: str, target: str) -> Schedule:
        if C.is_cpu_target(target):
            return Schedule(CPU_DEFAULTS, P.cpu_program)
        if dtype == "float32":
            raise KernelError(
                "grouped_gemm: no fp32 GPU schedule (T.gemm on fp32 runs as TF32, which would not match "
                "PyTorch's fp32); use float16 or bfloat16"
            )
        return Schedule(TC_DEFAULTS, P.tensor_core_program)

    def config_error(self, shape: Shape, dtype: str, cfg: dict, target: str) -> str | None:
        for key in ("block_M", "block_N", "block_K"):
            if cfg[key] <= 0:
                return f"{key} must be positive, got {cfg[key]}"
        if C.is_cpu_target(target):
            return C.unroll_error(cfg, cpu=True)
        return C.warpgroup_tile_error(cfg)

    def compile(self, resolved: Resolved, target: str) -> Callable[..., torch.Tensor]:
        # One wrapper per compiled kernel, as the kernel is one per key.
        launcher = super().compile(resolved, target)
        return _WRAPPED.get((id(launcher),), lambda: GroupedKernel(launcher))

    # ------------------------------------------------------------ swap-in (at the operator)

    functions = GROUPED_CALLS

    def route(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> Route | str:
        """One torch._grouped_mm call as (E, M, N, K[, b_t]) and a launch that hands the
        kernel the offsets tensor as it is (no host read), or why it stays in PyTorch."""
        if func not in GROUPED_CALLS:
            return f"grouped_gemm does not take {getattr(func, '__name__', func)}"
        a, b = arg(args, kwargs, 0, "self"), arg(args, kwargs, 1, "mat2")
        offs, bias = arg(args, kwargs, 2, "offs"), arg(args, kwargs, 3, "bias")
        out_dtype = arg(args, kwargs, 4, "out_dtype")
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return "operands are not tensors"
        if bias is not None:
            return "grouped GEMM with a bias: no kernel"
        if out_dtype is not None and out_dtype != a.dtype:
            return f"grouped GEMM with out_dtype {str(out_dtype).replace('torch.', '')}: no kernel"
        if a.dim() != 2:
            return f"grouped GEMM with a {a.dim()}-D first operand (groups by batch): no kernel"
        if b.dim() != 3:
            return f"grouped GEMM with a {b.dim()}-D second operand: no kernel"
        if not isinstance(offs, torch.Tensor):
            return "grouped GEMM without offsets: no kernel"
        E, K, N = (int(d) for d in b.shape)
        M = int(a.shape[0])
        if offs.dtype != torch.int32 or tuple(offs.shape) != (E,):
            return f"offsets are not int32 [{E}]"
        if offs.device != a.device:
            return "offsets on another device than the operands"
        if int(a.shape[1]) != K:
            return "inner dims differ"
        if min(M, N, K) == 0:
            return "empty input"
        bad = dtype_mismatch(dtype, a, b)
        if bad:
            return bad
        notes = ()
        a_copy = not a.is_contiguous() or a.data_ptr() % ALIGN_BYTES != 0
        if a_copy:
            notes += ("A copied to contiguous",)
        b_copy = False
        if b.transpose(-2, -1).is_contiguous() and b.data_ptr() % ALIGN_BYTES == 0:
            b_t = 1
        elif b.is_contiguous() and b.data_ptr() % ALIGN_BYTES == 0:
            b_t = 0
        else:
            b_t, b_copy = 0, True
            notes += ("B copied to contiguous",)
        shape = self.check((E, M, N, K, b_t))

        def launch(kernel: Callable[..., torch.Tensor]) -> torch.Tensor:
            x = a.clone(memory_format=torch.contiguous_format) if a_copy else a
            w = b.clone(memory_format=torch.contiguous_format) if b_copy else b
            return kernel(x, w, offs)

        return Route(shape, launch, notes=notes)


FAMILY = GroupedGemmFamily()


# The registry (evaluator.kernels) registers these, in this order.
FAMILIES = (FAMILY,)
