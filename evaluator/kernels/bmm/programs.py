"""The TileLang programs of the bmm family (see bmm.py for what they compute).

In: shape (batch, M, N, K[, a_t, b_t, heads, a_pitch, b_pitch, addend, a_shared, b_shared]),
a dtype and a full config (the schedule's defaults, then alpha and beta). Out: a TileLang
PrimFunc Y[batch, M, N] = alpha * A @ B (+ beta * addend), read from each operand's
storage as it lies (`Operand`): row-major or transposed (k.transpose(-1, -2) is read as
the [N, K] rows it is), whole batches one after another or heads interleaved in rows of
a pitch (a projection's `view(B, S, H, D).transpose(1, 2)`), or one matrix for every
batch (a 2-D operand broadcast). On CPU a blocked loop nest over fp32 local tiles, the
batch a grid dimension. On CUDA, fp16/bf16: shared-memory tiles in the storage's own
orientation (T.gemm's transpose_A/transpose_B take the rest), a pipelined K loop on the
tensor cores into an fp32 fragment, the batch as the grid's z; fp32: a register-blocked
SIMT (FFMA) schedule, because T.gemm on fp32 runs as TF32, which would not match
PyTorch's fp32. Every schedule applies alpha and the addend on the fp32 accumulator
before the one rounding. Checking configs and compiling are the family's (bmm.py,
base.py); nothing here runs a kernel.
"""

# No `from __future__ import annotations`: TileLang resolves the prim_func's tensor
# annotations from the closure.

from dataclasses import dataclass
from typing import Any

from ...results import Shape
from ..common import accumulation_loop, cpu_tile_product

ACCUM = "float32"
# Shape fields, in order; the trailing twelve-minus-four may be left out (all zero).
NAMES = ("batch", "M", "N", "K", "a_t", "b_t", "heads", "a_pitch", "b_pitch", "addend", "a_shared", "b_shared")
# addend: what baddbmm adds (beta * input): none, a whole [batch, M, N], or one [batch, 1, N]
# row per batch broadcast over M (BLOOM's alibi bias).
ADD_NONE, ADD_FULL, ADD_ROW = 0, 1, 2


