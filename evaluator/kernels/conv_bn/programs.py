"""The TileLang programs of the conv_bn families: conv2d's implicit GEMMs with a
per-output-channel epilogue.

In: a conv2d `Geometry` (groups = 1), a dtype, a full config (conv2d's keys) and whether
the epilogue adds a residual and ends in a ReLU. Out: a TileLang PrimFunc taking X, the
weight, Scale[K] and Shift[K] (both fp32), with `residual` a tensor Rs of the output's
shape and layout, and writing Y = Scale[k] * conv(X, W) + Shift[k] (+ Rs) (then
max(., 0)), computed on the fp32 accumulator before the one rounding to the output dtype. The main
loops are those of conv2d's programs (`evaluator.kernels.conv2d.programs`: the CPU loop
nest for both layouts, the channels_last and the NCHW tensor-core GEMMs); only the store
differs, so a batch norm folded into Scale and Shift costs no pass of its own (the main
loops are conv2d's line for line; tests/kernels/test_conv_bn.py holds them to that).
Checking configs and compiling are the family's (conv_bn/__init__.py).
"""

# No `from __future__ import annotations`: TileLang resolves the prim_func's tensor
# annotations from the closure.

from typing import Any

from ...results import Shape
from .. import common as C
from ..conv2d.programs import ACCUM, Geometry, geometry, tensor_shapes


