"""Batched GEMM: the products of two activations that models make as torch.bmm,
torch.baddbmm, torch.matmul / `a @ b` on batched operands (eager attention's
`q @ k.transpose(-1, -2)` and `probs @ v`, DeBERTa's disentangled attention, T5's
position bias) and two-operand batched torch.einsum ("bhqd,bhkd->bhqk").

In: shape (batch, M, N, K[, a_t, b_t, heads, a_pitch, b_pitch, addend, a_shared,
b_shared]): Y[batch, M, N] = alpha * A[batch, M, K] @ B[batch, K, N] (+ beta * addend), with
the operands read where they lie (`bmm/programs.Operand`): a_t / b_t 1 when the operand
is a transposed view (k.transpose(-1, -2) is read as the [N, K] rows of k); a pitch p >=
`heads` when it is heads of a row-major [batch / heads, rows, p, cols] buffer (a
projection's `view(B, S, H, D).transpose(1, 2)`, p = H; GPT-2's split qkv, p = 3H), 0 when
its batches lie one after another; a_shared / b_shared 1 when one matrix serves every
batch (a 2-D first operand of matmul, a batch broadcast by stride 0); addend 0 (none), 1
(baddbmm's input as a whole [batch, M, N]) or 2 (one [batch, 1, N] row per batch,
BLOOM's alibi). Left-out trailing fields are 0, and a shape is kept in that shortest
form, so a call has one key. alpha and beta are kernel parameters (`params`): baddbmm's
as the call gives them. Out: Y[batch, M, N] in the input dtype, compared against
torch.matmul / torch.baddbmm on the same operands. A layout the kernels cannot read
(another stride pattern, a base address off 16 bytes) is copied to contiguous first, and
the copy is counted beside the call as a route note; a batch broadcast in part ([h, K, N]
against [b, h, M, K]) stays in PyTorch, which reads it without copying.

Which calls are this family's (`owns`): every torch.bmm and torch.baddbmm; torch.matmul
where the second operand has a batch (>= 3-D) and the first is at least 2-D (a 2-D second
operand is a weight, gemm's, whatever the first); torch.einsum where `_einsum.as_matmul`
reads the equation as one batched contraction (not its weight form, which is gemm's). The
profiler's split is the same (`covers`): aten::bmm, aten::baddbmm, and aten::matmul with a
batched second operand.

Schedules: CPU (the C backend) a blocked loop nest over fp32 local tiles; CUDA fp16/bf16
shared-memory tiles in each operand's storage orientation, a pipelined K loop and T.gemm
on the tensor cores, the batch as the grid's z; CUDA fp32 a register-blocked SIMT
schedule (T.gemm on fp32 is TF32). The programs are in `kernels/bmm/programs.py`.
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any, Callable, NamedTuple, Sequence

import torch

from ...errors import KernelError
from ...results import Hardware, KernelConfig, Shape
from ...routing.calls import arg, dtype_mismatch
from ...routing.router import Route
from . import programs as P
from .. import common as C
from ..einsum import as_matmul
from ..base import KernelFamily, Resolved, Schedule

MATMUL = (torch.matmul, torch.Tensor.matmul, torch.linalg.matmul)
BMM = (torch.bmm, torch.Tensor.bmm)
BADDBMM = (torch.baddbmm, torch.Tensor.baddbmm)
EINSUM = torch.einsum

CPU_DEFAULTS = {"block_M": 64, "block_N": 64, "block_K": 32, "unroll": 1}  # no factor named: the K loop as written
TC_DEFAULTS = {
    "block_M": 128,
    "block_N": 128,
    "block_K": 64,
    "num_stages": 2,
    "threads": 128,
    "swizzle": False,
    "panel": 10,
}
SIMT_DEFAULTS = {
    "block_M": 64,
    "block_N": 64,
    "block_K": 16,
    "thread_M": 4,
    "thread_N": 4,
    "num_stages": 2,
    "unroll": 0,  # the K loop fully unrolled (C.accumulation_loop)
}
# Local tiles become stack arrays in the generated C; keep them well inside a thread's stack.
CPU_LOCAL_LIMIT_BYTES = 128 * 1024
# Where TileLang's copies and T.gemm want operand storage to start (TMA, 16-byte vectors).
ALIGN_BYTES = 16


# ---------------------------------------------------------------- layouts


class Side(NamedTuple):
    """How one operand will reach the kernel: its storage (transposed, pitch, heads,
    shared) and whether the route copies it first (`copy`: to contiguous, or for a shared
    operand its one matrix)."""

    t: bool
    pitch: int
    heads: int
    shared: bool
    copy: bool


def operand_side(size: Sequence[int], stride: Sequence[int], batch: Sequence[int], aligned: bool = True) -> Side | str:
    """How a logical [*lead, R, C] operand of a product with batch dims `batch` is read:
    a `Side`, or why the call stays in PyTorch (a batch broadcast in part). Size-1 dims
    may carry any stride, as in PyTorch."""
    size, stride = [int(s) for s in size], [int(s) for s in stride]
    R, C_, sR, sC = size[-2], size[-1], stride[-2], stride[-1]
    lead = list(zip(size[:-2], stride[:-2]))
    lead = [(1, 0)] * (len(batch) - len(lead)) + lead
    if len(lead) != len(batch):
        return "operand has more batch dims than the product"
    # A batch dim of the product this operand does not have (size 1 or stride 0) is broadcast.
    gone = [int(b) > 1 and (d == 1 or s == 0) for (d, s), b in zip(lead, batch)]
    own = [(d, s) for (d, s), b, g in zip(lead, batch, gone) if int(b) > 1 and not g]
    if C_ == 1 or sC == 1:
        t, L, I, ld = False, R, C_, sR
    elif R == 1 or sR == 1:
        t, L, I, ld = True, C_, R, sC
    else:
        t, L, I, ld = False, R, C_, -1  # neither dim unit-stride: copied
    if L == 1:
        ld = I  # one line: its stride is never used
    if any(gone):
        if own:
            return "batch dims broadcast in part"
        ok = ld == I and aligned
        return Side(t if ok else False, 0, 0, True, not ok)
    copied = Side(False, 0, 0, False, True)
    if not aligned or ld < 0:
        return copied
    if ld == I and _flat(own, L * I):
        return Side(t, 0, 0, False, False)
    if I > 0 and ld % I == 0 and ld > I:
        p = ld // I
        heads, hs = own[-1] if own else (1, I)
        if hs == I and p >= heads and _flat(own[:-1], L * ld):
            return Side(t, p, heads, False, False)
    return copied


def _flat(dims: Sequence[tuple[int, int]], inner: int) -> bool:
    """Whether batch dims (size, stride), outermost first, step row-major from `inner`."""
    want = inner
    for d, s in reversed(dims):
        if s != want:
            return False
        want *= d
    return True


def addend_side(size: Sequence[int], stride: Sequence[int], batch: int, M: int, N: int) -> tuple[int, bool] | str:
    """(addend mode, copied) of baddbmm's input broadcast to [batch, M, N], or why not."""
    size, stride = [int(s) for s in size], [int(s) for s in stride]
    if len(size) > 3:
        return "addend with more than three dims"
    size, stride = [1] * (3 - len(size)) + size, [0] * (3 - len(stride)) + stride
    if any(d not in (1, w) for d, w in zip(size, (batch, M, N))):
        return "addend does not broadcast to the product"
    eff = [0 if d == 1 and w > 1 else s for d, s, w in zip(size, stride, (batch, M, N))]
    eff = [0 if d > 1 and s == 0 else s for d, s in zip(size, eff)]
    sB, sM, sN = eff
    if M > 1 and sM == 0:  # one row per batch, over every row of the product
        return (P.ADD_ROW, not ((N == 1 or sN == 1) and (batch == 1 or sB == N)))
    return (P.ADD_FULL, not ((N == 1 or sN == 1) and (M == 1 or sM == N) and (batch == 1 or sB == M * N)))