@dataclass(frozen=True)
class Operand:
    """How one operand lies in memory. The operand is logically [batch, R, C] (A: [M, K],
    B: [K, N]); its storage is [lines, inner] rows with unit stride along inner: (R, C)
    as given, or (C, R) when `t` (a transposed view). `pitch` 0: batches one after another,
    each [lines, inner] packed; pitch p: heads of a row-major [batch / heads, lines, p,
    inner] buffer (strides lines*p*inner, inner, p*inner, 1). `shared`: one [lines, inner]
    matrix for every batch."""

    t: bool
    pitch: int
    shared: bool
    lines: int
    inner: int

    def decl_shape(self, batch: int, heads: int) -> tuple[int, ...]:
        if self.shared:
            return (self.lines, self.inner)
        if self.pitch:
            return (batch // heads, heads, self.lines, self.inner)
        return (batch, self.lines, self.inner)

    def decl_strides(self, batch: int, heads: int) -> tuple[int, ...]:
        L, I, p = self.lines, self.inner, self.pitch
        if self.shared:
            return (I, 1)
        if p:
            return (L * p * I, I, p * I, 1)
        return (L * I, I, 1)


def full(shape: Shape) -> tuple[int, ...]:
    """The shape with every optional field spelled out (zeros)."""
    return tuple(shape) + (0,) * (len(NAMES) - len(shape))


def operands(shape: Shape) -> tuple[Operand, Operand]:
    _, M, N, K, a_t, b_t, _, a_pitch, b_pitch, _, a_shared, b_shared = full(shape)
    a = Operand(bool(a_t), int(a_pitch), bool(a_shared), *((K, M) if a_t else (M, K)))
    b = Operand(bool(b_t), int(b_pitch), bool(b_shared), *((N, K) if b_t else (K, N)))
    return a, b


def heads_of(shape: Shape) -> int:
    return int(full(shape)[6]) or 1


def addend_of(shape: Shape) -> int:
    return int(full(shape)[9])


def addend_shape(shape: Shape) -> tuple[int, ...] | None:
    """The kernel's addend input: [batch, M, N], [batch, N] (one row per batch), or none."""
    batch, M, N = shape[:3]
    mode = addend_of(shape)
    return {ADD_NONE: None, ADD_FULL: (batch, M, N), ADD_ROW: (batch, N)}[mode]


def decl(T: Any, op: Operand, batch: int, heads: int, dtype: str) -> Any:
    """The TileLang parameter type of one operand's storage."""
    shape = op.decl_shape(batch, heads)
    if op.pitch and not op.shared:
        return T.StridedTensor(shape, op.decl_strides(batch, heads), dtype)
    return T.Tensor(shape, dtype)


def _at(op: Operand, heads: int):
    """X[storage index] of batch z, storage line l and inner position i, as the buffer is
    declared (a plain function: TileLang calls it while parsing, with TIR expressions)."""
    if op.shared:
        return lambda X, z, line, i: X[line, i]
    if op.pitch:
        return lambda X, z, line, i: X[z // heads, z % heads, line, i]
    return lambda X, z, line, i: X[z, line, i]


def element(op: Operand, heads: int):
    """`get(X, z, r, c)`: the operand's logical element [z, r, c] (A: r over M, c over K;
    B: r over K, c over N), wherever its storage keeps it."""
    at = _at(op, heads)
    if op.t:
        return lambda X, z, r, c: at(X, z, c, r)
    return at


def region(op: Operand, heads: int):
    """`tile(X, z, l0, nl, i0, ni)`: the storage region of batch z, lines [l0, l0 + nl),
    inner [i0, i0 + ni), for T.copy (rows past the end read as zeros)."""
    if op.shared:
        return lambda X, z, l0, nl, i0, ni: X[l0 : l0 + nl, i0 : i0 + ni]
    if op.pitch:
        return lambda X, z, l0, nl, i0, ni: X[z // heads, z % heads, l0 : l0 + nl, i0 : i0 + ni]
    return lambda X, z, l0, nl, i0, ni: X[z, l0 : l0 + nl, i0 : i0 + ni]


def epilogue_value(T: Any, shape: Shape, cfg: dict[str, Any]):
    """`value(acc, Add, z, m, n)`: the fp32 result of one output element from its
    accumulator: alpha * acc (+ beta * addend). Plain Python, folded where alpha is 1 and
    there is no addend, so a plain product's program has no multiply."""
    alpha, beta, mode = float(cfg.get("alpha", 1.0)), float(cfg.get("beta", 1.0)), addend_of(shape)

    def scaled(acc):
        return acc if alpha == 1.0 else acc * T.float32(alpha)

    def term(v):
        return v if beta == 1.0 else v * T.float32(beta)

    if mode == ADD_FULL:
        return lambda acc, Add, z, m, n: scaled(acc) + term(T.cast(Add[z, m, n], ACCUM))
    if mode == ADD_ROW:
        return lambda acc, Add, z, m, n: scaled(acc) + term(T.cast(Add[z, n], ACCUM))
    return lambda acc, Add, z, m, n: scaled(acc)


def product_program(T: Any, shape: Shape, dtype: str, body: Any, name: str) -> Any:
    """The PrimFunc (A, B[, Add]) -> Y around `body(A, B, Add, Y)` (Add None without an addend)."""
    batch, M, N = shape[:3]
    a, b = operands(shape)
    heads = heads_of(shape)
    add = addend_shape(shape)
    if add is not None:

        @T.prim_func
        def bmm_add(
            A: decl(T, a, batch, heads, dtype),
            B: decl(T, b, batch, heads, dtype),
            Add: T.Tensor(add, dtype),
            Y: T.Tensor((batch, M, N), dtype),
        ):
            body(A, B, Add, Y)

        return bmm_add.with_attr("global_symbol", name + "_add")

    @T.prim_func
    def bmm(
        A: decl(T, a, batch, heads, dtype),
        B: decl(T, b, batch, heads, dtype),
        Y: T.Tensor((batch, M, N), dtype),
    ):
        body(A, B, None, Y)

    return bmm.with_attr("global_symbol", name)


# ---------------------------------------------------------------- CPU


def cpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.cpu.language as T

    batch, M, N, K = shape[:4]
    a, b = operands(shape)
    heads = heads_of(shape)
    get_a, get_b = element(a, heads), element(b, heads)
    value = epilogue_value(T, shape, cfg)
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    product = cpu_tile_product(T, bM, bN, bK, cfg.get("unroll", 1))

    @T.macro
    def body(A, B, Add, Y):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), batch) as (bx, by, bz):
            # fp32 tiles whatever the storage dtype: half.hpp arithmetic is scalar and slow.
            A_l = T.alloc_local((bM, bK), ACCUM)
            B_l = T.alloc_local((bK, bN), ACCUM)
            C_l = T.alloc_local((bM, bN), ACCUM)
            T.clear(C_l)
            for ko in T.serial(T.ceildiv(K, bK)):
                for i, k in T.grid(bM, bK):
                    A_l[i, k] = T.if_then_else(
                        (by * bM + i < M) and (ko * bK + k < K),
                        T.cast(get_a(A, bz, by * bM + i, ko * bK + k), ACCUM),
                        T.float32(0),
                    )
                for k, j in T.grid(bK, bN):
                    B_l[k, j] = T.if_then_else(
                        (bx * bN + j < N) and (ko * bK + k < K),
                        T.cast(get_b(B, bz, ko * bK + k, bx * bN + j), ACCUM),
                        T.float32(0),
                    )
                product(A_l, B_l, C_l)  # C.cpu_tile_product: i-k-j, the k loop unrolled by hand
            for i, j in T.grid(bM, bN):
                if (by * bM + i < M) and (bx * bN + j < N):
                    Y[bz, by * bM + i, bx * bN + j] = T.cast(value(C_l[i, j], Add, bz, by * bM + i, bx * bN + j), dtype)

    return product_program(T, shape, dtype, body, "bmm_cpu")


# ---------------------------------------------------------------- CUDA


def tensor_core_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    """fp16/bf16: one block per (output tile, batch). Each operand's tile is copied in its
    storage's orientation (A as [bK, bM] when transposed, B as [bN, bK] when transposed,
    as nn.Linear's weight lies) through `num_stages` pipelined buffers, and T.gemm reads
    them with the matching transpose flags, so no operand is transposed in memory."""
    import tilelang.language as T

    batch, M, N, K = shape[:4]
    a, b = operands(shape)
    heads = heads_of(shape)
    tile_a, tile_b = region(a, heads), region(b, heads)
    value = epilogue_value(T, shape, cfg)
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    stages, threads, swizzle, panel = cfg["num_stages"], cfg["threads"], cfg["swizzle"], cfg["panel"]
    plain = addend_of(shape) == ADD_NONE and float(cfg.get("alpha", 1.0)) == 1.0

    @T.macro
    def body(A, B, Add, Y):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), batch, threads=threads) as (bx, by, bz):
            A_s = T.alloc_shared((bK, bM) if a.t else (bM, bK), dtype)
            B_s = T.alloc_shared((bN, bK) if b.t else (bK, bN), dtype)
            C_f = T.alloc_fragment((bM, bN), ACCUM)
            C_s = T.alloc_shared((bM, bN), dtype)
            # Panel rasterization within each batch's grid keeps neighbouring blocks on
            # the same A/B panels in L2 (only offered where that grid is large).
            T.use_swizzle(panel_size=panel, enable=swizzle)
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                if a.t:
                    T.copy(tile_a(A, bz, ko * bK, bK, by * bM, bM), A_s)
                else:
                    T.copy(tile_a(A, bz, by * bM, bM, ko * bK, bK), A_s)
                if b.t:
                    T.copy(tile_b(B, bz, bx * bN, bN, ko * bK, bK), B_s)
                else:
                    T.copy(tile_b(B, bz, ko * bK, bK, bx * bN, bN), B_s)
                T.gemm(A_s, B_s, C_f, transpose_A=a.t, transpose_B=b.t)
            if not plain:
                # Past M or N the addend is not read; the store drops those elements.
                for i, j in T.Parallel(bM, bN):
                    C_f[i, j] = T.if_then_else(
                        (by * bM + i < M) and (bx * bN + j < N),
                        value(C_f[i, j], Add, bz, by * bM + i, bx * bN + j),
                        C_f[i, j],
                    )
            T.copy(C_f, C_s)
            T.copy(C_s, Y[bz, by * bM, bx * bN])

    return product_program(T, shape, dtype, body, "bmm_tc")


