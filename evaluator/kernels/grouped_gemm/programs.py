"""The TileLang programs of the grouped_gemm family (see grouped_gemm/__init__.py for what
they compute).

In: shape (E, M, N, K[, b_t]), a dtype and a full config. Out: a TileLang PrimFunc
(A[M, K], B, Offs[E] int32) -> Y[M, N] with Y[offs[g-1]:offs[g]] = A[offs[g-1]:offs[g]] @
B[g], B stored as [E, K, N] (b_t 0) or as the [E, N, K] it is a transposed view of (b_t 1,
a mixture of experts' nn.Linear-shaped weights). Rows past offs[E-1] are not written
(PyTorch leaves them undefined too).

The group sizes are data: no program reads them on the host. The grid runs over padded
row tiles: group g owns ceil(size_g / block_M) consecutive tiles, and since
sum(ceil(size_g / block_M)) < M / block_M + E, a grid of ceil(M / block_M) + E - 1 tiles
covers every split. Each block walks Offs once (E scalar reads) to find its group,
its first row and how many of its block_M rows are the group's; a block past the last
group's tiles does nothing. Rows of the A tile past the group's end are read (the next
group's tokens, or zeros past M) but never stored, since an output row depends only on its
own A row.

CPU (the C backend): fp32 local tiles, the blocked loop nest of the other families
(`common.cpu_tile_product`). CUDA fp16/bf16: shared-memory tiles in B's storage
orientation, a pipelined K loop on the tensor cores (T.gemm) into an fp32 fragment, the
store guarded at the group's last row. Checking configs and compiling are the family's.
"""

# No `from __future__ import annotations`: TileLang resolves the prim_func's tensor
# annotations from the closure.

from typing import Any

from ...results import Shape
from ..common import cpu_tile_product

ACCUM = "float32"
NAMES = ("E", "M", "N", "K", "b_t")


def full(shape: Shape) -> tuple[int, ...]:
    """The shape with the optional b_t spelled out (0)."""
    return tuple(shape) + (0,) * (len(NAMES) - len(shape))


def b_storage(shape: Shape) -> tuple[int, int, int]:
    """B's storage: [E, K, N], or [E, N, K] when the call's B is its transposed view."""
    E, _, N, K, b_t = full(shape)
    return (E, N, K) if b_t else (E, K, N)