def cpu_program(shape: Shape | Geometry, dtype: str, cfg: dict[str, Any], relu: bool, residual: bool = False):
    import tilelang.cpu.language as T

    g = geometry(shape)
    N, H, W, Cin, K, R, S, sh, sw, ph, pw = g[:11]
    nchw = g.nchw
    x_shape, w_shape, y_shape = tensor_shapes(g)
    P, Q = g.P, g.Q
    M = N * P * Q
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    c_chunks = C.ceildiv(Cin, bK)

    @T.macro
    def body(X, Wt, Scale, Shift, Rs, Y):
        with T.Kernel(T.ceildiv(K, bN), T.ceildiv(M, bM)) as (bx, by):
            A_l = T.alloc_local((bM, bK), ACCUM)
            B_l = T.alloc_local((bK, bN), ACCUM)
            C_l = T.alloc_local((bM, bN), ACCUM)
            T.clear(C_l)
            for r, s, co in T.grid(R, S, c_chunks):
                for i, k in T.grid(bM, bK):
                    m = by * bM + i
                    h = (m % (P * Q)) // Q * sh - ph + r
                    w = m % Q * sw - pw + s
                    inside = (m < M) and (h >= 0) and (h < H) and (w >= 0) and (w < W) and (co * bK + k < Cin)
                    if nchw:
                        A_l[i, k] = T.if_then_else(
                            inside, T.cast(X[m // (P * Q), co * bK + k, h, w], ACCUM), T.float32(0)
                        )
                    else:
                        A_l[i, k] = T.if_then_else(
                            inside, T.cast(X[m // (P * Q), h, w, co * bK + k], ACCUM), T.float32(0)
                        )
                for k, j in T.grid(bK, bN):
                    kept = (bx * bN + j < K) and (co * bK + k < Cin)
                    if nchw:
                        B_l[k, j] = T.if_then_else(
                            kept, T.cast(Wt[bx * bN + j, co * bK + k, r, s], ACCUM), T.float32(0)
                        )
                    else:
                        B_l[k, j] = T.if_then_else(
                            kept, T.cast(Wt[bx * bN + j, r, s, co * bK + k], ACCUM), T.float32(0)
                        )
                for i, k in T.grid(bM, bK):
                    for j in T.serial(bN):
                        C_l[i, j] += A_l[i, k] * B_l[k, j]
            # The epilogue: the folded batch norm (and the ReLU) on the fp32 sum.
            for i, j in T.grid(bM, bN):
                m = by * bM + i
                n = bx * bN + j
                if (m < M) and (n < K):
                    v = C_l[i, j] * Scale[n] + Shift[n]
                    if residual:
                        if nchw:
                            v = v + T.cast(Rs[m // (P * Q), n, (m % (P * Q)) // Q, m % Q], ACCUM)
                        else:
                            v = v + T.cast(Rs[m // (P * Q), (m % (P * Q)) // Q, m % Q, n], ACCUM)
                    if relu:
                        v = T.max(v, T.float32(0))
                    if nchw:
                        Y[m // (P * Q), n, (m % (P * Q)) // Q, m % Q] = T.cast(v, dtype)
                    else:
                        Y[m // (P * Q), (m % (P * Q)) // Q, m % Q, n] = T.cast(v, dtype)

    if residual:

        @T.prim_func
        def conv_bn_add_cpu(
            X: T.Tensor(x_shape, dtype),
            Wt: T.Tensor(w_shape, dtype),
            Scale: T.Tensor((K,), ACCUM),
            Shift: T.Tensor((K,), ACCUM),
            Rs: T.Tensor(y_shape, dtype),
            Y: T.Tensor(y_shape, dtype),
        ):
            body(X, Wt, Scale, Shift, Rs, Y)

        return conv_bn_add_cpu

    @T.prim_func
    def conv_bn_cpu(
        X: T.Tensor(x_shape, dtype),
        Wt: T.Tensor(w_shape, dtype),
        Scale: T.Tensor((K,), ACCUM),
        Shift: T.Tensor((K,), ACCUM),
        Y: T.Tensor(y_shape, dtype),
    ):
        body(X, Wt, Scale, Shift, None, Y)

    return conv_bn_cpu


def tc_program(shape: Shape | Geometry, dtype: str, cfg: dict[str, Any], relu: bool, residual: bool = False):
    """channels_last: conv2d's `tc_program` (rows = output pixels, columns = output
    channels), the epilogue applied per column between the fragment and the shared tile."""
    import tilelang.language as T

    g = geometry(shape)
    N, H, W, Cin, K, R, S, sh, sw, ph, pw = g[:11]
    P, Q = g.P, g.Q
    M, RSC = N * P * Q, R * S * Cin
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    stages, threads, swizzle, flat_k = cfg["num_stages"], cfg["threads"], cfg["swizzle"], cfg["flat_k"]
    c_chunks = C.ceildiv(Cin, bK)
    c_tail = Cin % bK != 0
    k_iters = C.ceildiv(RSC, bK) if flat_k else R * S * c_chunks

    @T.macro
    def body(X, Wt, Scale, Shift, Rs, Y):
        with T.Kernel(T.ceildiv(K, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bM, bK), dtype)
            B_s = T.alloc_shared((bN, bK), dtype)
            C_f = T.alloc_fragment((bM, bN), ACCUM)
            C_s = T.alloc_shared((bM, bN), dtype)
            W2 = T.reshape(Wt, (K, RSC))
            Y2 = T.reshape(Y, (M, K))
            T.use_swizzle(panel_size=10, enable=swizzle)
            T.clear(C_f)
            for ko in T.Pipelined(k_iters, num_stages=stages):
                if flat_k:
                    for i, j in T.Parallel(bM, bK):
                        m = by * bM + i
                        kk = ko * bK + j
                        h = (m % (P * Q)) // Q * sh - ph + kk // (S * Cin)
                        w = m % Q * sw - pw + kk // Cin % S
                        A_s[i, j] = T.if_then_else(
                            (m < M) and (kk < RSC) and (h >= 0) and (h < H) and (w >= 0) and (w < W),
                            X[m // (P * Q), h, w, kk % Cin],
                            T.cast(0, dtype),
                        )
                    T.copy(W2[bx * bN, ko * bK], B_s)
                else:
                    r = ko // (S * c_chunks)
                    s = ko // c_chunks % S
                    c0 = ko % c_chunks * bK
                    for i, j in T.Parallel(bM, bK):
                        m = by * bM + i
                        h = (m % (P * Q)) // Q * sh - ph + r
                        w = m % Q * sw - pw + s
                        if c_tail:
                            A_s[i, j] = T.if_then_else(
                                (m < M) and (h >= 0) and (h < H) and (w >= 0) and (w < W) and (c0 + j < Cin),
                                X[m // (P * Q), h, w, c0 + j],
                                T.cast(0, dtype),
                            )
                        else:
                            A_s[i, j] = T.if_then_else(
                                (m < M) and (h >= 0) and (h < H) and (w >= 0) and (w < W),
                                X[m // (P * Q), h, w, c0 + j],
                                T.cast(0, dtype),
                            )
                    if c_tail:
                        for n, j in T.Parallel(bN, bK):
                            B_s[n, j] = T.if_then_else(
                                (bx * bN + n < K) and (c0 + j < Cin), Wt[bx * bN + n, r, s, c0 + j], T.cast(0, dtype)
                            )
                    else:
                        T.copy(W2[bx * bN, (r * S + s) * Cin + c0], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=True)
            # Columns past K read channel K-1's factors (rows past M the last pixel's
            # residual); the bounded store drops them.
            for i, j in T.Parallel(bM, bN):
                n = T.min(bx * bN + j, K - 1)
                v = C_f[i, j] * Scale[n] + Shift[n]
                if residual:
                    v = v + T.cast(T.reshape(Rs, (M, K))[T.min(by * bM + i, M - 1), n], ACCUM)
                if relu:
                    v = T.max(v, T.float32(0))
                C_s[i, j] = T.cast(v, dtype)
            T.copy(C_s, Y2[by * bM, bx * bN])

    if residual:

        @T.prim_func
        def conv_bn_add_tc(
            X: T.Tensor((N, H, W, Cin), dtype),
            Wt: T.Tensor((K, R, S, Cin), dtype),
            Scale: T.Tensor((K,), ACCUM),
            Shift: T.Tensor((K,), ACCUM),
            Rs: T.Tensor((N, P, Q, K), dtype),
            Y: T.Tensor((N, P, Q, K), dtype),
        ):
            body(X, Wt, Scale, Shift, Rs, Y)

        return conv_bn_add_tc

    @T.prim_func
    def conv_bn_tc(
        X: T.Tensor((N, H, W, Cin), dtype),
        Wt: T.Tensor((K, R, S, Cin), dtype),
        Scale: T.Tensor((K,), ACCUM),
        Shift: T.Tensor((K,), ACCUM),
        Y: T.Tensor((N, P, Q, K), dtype),
    ):
        body(X, Wt, Scale, Shift, None, Y)

    return conv_bn_tc


def nchw_tc_program(shape: Shape | Geometry, dtype: str, cfg: dict[str, Any], relu: bool, residual: bool = False):
    """NCHW: conv2d's `nchw_tc_program` (per image, rows = output channels, columns =
    output pixels), the epilogue applied per row."""
    import tilelang.language as T

    g = geometry(shape)
    N, H, W, Cin, K, R, S, sh, sw, ph, pw = g[:11]
    P, Q = g.P, g.Q
    PQ, CRS = P * Q, Cin * R * S
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    stages, threads, swizzle = cfg["num_stages"], cfg["threads"], cfg["swizzle"]
    direct = R == 1 and S == 1 and sh == sw == 1 and ph == pw == 0

    @T.macro
    def body(X, Wt, Scale, Shift, Rs, Y):
        with T.Kernel(T.ceildiv(PQ, bN), T.ceildiv(K, bM), N, threads=threads) as (bx, by, bz):
            A_s = T.alloc_shared((bM, bK), dtype)
            B_s = T.alloc_shared((bK, bN), dtype)
            C_f = T.alloc_fragment((bM, bN), ACCUM)
            C_s = T.alloc_shared((bM, bN), dtype)
            W2 = T.reshape(Wt, (K, CRS))
            X3 = T.reshape(X, (N, Cin, H * W))
            Y3 = T.reshape(Y, (N, K, PQ))
            T.use_swizzle(panel_size=10, enable=swizzle)
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(CRS, bK), num_stages=stages):
                T.copy(W2[by * bM, ko * bK], A_s)
                if direct:
                    T.copy(X3[bz, ko * bK, bx * bN], B_s)
                else:
                    for k, j in T.Parallel(bK, bN):
                        kk = ko * bK + k
                        pq = bx * bN + j
                        h = pq // Q * sh - ph + kk // S % R
                        w = pq % Q * sw - pw + kk % S
                        B_s[k, j] = T.if_then_else(
                            (kk < CRS) and (pq < PQ) and (h >= 0) and (h < H) and (w >= 0) and (w < W),
                            X[bz, kk // (R * S), h, w],
                            T.cast(0, dtype),
                        )
                T.gemm(A_s, B_s, C_f)
            # Rows past K read channel K-1's factors (columns past P*Q the last pixel's
            # residual); the bounded store drops them.
            for i, j in T.Parallel(bM, bN):
                k = T.min(by * bM + i, K - 1)
                v = C_f[i, j] * Scale[k] + Shift[k]
                if residual:
                    v = v + T.cast(T.reshape(Rs, (N, K, PQ))[bz, k, T.min(bx * bN + j, PQ - 1)], ACCUM)
                if relu:
                    v = T.max(v, T.float32(0))
                C_s[i, j] = T.cast(v, dtype)
            T.copy(C_s, Y3[bz, by * bM, bx * bN])

    if residual:

        @T.prim_func
        def conv_bn_add_nchw(
            X: T.Tensor((N, Cin, H, W), dtype),
            Wt: T.Tensor((K, Cin, R, S), dtype),
            Scale: T.Tensor((K,), ACCUM),
            Shift: T.Tensor((K,), ACCUM),
            Rs: T.Tensor((N, K, P, Q), dtype),
            Y: T.Tensor((N, K, P, Q), dtype),
        ):
            body(X, Wt, Scale, Shift, Rs, Y)

        return conv_bn_add_nchw

    @T.prim_func
    def conv_bn_nchw(
        X: T.Tensor((N, Cin, H, W), dtype),
        Wt: T.Tensor((K, Cin, R, S), dtype),
        Scale: T.Tensor((K,), ACCUM),
        Shift: T.Tensor((K,), ACCUM),
        Y: T.Tensor((N, K, P, Q), dtype),
    ):
        body(X, Wt, Scale, Shift, None, Y)

    return conv_bn_nchw