def simt_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    """fp32: each thread owns a thread_M x thread_N register tile; A and B tiles are kept
    K-major in shared memory (padded against bank conflicts) so each thread reads its
    operands as vectors, whatever the storage's orientation."""
    import tilelang.language as T

    batch, M, N, K = shape[:4]
    a, b = operands(shape)
    heads = heads_of(shape)
    get_a, get_b = element(a, heads), element(b, heads)
    value = epilogue_value(T, shape, cfg)
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    tM, tN, stages, unroll = cfg["thread_M"], cfg["thread_N"], cfg["num_stages"], cfg.get("unroll", 0)
    cols = bN // tN
    threads = (bM // tM) * cols
    pad = 4

    @T.macro
    def body(A, B, Add, Y):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), batch, threads=threads) as (bx, by, bz):
            A_s = T.alloc_shared((bK, bM + pad), dtype)
            B_s = T.alloc_shared((bK, bN + pad), dtype)
            acc = T.alloc_local((tM, tN), ACCUM)
            a_r = T.alloc_local((tM,), ACCUM)
            b_r = T.alloc_local((tN,), ACCUM)
            tid = T.get_thread_binding()
            ty = tid // cols
            tx = tid % cols
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                # The loop order follows the storage's unit stride, so global reads coalesce.
                if a.t:
                    for k, i in T.Parallel(bK, bM):
                        A_s[k, i] = T.if_then_else(
                            (by * bM + i < M) and (ko * bK + k < K),
                            get_a(A, bz, by * bM + i, ko * bK + k),
                            T.float32(0),
                        )
                else:
                    for i, k in T.Parallel(bM, bK):
                        A_s[k, i] = T.if_then_else(
                            (by * bM + i < M) and (ko * bK + k < K),
                            get_a(A, bz, by * bM + i, ko * bK + k),
                            T.float32(0),
                        )
                if b.t:
                    for j, k in T.Parallel(bN, bK):
                        B_s[k, j] = T.if_then_else(
                            (bx * bN + j < N) and (ko * bK + k < K),
                            get_b(B, bz, ko * bK + k, bx * bN + j),
                            T.float32(0),
                        )
                else:
                    for k, j in T.Parallel(bK, bN):
                        B_s[k, j] = T.if_then_else(
                            (bx * bN + j < N) and (ko * bK + k < K),
                            get_b(B, bz, ko * bK + k, bx * bN + j),
                            T.float32(0),
                        )
                for kk in accumulation_loop(T, bK, unroll):
                    for i in T.vectorized(tM):
                        a_r[i] = A_s[kk, ty * tM + i]
                    for j in T.vectorized(tN):
                        b_r[j] = B_s[kk, tx * tN + j]
                    for i in T.unroll(tM):
                        for j in T.unroll(tN):
                            acc[i, j] += a_r[i] * b_r[j]
            for i, j in T.grid(tM, tN):
                if (by * bM + ty * tM + i < M) and (bx * bN + tx * tN + j < N):
                    Y[bz, by * bM + ty * tM + i, bx * bN + tx * tN + j] = value(
                        acc[i, j], Add, bz, by * bM + ty * tM + i, bx * bN + tx * tN + j
                    )

    return product_program(T, shape, dtype, body, "bmm_simt")
