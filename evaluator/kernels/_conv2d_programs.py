"""The TileLang programs of the conv2d family (see conv2d.py for what they compute).

In: shape (N, H, W, C, K, R, S, stride, pad), a dtype and a full config (the schedule's
defaults filled in). Out: a TileLang PrimFunc computing the convolution as an implicit
GEMM over NHWC x and KRSC weights: on CPU a loop nest over fp32 local tiles, on CUDA
shared-memory tiles into tensor-core `T.gemm`. Checking configs and compiling are the
family's (conv2d.py, base.py); nothing here runs a kernel.
"""

# No `from __future__ import annotations`: TileLang resolves the prim_func's tensor
# annotations from the closure, and names used only there (N, H, ...) are not in it.

from typing import Any

from ..results import Shape
from . import _common as C

ACCUM = "float32"


def out_size(shape: Shape) -> tuple[int, int]:
    """(P, Q): the output height and width."""
    _, H, W, _, _, R, S, stride, pad = shape
    return (H + 2 * pad - R) // stride + 1, (W + 2 * pad - S) // stride + 1


def cpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.cpu.language as T

    N, H, W, Cin, K, R, S, stride, pad = shape
    P, Q = out_size(shape)
    M = N * P * Q
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    c_chunks = C.ceildiv(Cin, bK)

    @T.prim_func
    def conv2d_cpu(
        X: T.Tensor((N, H, W, Cin), dtype),
        Wt: T.Tensor((K, R, S, Cin), dtype),
        Y: T.Tensor((N, P, Q, K), dtype),
    ):
        with T.Kernel(T.ceildiv(K, bN), T.ceildiv(M, bM)) as (bx, by):
            # fp32 tiles whatever the storage dtype: half.hpp arithmetic is scalar
            # and slow, and accumulation must be fp32 anyway.
            A_l = T.alloc_local((bM, bK), ACCUM)
            B_l = T.alloc_local((bK, bN), ACCUM)
            C_l = T.alloc_local((bM, bN), ACCUM)
            T.clear(C_l)
            for r, s, co in T.grid(R, S, c_chunks):
                for i, k in T.grid(bM, bK):
                    m = by * bM + i
                    h = (m % (P * Q)) // Q * stride - pad + r
                    w = m % Q * stride - pad + s
                    A_l[i, k] = T.if_then_else(
                        (m < M) and (h >= 0) and (h < H) and (w >= 0) and (w < W) and (co * bK + k < Cin),
                        T.cast(X[m // (P * Q), h, w, co * bK + k], ACCUM), T.float32(0))
                # Transposed on the way in so the inner loop streams rows of both tiles.
                for k, j in T.grid(bK, bN):
                    B_l[k, j] = T.if_then_else((bx * bN + j < K) and (co * bK + k < Cin),
                                               T.cast(Wt[bx * bN + j, r, s, co * bK + k], ACCUM), T.float32(0))
                # i-k-j order: the j loop is unit-stride in C_l and B_l, which gcc
                # auto-vectorizes with -O3 -march=native.
                for i, k in T.grid(bM, bK):
                    for j in T.serial(bN):
                        C_l[i, j] += A_l[i, k] * B_l[k, j]
            for i, j in T.grid(bM, bN):
                m = by * bM + i
                if (m < M) and (bx * bN + j < K):
                    Y[m // (P * Q), (m % (P * Q)) // Q, m % Q, bx * bN + j] = T.cast(C_l[i, j], dtype)

    return conv2d_cpu


def tc_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.language as T

    N, H, W, Cin, K, R, S, stride, pad = shape
    P, Q = out_size(shape)
    M, RSC = N * P * Q, R * S * Cin
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    stages, threads, swizzle, flat_k = cfg["num_stages"], cfg["threads"], cfg["swizzle"], cfg["flat_k"]
    c_chunks = C.ceildiv(Cin, bK)
    # Chunks that would straddle two (r, s) taps need the channel mask on both operands.
    c_tail = Cin % bK != 0
    k_iters = C.ceildiv(RSC, bK) if flat_k else R * S * c_chunks

    @T.prim_func
    def conv2d_tc(
        X: T.Tensor((N, H, W, Cin), dtype),
        Wt: T.Tensor((K, R, S, Cin), dtype),
        Y: T.Tensor((N, P, Q, K), dtype),
    ):
        with T.Kernel(T.ceildiv(K, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bM, bK), dtype)
            B_s = T.alloc_shared((bN, bK), dtype)
            C_f = T.alloc_fragment((bM, bN), ACCUM)
            C_s = T.alloc_shared((bM, bN), dtype)
            # KRSC is a plain (K, R*S*C) row-major matrix and NPQK a (M, K) one.
            W2 = T.reshape(Wt, (K, RSC))
            Y2 = T.reshape(Y, (M, K))
            # Panel rasterization keeps neighbouring blocks on the same weight panel in L2.
            T.use_swizzle(panel_size=10, enable=swizzle)
            T.clear(C_f)
            for ko in T.Pipelined(k_iters, num_stages=stages):
                if flat_k:
                    for i, j in T.Parallel(bM, bK):
                        m = by * bM + i
                        kk = ko * bK + j
                        h = (m % (P * Q)) // Q * stride - pad + kk // (S * Cin)
                        w = m % Q * stride - pad + kk // Cin % S
                        A_s[i, j] = T.if_then_else(
                            (m < M) and (kk < RSC) and (h >= 0) and (h < H) and (w >= 0) and (w < W),
                            X[m // (P * Q), h, w, kk % Cin], T.cast(0, dtype))
                    T.copy(W2[bx * bN, ko * bK], B_s)
                else:
                    r = ko // (S * c_chunks)
                    s = ko // c_chunks % S
                    c0 = ko % c_chunks * bK
                    for i, j in T.Parallel(bM, bK):
                        m = by * bM + i
                        h = (m % (P * Q)) // Q * stride - pad + r
                        w = m % Q * stride - pad + s
                        if c_tail:
                            A_s[i, j] = T.if_then_else(
                                (m < M) and (h >= 0) and (h < H) and (w >= 0) and (w < W) and (c0 + j < Cin),
                                X[m // (P * Q), h, w, c0 + j], T.cast(0, dtype))
                        else:
                            # The predicate is uniform along a row, so the row loads vectorize.
                            A_s[i, j] = T.if_then_else(
                                (m < M) and (h >= 0) and (h < H) and (w >= 0) and (w < W),
                                X[m // (P * Q), h, w, c0 + j], T.cast(0, dtype))
                    if c_tail:
                        for n, j in T.Parallel(bN, bK):
                            B_s[n, j] = T.if_then_else((bx * bN + n < K) and (c0 + j < Cin),
                                                       Wt[bx * bN + n, r, s, c0 + j], T.cast(0, dtype))
                    else:
                        T.copy(W2[bx * bN, (r * S + s) * Cin + c0], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=True)
            T.copy(C_f, C_s)
            T.copy(C_s, Y2[by * bM, bx * bN])

    return conv2d_tc