def _aligned(t: torch.Tensor) -> bool:
    return t.data_ptr() % ALIGN_BYTES == 0


class Plan(NamedTuple):
    shape: Shape
    a: Side
    b: Side


def plan(
    a_size, a_stride, b_size, b_stride, batch: Sequence[int], addend: int = 0, aligned: tuple[bool, bool] = (True, True)
) -> Plan | str:
    """The problem shape of A[*, M, K] @ B[*, K, N] over batch dims `batch` (broadcast
    already), and how each operand reaches the kernel; or why the call stays in PyTorch."""
    M, K = int(a_size[-2]), int(a_size[-1])
    K2, N = int(b_size[-2]), int(b_size[-1])
    if K != K2:
        return "inner dims differ"
    nbatch = math.prod(int(b) for b in batch)
    if min(nbatch, M, N, K) <= 0:
        return "empty input"
    a = operand_side(a_size, a_stride, batch, aligned[0])
    if isinstance(a, str):
        return a
    b = operand_side(b_size, b_stride, batch, aligned[1])
    if isinstance(b, str):
        return b
    if a.shared and b.shared:
        return "no batch: both operands are one matrix (a plain matrix product)"
    if a.pitch and b.pitch and a.heads != b.heads:
        b = Side(False, 0, 0, False, True)  # one pitch per kernel's heads: B copied
    heads = a.heads if a.pitch else b.heads if b.pitch else 0
    shape = (nbatch, M, N, K, int(a.t), int(b.t), heads, a.pitch, b.pitch, addend, int(a.shared), int(b.shared))
    return Plan(FAMILY.check(shape), a, b)