def row_tiles(M: int, E: int, block_M: int) -> int:
    """Grid rows that cover every split of M rows into E groups of block_M-row tiles."""
    return -(-M // block_M) + E - 1


def cpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.cpu.language as T

    E, M, N, K, b_t = full(shape)
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    product = cpu_tile_product(T, bM, bN, bK, cfg.get("unroll", 1))
    tiles = row_tiles(M, E, bM)

    @T.prim_func
    def grouped_gemm_cpu(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor(b_storage(shape), dtype),
        Offs: T.Tensor((E,), "int32"),
        Y: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, bN), tiles) as (bx, by):
            grp = T.alloc_var("int32")
            row0 = T.alloc_var("int32")
            rows = T.alloc_var("int32")
            seen = T.alloc_var("int32")
            grp = -1
            seen = 0
            for g in T.serial(E):  # the walk (see the module docstring)
                start = T.if_then_else(g > 0, Offs[T.max(g - 1, 0)], 0)
                size = T.max(Offs[g] - start, 0)
                if (by >= seen) and (by < seen + (size + (bM - 1)) // bM):
                    grp = g
                    row0 = start + (by - seen) * bM
                    rows = T.min(bM, size - (by - seen) * bM)
                seen = seen + (size + (bM - 1)) // bM
            if grp >= 0:
                # fp32 tiles whatever the storage dtype: half.hpp arithmetic is scalar and slow.
                A_l = T.alloc_local((bM, bK), ACCUM)
                B_l = T.alloc_local((bK, bN), ACCUM)
                C_l = T.alloc_local((bM, bN), ACCUM)
                T.clear(C_l)
                for ko in T.serial(T.ceildiv(K, bK)):
                    for i, k in T.grid(bM, bK):
                        A_l[i, k] = T.if_then_else(
                            (i < rows) and (row0 + i < M) and (ko * bK + k < K),
                            T.cast(A[row0 + i, ko * bK + k], ACCUM),
                            T.float32(0),
                        )
                    for k, j in T.grid(bK, bN):
                        if b_t:
                            B_l[k, j] = T.if_then_else(
                                (bx * bN + j < N) and (ko * bK + k < K),
                                T.cast(B[grp, bx * bN + j, ko * bK + k], ACCUM),
                                T.float32(0),
                            )
                        else:
                            B_l[k, j] = T.if_then_else(
                                (bx * bN + j < N) and (ko * bK + k < K),
                                T.cast(B[grp, ko * bK + k, bx * bN + j], ACCUM),
                                T.float32(0),
                            )
                    product(A_l, B_l, C_l)  # common.cpu_tile_product: i-k-j, the k loop unrolled by hand
                for i, j in T.grid(bM, bN):
                    if (i < rows) and (row0 + i < M) and (bx * bN + j < N):
                        Y[row0 + i, bx * bN + j] = T.cast(C_l[i, j], dtype)

    return grouped_gemm_cpu


def tensor_core_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    """fp16/bf16: one block per (padded row tile, column tile). The A tile is block_M rows
    from the group's row, B's tile comes from the group's matrix in its storage
    orientation ([bN, bK] when transposed, as nn.Linear's weight lies), both through
    `num_stages` pipelined buffers; T.gemm's transpose_B takes the rest."""
    import tilelang.language as T

    E, M, N, K, b_t = full(shape)
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    stages, threads = cfg["num_stages"], cfg["threads"]
    tiles = row_tiles(M, E, bM)

    @T.prim_func
    def grouped_gemm_tc(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor(b_storage(shape), dtype),
        Offs: T.Tensor((E,), "int32"),
        Y: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, bN), tiles, threads=threads) as (bx, by):
            A_s = T.alloc_shared((bM, bK), dtype)
            B_s = T.alloc_shared((bN, bK) if b_t else (bK, bN), dtype)
            C_f = T.alloc_fragment((bM, bN), ACCUM)
            C_s = T.alloc_shared((bM, bN), dtype)
            # The walk on scalars, row0 and rows left unset until it sets them (read only
            # where grp >= 0): sm_90's warp specialization gives each role its own copy of
            # a local buffer, or of a scalar's plain assignment, placed after the walk.
            grp = T.alloc_var("int32")
            row0 = T.alloc_var("int32")
            rows = T.alloc_var("int32")
            seen = T.alloc_var("int32")
            grp = -1
            seen = 0
            for g in T.serial(E):
                start = T.if_then_else(g > 0, Offs[T.max(g - 1, 0)], 0)
                size = T.max(Offs[g] - start, 0)
                if (by >= seen) and (by < seen + (size + (bM - 1)) // bM):
                    grp = g
                    row0 = start + (by - seen) * bM
                    rows = T.min(bM, size - (by - seen) * bM)
                seen = seen + (size + (bM - 1)) // bM
            if grp < 0:
                T.thread_return()
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                T.copy(A[row0 : row0 + bM, ko * bK : ko * bK + bK], A_s)
                if b_t:
                    T.copy(B[grp, bx * bN : bx * bN + bN, ko * bK : ko * bK + bK], B_s)
                else:
                    T.copy(B[grp, ko * bK : ko * bK + bK, bx * bN : bx * bN + bN], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=bool(b_t))
            T.copy(C_f, C_s)
            for i, j in T.Parallel(bM, bN):
                if (i < rows) and (bx * bN + j < N):
                    Y[row0 + i, bx * bN + j] = C_s[i, j]

    return grouped_gemm_tc