def _storage(x: torch.Tensor, side: Side, batch: Sequence[int]) -> torch.Tensor:
    """The operand as the route hands it to the kernel: itself, or its copy (`side.copy`)."""
    if not side.copy:
        return x
    # clone, not contiguous(): an operand copied for its base address is contiguous already
    if side.shared:
        return x[(0,) * (x.dim() - 2)].clone(memory_format=torch.contiguous_format)
    return x.expand(*batch, *x.shape[-2:]).clone(memory_format=torch.contiguous_format)


# ---------------------------------------------------------------- the kernel's calling convention


class BatchedKernel(C.LauncherWrapper):
    """The compiled kernel behind the reference's convention: A[*, M, K] and B[*, K, N] as
    the views they are (transposed, pitched, or 2-D where shared), the addend [batch, M, N]
    or [batch, 1, N]; each reaches TileLang as its storage (a free view, declared with the
    strides the kernel was built for), or KernelError says how it differs. Returns
    Y[batch, M, N]."""

    def __init__(self, launcher: C.Launcher):
        super().__init__(launcher)
        self.shape = launcher.shape
        self.a, self.b = P.operands(self.shape)
        self.heads = P.heads_of(self.shape)
        self.add = P.addend_shape(self.shape)
        self._seen: dict[tuple, bool] = {}  # (operand, size, strides) -> lies as declared

    def _view(self, x: torch.Tensor, op: P.Operand, name: str) -> torch.Tensor:
        st = x.transpose(-1, -2) if op.t else x
        key = (name, tuple(st.shape), tuple(st.stride()))
        ok = self._seen.get(key)
        if ok is None:
            ok = self._seen[key] = self._lies_as(st, op)
        if not ok:
            raise KernelError(
                f"bmm: operand {name} of size {tuple(x.shape)} and strides {tuple(x.stride())} does not "
                f"lie as the kernel was built to read it (transposed {int(op.t)}, pitch {op.pitch}, "
                f"shared {int(op.shared)})"
            )
        if op.shared and st.dim() > 2:
            st = st[(0,) * (st.dim() - 2)]
        batch = self.shape[0]
        return torch.as_strided(
            st, op.decl_shape(batch, self.heads), op.decl_strides(batch, self.heads), st.storage_offset()
        )

    def _lies_as(self, st: torch.Tensor, op: P.Operand) -> bool:
        """Whether the storage view `st` [*lead, lines, inner] puts every element where the
        kernel's declared strides look for it (batch index z row-major over lead)."""
        batch = self.shape[0]
        strides = op.decl_strides(batch, self.heads)
        if st.dim() < 2 or tuple(st.shape[-2:]) != (op.lines, op.inner):
            return False
        if (op.lines > 1 and st.stride(-2) != strides[-2]) or (op.inner > 1 and st.stride(-1) != 1):
            return False
        lead, lead_strides = st.shape[:-2], st.stride()[:-2]
        if op.shared:
            return all(d == 1 or s == 0 for d, s in zip(lead, lead_strides))
        if math.prod(lead) != batch:
            return False
        z = torch.arange(batch)
        addr, rest = torch.zeros(batch, dtype=torch.long), z.clone()
        for d, s in reversed(list(zip(lead, lead_strides))):
            addr += (rest % d) * s
            rest //= d
        want = (z // self.heads) * strides[0] + (z % self.heads) * strides[1] if op.pitch else z * strides[0]
        return bool(torch.equal(addr, want))

    def __call__(self, a: torch.Tensor, b: torch.Tensor, add: torch.Tensor | None = None) -> torch.Tensor:
        args = [self._view(a, self.a, "A"), self._view(b, self.b, "B")]
        if self.add is not None:
            if add is None:
                raise KernelError("bmm: this kernel adds an addend: pass it as the third input")
            try:  # a view, never a silent copy: the route counts its copies
                c = add.view(self.add)
            except RuntimeError:
                c = None
            if c is None or not c.is_contiguous():
                raise KernelError(
                    f"bmm: the addend must be a contiguous {list(self.add)} (or [batch, 1, N] for a "
                    f"row per batch), got size {tuple(add.shape)} strides {tuple(add.stride())}"
                )
            args.append(c)
        args = self.launcher.check_inputs(args, keep_strides=[True] * len(args))
        return self.launcher.kernel(*args)


_WRAPPED = C.OnceCache()


# ---------------------------------------------------------------- the family


def _tc_smem(cfg: dict[str, Any], dtype: str) -> int:
    b = C.dtype_bytes(dtype)
    return (
        (cfg["block_M"] + cfg["block_N"]) * cfg["block_K"] * max(1, cfg["num_stages"]) + cfg["block_M"] * cfg["block_N"]
    ) * b


def _simt_smem(cfg: dict[str, Any]) -> int:
    return (cfg["block_M"] + cfg["block_N"] + 8) * cfg["block_K"] * 4 * max(1, cfg["num_stages"])


def _simt_threads(cfg: dict[str, Any]) -> int:
    return (cfg["block_M"] // cfg["thread_M"]) * (cfg["block_N"] // cfg["thread_N"])


def _cpu_local(cfg: dict[str, Any]) -> int:
    return (cfg["block_M"] * cfg["block_K"] + cfg["block_K"] * cfg["block_N"] + cfg["block_M"] * cfg["block_N"]) * 4


def _batched_matmul(input_shapes: Sequence[Sequence[int]]) -> bool:
    """aten::matmul whose second operand has a batch and whose first is at least 2-D."""
    dims = [len(s) for s in input_shapes[:2] if isinstance(s, (list, tuple))]
    return len(dims) == 2 and dims[0] >= 2 and dims[1] >= 3


class BmmFamily(KernelFamily):
    name = "bmm"
    title = "Batched GEMM (bmm, baddbmm, batched matmul / einsum)"
    shape_names = P.NAMES
    optional_dims = len(P.NAMES) - 4
    aten_ops = frozenset({"aten::bmm", "aten::baddbmm"})  # and batched aten::matmul (`covers`)
    params = MappingProxyType({"alpha": 1.0, "beta": 1.0})
    # The batch is a grid dimension and the flags are layouts: only the matrix dims have tails.
    awkward_dims = ("M", "N", "K")

    # ------------------------------------------------------------ shapes

    def check(self, shape: Sequence[int]) -> Shape:
        """The shape as ints in its shortest form, or KernelError saying what a valid one is."""
        try:
            dims = tuple(int(s) for s in shape)
        except (TypeError, ValueError):
            dims = ()
        ok = 4 <= len(dims) <= len(P.NAMES)
        if ok:
            batch, M, N, K, a_t, b_t, heads, ap, bp, add, a_sh, b_sh = P.full(dims)
            pitched = [p for p, sh in ((ap, a_sh), (bp, b_sh)) if p]
            ok = (
                min(batch, M, N, K) > 0
                and {a_t, b_t, a_sh, b_sh} <= {0, 1}
                and add in (0, 1, 2)
                and min(heads, ap, bp) >= 0
                and not (a_sh and ap)
                and not (b_sh and bp)
                and not (a_sh and b_sh)
                and (not pitched or (heads > 0 and batch % heads == 0 and all(p >= heads for p in pitched)))
            )
        if not ok:
            raise KernelError(
                f"bmm: shape must be (batch, M, N, K[, a_t, b_t, heads, a_pitch, b_pitch, addend, "
                f"a_shared, b_shared]): four positive ints, flags 0 or 1, addend 0, 1 or 2, pitches 0 "
                f"or at least heads (a divisor of batch), a shared operand unpitched and not both "
                f"shared, got {tuple(shape)}"
            )
        if not pitched:
            dims = dims[:6] + (0,) + dims[7:]  # heads mean nothing without a pitched operand
        dims = P.full(dims)
        while len(dims) > 4 and dims[-1] == 0:
            dims = dims[:-1]
        return dims

    def covers(self, op: str, input_shapes: Sequence[Sequence[int]] = ()) -> bool:
        return op in self.aten_ops or (op == "aten::matmul" and _batched_matmul(input_shapes))

    def problem_shape(
        self,
        op: str,
        input_shapes: Sequence[Sequence[int]],
        concrete_inputs: Sequence[Any] | None = None,
        input_strides: Sequence[Sequence[int]] | None = None,
    ) -> Shape | None:
        """The shape the route will see for one profiled aten::bmm, aten::baddbmm or batched
        aten::matmul: layouts from the recorded strides (contiguous where none were
        recorded), baddbmm's addend from its input's size and strides and its beta (the
        fourth concrete input; 0 drops it)."""
        try:
            shapes = [list(s) if isinstance(s, (list, tuple)) else [] for s in input_shapes]
            strides = [list(s) if isinstance(s, (list, tuple)) else [] for s in (input_strides or [])]
            first = 1 if op == "aten::baddbmm" else 0
            if op not in ("aten::bmm", "aten::baddbmm", "aten::matmul") or len(shapes) < first + 2:
                return None
            a, b = shapes[first], shapes[first + 1]
            if op == "aten::matmul" and not _batched_matmul(shapes):
                return None
            if op != "aten::matmul" and (len(a) != 3 or len(b) != 3 or a[0] != b[0]):
                return None
            sa = strides[first] if len(strides) > first + 1 and len(strides[first]) == len(a) else _contiguous(a)
            sb = (
                strides[first + 1] if len(strides) > first + 1 and len(strides[first + 1]) == len(b) else _contiguous(b)
            )
            batch = tuple(torch.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2])))
            mode = 0
            if op == "aten::baddbmm":
                args = list(concrete_inputs or []) + [None] * 5
                beta = 1.0 if args[3] is None else float(args[3])
                if beta != 0.0:
                    inp = shapes[0]
                    si = strides[0] if strides and len(strides[0]) == len(inp) else _contiguous(inp)
                    got = addend_side(inp, si, int(a[0]), int(a[1]), int(b[2]))
                    if isinstance(got, str):
                        return None
                    mode = got[0]
            found = plan(a, sa, b, sb, batch, mode)
            return None if isinstance(found, str) else found.shape
        except (IndexError, TypeError, ValueError, RuntimeError, KernelError):
            return None

    def layout_free(self, shape: Shape) -> Shape:
        """(batch, M, N, K) and whether an addend is read: strides say the rest."""
        shape = P.full(shape)
        return self.check(shape[:4] + (0,) * 5 + ((1,) if shape[9] else (0,)))

    def standard_shapes(self, device: str) -> list[Shape]:
        if device == "cpu":
            # Each stays well under 50 ms per TileLang call on one core.
            medium = (8, 128, 128, 64)
            return [(8, 64, 64, 32), medium, (4, 128, 64, 128, 0, 1), self.awkward_shape(medium)]
        # BERT-base's eager attention at batch 8 (scores, context), a long sequence, and tails.
        return [
            (96, 128, 128, 64, 0, 1),
            (96, 128, 64, 128),
            (32, 1024, 1024, 128, 0, 1),
            (64, 512, 512, 64),
            self.awkward_shape((32, 1024, 1024, 128)),
        ]

    # ------------------------------------------------------------ data

    def make_inputs(self, shape: Shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
        """A[*, M, K] and B[*, K, N] laid out as the shape says (a pitched operand is heads
        of a [batch / heads, rows, pitch, cols] buffer, as [batch / heads, heads, R, C]; a
        shared one 2-D), and the addend where there is one."""
        shape = self.check(shape)
        dtype = C.canonical_dtype(dtype)
        batch, M, N, K = shape[:4]
        heads = P.heads_of(shape)
        g = C.generator(seed)
        a_op, b_op = P.operands(shape)

        def operand(op: P.Operand, scale: float) -> torch.Tensor:
            if op.shared:
                st = C.randn((op.lines, op.inner), dtype, device, g, scale=scale)
            elif op.pitch:
                buf = C.randn((batch // heads, op.lines, op.pitch, op.inner), dtype, device, g, scale=scale)
                st = buf[:, :, :heads].transpose(1, 2)
            else:
                st = C.randn((batch, op.lines, op.inner), dtype, device, g, scale=scale)
            return st.transpose(-1, -2) if op.t else st

        # B scaled by 1/sqrt(K) keeps outputs O(1) for every K, so one tolerance fits all.
        out = [operand(a_op, 1.0), operand(b_op, 1.0 / math.sqrt(K))]
        add = P.addend_of(shape)
        if add:
            out.append(C.randn((batch, M if add == P.ADD_FULL else 1, N), dtype, device, g, scale=0.5))
        return tuple(out)

    def reference(self, *inputs: torch.Tensor) -> torch.Tensor:
        """torch.matmul of the operands with their batch dims flattened (torch.baddbmm
        with alpha = beta = 1 where an addend is given): Y[batch, M, N]."""
        a, b = inputs[:2]
        a3 = a.reshape(-1, *a.shape[-2:]) if a.dim() > 2 else a
        b3 = b.reshape(-1, *b.shape[-2:]) if b.dim() > 2 else b
        if len(inputs) == 2:
            out = torch.matmul(a3, b3)
            return out if out.dim() == 3 else out.unsqueeze(0)
        add = inputs[2]
        batch = add.shape[0]
        return torch.baddbmm(add, a3.expand(batch, *a3.shape[-2:]), b3.expand(batch, *b3.shape[-2:]))

    def input_shapes(self, shape: Shape) -> list[tuple[int, ...]]:
        """The storage the compiled kernel reads (`BatchedKernel` makes it from the views)."""
        batch, heads = shape[0], P.heads_of(shape)
        a, b = P.operands(shape)
        add = P.addend_shape(shape)
        return [a.decl_shape(batch, heads), b.decl_shape(batch, heads)] + ([add] if add else [])

    # ------------------------------------------------------------ metrics

    def flops(self, shape: Shape) -> float:
        batch, M, N, K = self.check(shape)[:4]
        return 2.0 * batch * M * N * K + (2.0 * batch * M * N if P.addend_of(shape) else 0.0)

    def bytes(self, shape: Shape, dtype: str) -> float:
        shape = self.check(shape)
        batch, M, N = shape[:3]
        a, b = P.operands(shape)
        add = P.addend_shape(shape)
        elems = sum(op.lines * op.inner * (1 if op.shared else batch) for op in (a, b))
        elems += batch * M * N + (math.prod(add) if add else 0)
        return float(elems * C.dtype_bytes(C.canonical_dtype(dtype)))

    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        """Both sides accumulate in fp32 (PyTorch's CPU half bmm and cuBLAS alike); the
        difference is summation order (grows ~sqrt(K)) and one output rounding. Without a
        shape, K = 1024 is assumed."""
        dtype = C.canonical_dtype(dtype)
        k = int(shape[3]) if shape is not None else 1024
        grow = max(1.0, math.sqrt(k / 256.0))
        base = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
        return (base * grow, base * grow)

    # ------------------------------------------------------------ tuning

    def search_space(self, shape: Shape, dtype: str, hardware: Hardware) -> list[KernelConfig]:
        shape = self.check(shape)
        dtype = C.canonical_dtype(dtype)
        batch, M, N, K = shape[:4]
        if C.is_cpu_target(hardware.target) or hardware.device == "cpu":
            out = []
            for bM, bN, bK in ((64, 64, 32), (32, 64, 64), (64, 128, 32), (16, 64, 64)):
                cfg = {
                    "block_M": min(bM, C.round_up(M, 8)),
                    "block_N": min(bN, C.round_up(N, 8)),
                    "block_K": min(bK, C.round_up(K, 8)),
                }
                cfg["unroll"] = C.cpu_unroll(cfg["block_K"])  # the K loop split by hand (C.CPU_UNROLL)
                if _cpu_local(cfg) <= CPU_LOCAL_LIMIT_BYTES:
                    out.append(cfg)
            return C.dedupe(out)
        if dtype == "float32":
            raw = [
                (64, 64, 16, 4, 4, 2),
                (128, 128, 16, 8, 8, 2),
                (64, 128, 16, 4, 8, 2),
                (128, 64, 16, 8, 4, 2),
                (32, 64, 16, 4, 4, 2),
                (64, 64, 32, 4, 4, 2),
            ]
            cands = [
                {"block_M": a, "block_N": b, "block_K": k, "thread_M": tm, "thread_N": tn, "num_stages": s}
                for a, b, k, tm, tn, s in raw
            ]
        else:
            raw = [
                # (block_M, block_N, block_K, num_stages, threads): a coarse grid that fits Hopper's
                # 227 KB of shared memory; 64-row tiles for short sequences (more blocks per
                # batch), 128x256 on two warpgroups for long ones.
                (64, 64, 64, 2, 128),
                (64, 128, 64, 2, 128),
                (128, 64, 64, 2, 128),
                (128, 128, 64, 2, 128),
                (128, 128, 32, 3, 128),
                (128, 128, 64, 3, 256),
                (128, 256, 64, 3, 256),
                (64, 256, 64, 2, 128),
                (64, 64, 32, 3, 128),
                (128, 128, 128, 2, 256),
            ]
            cands = [
                {**TC_DEFAULTS, "block_M": a, "block_N": b, "block_K": k, "num_stages": s, "threads": t}
                for a, b, k, s, t in raw
            ]
            # Panel rasterization only where one batch's grid is large enough for L2 reuse to matter.
            cands += [
                {**c, "swizzle": True}
                for c in cands[3:4] + cands[6:7]
                if C.ceildiv(M, c["block_M"]) >= 8 and C.ceildiv(N, c["block_N"]) >= 8
            ]
        # Tiles far larger than the problem only add padding work.
        cands = [
            c
            for c in cands
            if c["block_M"] <= max(64, C.next_pow2(M))
            and c["block_N"] <= max(64, C.next_pow2(N))
            and c["block_K"] <= max(32 if dtype != "float32" else 16, C.next_pow2(K))
        ]
        fitting = C.dedupe(c for c in cands if self.reject_reason(shape, dtype, c, hardware) is None)
        ordered = _order_by_waves(fitting, batch, M, N, hardware)
        if dtype == "float32" and ordered:
            return ordered[:1] + C.unroll_variants(ordered[0], hardware) + ordered[1:]
        return ordered

    def limits_error(self, shape: Shape, dtype: str, cfg: dict, hw: Hardware) -> str | None:
        if C.targets_cpu(hw):
            local = _cpu_local(cfg)
            return None if local <= CPU_LOCAL_LIMIT_BYTES else f"local tiles need {local} B of stack"
        smem = _simt_smem(cfg) if dtype == "float32" else _tc_smem(cfg, dtype)
        if not C.smem_fits(smem, hw):
            return f"needs {smem} B of shared memory, the device allows {hw.smem_per_block} B per block"
        return None

    # ------------------------------------------------------------ build

    def schedule(self, shape: Shape, dtype: str, target: str) -> Schedule:
        if C.is_cpu_target(target):
            return Schedule(CPU_DEFAULTS, P.cpu_program)
        if dtype == "float32":
            return Schedule(SIMT_DEFAULTS, P.simt_program)
        return Schedule(TC_DEFAULTS, P.tensor_core_program)

    def config_error(self, shape: Shape, dtype: str, cfg: dict, target: str) -> str | None:
        for key in ("block_M", "block_N", "block_K"):
            if cfg[key] <= 0:
                return f"{key} must be positive, got {cfg[key]}"
        if C.is_cpu_target(target):
            return C.unroll_error(cfg, cpu=True)
        if dtype == "float32":
            if cfg["block_M"] % cfg["thread_M"] or cfg["block_N"] % cfg["thread_N"]:
                return f"block_M/block_N must be multiples of thread_M/thread_N, got {cfg}"
            if not 32 <= _simt_threads(cfg) <= 1024:
                return f"SIMT config needs 32..1024 threads, got {_simt_threads(cfg)}"
            return C.unroll_error(cfg, cpu=False)
        return C.warpgroup_tile_error(cfg)

    def compile(self, resolved: Resolved, target: str) -> Callable[..., torch.Tensor]:
        # One wrapper per compiled kernel, as the kernel is one per key (its layout checks are kept).
        launcher = super().compile(resolved, target)
        return _WRAPPED.get((id(launcher),), lambda: BatchedKernel(launcher))

    # ------------------------------------------------------------ swap-in (at the operator)

    functions = (*MATMUL, *BMM, *BADDBMM, EINSUM)

    def owns(self, func: Callable, args: tuple, kwargs: dict) -> bool:
        """torch.bmm and torch.baddbmm always; torch.matmul where the second operand is
        batched (>= 3-D) and the first at least 2-D; torch.einsum where the equation is
        one batched contraction (as_matmul's non-weight form)."""
        if func is EINSUM:
            eq, ops = _einsum_args(args)
            if eq is None or len(ops) != 2:
                return False
            found = as_matmul(eq, ops[0].dim(), ops[1].dim())
            return found is not None and not found.weight
        if func in MATMUL:
            a, b = arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "other")
            return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() >= 2 and b.dim() >= 3
        return True

    def route(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> Route | str:
        """One call as its problem shape and a launch, or why it stays in PyTorch."""
        if kwargs.get("out") is not None:
            return "out= given"
        alpha, beta, add = 1.0, 1.0, None
        finish = None
        if func in BMM:
            a, b = arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "mat2")
            if a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0]:
                return "bmm operands are not [batch, M, K] and [batch, K, N]"
            batch = (int(a.shape[0]),)
        elif func in BADDBMM:
            add, a, b = (arg(args, kwargs, i, n) for i, n in enumerate(("input", "batch1", "batch2")))
            beta, alpha = float(kwargs.get("beta", 1.0)), float(kwargs.get("alpha", 1.0))
            if a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0]:
                return "baddbmm operands are not [batch, M, K] and [batch, K, N]"
            if not isinstance(add, torch.Tensor):
                return "baddbmm input is not a tensor"
            batch = (int(a.shape[0]),)
            if beta == 0.0:
                add = None  # PyTorch ignores the input (NaN included) when beta is 0
        elif func in MATMUL:
            a, b = arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "other")
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                return "operands are not tensors"
            if a.dim() < 2 or b.dim() < 2:
                return "a 1-D operand (a matrix-vector product)"
            if b.dim() == 2:
                return "second operand is 2-D (a product by a matrix: gemm's)"
            try:
                batch = tuple(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
            except RuntimeError:
                return "batch dims do not broadcast"
        elif func is EINSUM:
            got = _einsum_operands(args, kwargs)
            if isinstance(got, str):
                return got
            a, b, batch, finish = got
        else:
            return f"bmm does not take {getattr(func, '__name__', func)}"
        bad = dtype_mismatch(dtype, a, b, add)
        if bad:
            return bad
        M, N = int(a.shape[-2]), int(b.shape[-1])
        mode, add_copy = 0, False
        if add is not None:
            got = addend_side(add.shape, add.stride(), math.prod(batch), M, N)
            if isinstance(got, str):
                return got
            mode, add_copy = got
            add_copy = add_copy or not _aligned(add)
        found = plan(a.shape, a.stride(), b.shape, b.stride(), batch, mode, (_aligned(a), _aligned(b)))
        if isinstance(found, str):
            return found
        notes = tuple(f"{name} copied to contiguous" for name, s in (("A", found.a), ("B", found.b)) if s.copy)
        notes += ("addend copied to contiguous",) if add_copy else ()
        nbatch = found.shape[0]

        def launch(kernel: Callable[..., torch.Tensor]) -> torch.Tensor:
            ops = [_storage(a, found.a, batch), _storage(b, found.b, batch)]
            if add is not None:
                full = add.expand(nbatch, M, N)
                c = full[:, :1, :] if mode == P.ADD_ROW else full
                ops.append(c.clone(memory_format=torch.contiguous_format) if add_copy else c)
            y = kernel(*ops).view(*batch, M, N)
            return finish(y) if finish is not None else y

        params = {"alpha": alpha} if add is None else {"alpha": alpha, "beta": beta}
        return Route(found.shape, launch, params=params, notes=notes)


def _contiguous(size: Sequence[int]) -> list[int]:
    out, s = [], 1
    for d in reversed([int(x) for x in size]):
        out.append(s)
        s *= max(d, 1)
    return out[::-1]


def _order_by_waves(cands: list[KernelConfig], batch: int, M: int, N: int, hw: Hardware) -> list[KernelConfig]:
    """First the largest tile whose grid (over every batch) still gives each SM a block,
    so BERT's 96 batches of 128x128 start from 64-row tiles (192 blocks on 132 SMs); the
    tuner tries the rest in the order given."""
    if not cands:
        return []
    sms = max(1, int(hw.cores or 1))

    def blocks(c: KernelConfig) -> int:
        return batch * C.ceildiv(M, c["block_M"]) * C.ceildiv(N, c["block_N"])

    full = [c for c in cands if blocks(c) >= sms]
    if full:
        first = max(full, key=lambda c: (c["block_M"] * c["block_N"], -cands.index(c)))
    else:
        first = max(cands, key=lambda c: (blocks(c), -cands.index(c)))
    return [first] + [c for c in cands if c is not first]


def _einsum_args(args: tuple) -> tuple[str | None, tuple]:
    """(equation, operands) of a torch.einsum call, operands given loose or as one list."""
    if not args or not isinstance(args[0], str):
        return None, ()
    ops = tuple(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) else tuple(args[1:])
    if not all(isinstance(t, torch.Tensor) for t in ops):
        return None, ()
    return args[0], ops


def _einsum_operands(args: tuple, kwargs: dict) -> tuple | str:
    """(A[*batch, M, K], B[*batch, K, N] as permuted views, the batch dims, and the
    permutation of Y[*batch, M, N] that the equation's output is) of a batched einsum."""
    eq, ops = _einsum_args(args)
    if eq is None or len(ops) != 2 or kwargs:
        return "einsum of other than two operands"
    a, b = ops
    found = as_matmul(eq, a.dim(), b.dim())
    if found is None or found.weight:
        return "einsum that is not one batched contraction"
    if "*" in found.a or "*" in found.out:
        return "einsum with an ellipsis"
    rows = [c for c in found.a if c not in found.b]
    cols = [c for c in found.b if c not in found.a]
    if len(rows) != 1 or len(cols) != 1:
        return "einsum with other than one row and one column letter"
    lead = [c for c in found.out if c in found.a and c in found.b]
    av = a.permute(*(found.a.index(c) for c in lead + rows + [found.k]))
    bv = b.permute(*(found.b.index(c) for c in lead + [found.k] + cols))
    try:
        batch = tuple(torch.broadcast_shapes(av.shape[:-2], bv.shape[:-2]))
    except RuntimeError:
        return "batch dims do not broadcast"
    order = lead + rows + cols
    perm = [order.index(c) for c in found.out]
    finish = None if perm == list(range(len(perm))) else (lambda y: y.permute(*perm))
    return av, bv, batch, finish


FAMILY = BmmFamily()


# The registry (evaluator.kernels) registers these, in this order.
FAMILIES = (FAMILY,)
