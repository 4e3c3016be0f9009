"""The conv2d family's grouped and depthwise programs (groups > 1; see conv2d.py).

In: a `Geometry` with G > 1 groups (C/G input and K/G output channels a group), a dtype
and a full config. Out: a TileLang PrimFunc, in the layout the model holds its tensors in:
- `direct_program` (CUDA), one input channel a group (depthwise, groups == C, K a
  multiple of C): memory-bound, so no GEMM. Each block takes a tile of output pixels
  (block_H x block_W) by block_C channels of one image, loads the input tile it reads
  (with the filter's halo, zero padding and tails masked on the way in) and the taps of
  its channels into shared memory once, and each thread accumulates its outputs in fp32
  registers over the R x S taps, unrolled. NCHW tiles are channel planes (rows of pixels
  contiguous): a thread takes `vec` neighbours along a row, so the taps they share are
  read from shared memory once and the row is stored as one vector; NHWC tiles put the
  channels innermost, so loads and stores are vectors along C.
- `grouped_tc_program` (CUDA), channels_last: an implicit GEMM per group, the grid's z
  axis over groups: M = N*P*Q pixels x the group's K/G output channels over R*S*C/G,
  tensor-core `T.gemm` as conv2d's channels_last kernel, with the weight tile and the
  output store masked at the group's edge (a tile never writes a neighbour's channels).
  An NCHW grouped call runs it between two layout transposes (conv2d's via_nhwc).
- `cpu_program` (the C backend), both layouts: depthwise as a direct loop nest over a
  tile of output pixels x channels, other groupings as conv2d's CPU implicit GEMM per group.
Sizing and checking configs: `direct_smem`, `direct_per_thread`, `direct_problem`,
`direct_space`. Nothing here runs a kernel.
"""

# No `from __future__ import annotations`: TileLang resolves the prim_func's tensor
# annotations from the closure.

from typing import Any

from .. import common as C
from .programs import ACCUM, Geometry, tensor_shapes

# fp32 accumulators a thread may hold (block_C * block_H * block_W / threads): beyond
# this the unrolled taps spill registers.
DIRECT_MAX_PER_THREAD = 32


def halo(g: Geometry, cfg: dict[str, Any]) -> tuple[int, int]:
    """(rows, cols) of the input tile a block_H x block_W output tile reads."""
    return (cfg["block_H"] - 1) * g.sh + g.R, (cfg["block_W"] - 1) * g.sw + g.S


def direct_smem(g: Geometry, cfg: dict[str, Any], dtype: str) -> int:
    th, tw = halo(g, cfg)
    return (cfg["block_C"] * th * tw + cfg["block_C"] * g.R * g.S) * C.dtype_bytes(dtype)


def direct_per_thread(cfg: dict[str, Any]) -> int:
    return C.ceildiv(cfg["block_C"] * cfg["block_H"] * cfg["block_W"], cfg["threads"])


def direct_problem(g: Geometry, cfg: dict[str, Any]) -> str | None:
    """Why the direct schedule cannot take (g, cfg) on any GPU, or None."""
    if g.Cg != 1:
        return (
            f"direct takes one input channel a group (depthwise); this convolution has {g.Cg} "
            "(an implicit GEMM per group takes it)"
        )
    if min(cfg["block_C"], cfg["block_H"], cfg["block_W"], cfg["vec"]) <= 0:
        return "block_C, block_H, block_W and vec must be positive"
    if cfg["block_W"] % cfg["vec"]:
        return f"block_W ({cfg['block_W']}) must be a multiple of vec ({cfg['vec']})"
    if cfg["vec"] > 1 and not g.nchw:
        return "vec (neighbours along a row a thread) is the NCHW tile's; channels_last vectors run along C"
    if cfg["threads"] % 32 or not 32 <= cfg["threads"] <= 1024:
        return f"threads must be a multiple of 32 in 32..1024, got {cfg['threads']}"
    if direct_per_thread(cfg) > DIRECT_MAX_PER_THREAD:
        return f"{direct_per_thread(cfg)} outputs a thread would spill registers (at most {DIRECT_MAX_PER_THREAD})"
    return None


def direct_space(g: Geometry) -> list[dict[str, Any]]:
    """Direct tiles, best guess first (not yet timed on a GPU: ordered by the work a
    thread gets, 4-16 outputs, and the padding a tile wastes at this image size)."""
    P, Q, K = g.P, g.Q, g.K
    out = []
    if g.nchw:
        # Rows of pixels are contiguous: a tile as wide as the row (up to 64), then as tall
        # as gives a few hundred pixels a channel plane, then channels to fill the block;
        # 4 neighbours a thread (2 on rows of 8 or fewer), then one (scalar taps).
        bW = min(64, max(8, C.next_pow2(Q)))
        for v, n in ((min(4, bW // 4), 5), (1, 3)):
            mine = []
            for bH0, threads in ((256 // bW, 128), (512 // bW, 256), (128 // bW, 128), (1024 // bW, 256)):
                bH = max(1, min(bH0, C.next_pow2(P)))
                for per_thread in (8, 16, 4):
                    bC = max(1, min(C.next_pow2(K), per_thread * threads // (bH * bW)))
                    mine.append({"block_C": bC, "block_H": bH, "block_W": bW, "threads": threads, "vec": v})
            out += [c for c in C.dedupe(mine) if direct_problem(g, c) is None][:n]
    else:
        # Channels innermost: 8 fp16 channels a thread is one 16-byte vector.
        bC = min(64, max(8, C.next_pow2(K)))
        for bH, bW, threads in (
            (4, 8, 128),
            (2, 8, 128),
            (4, 4, 128),
            (8, 8, 256),
            (4, 16, 256),
            (2, 4, 64),
            (1, 8, 64),
        ):
            out.append(
                {
                    "block_C": bC,
                    "block_H": max(1, min(bH, C.next_pow2(P))),
                    "block_W": max(1, min(bW, C.next_pow2(Q))),
                    "threads": threads,
                    "vec": 1,
                }
            )
        if K >= 128:
            out.insert(2, {"block_C": 128, "block_H": 2, "block_W": 4, "threads": 128, "vec": 1})
    out = [c for c in C.dedupe(out) if direct_problem(g, c) is None]
    return out[:8]


def direct_program(g: Geometry, dtype: str, cfg: dict[str, Any]):
    """Depthwise on CUDA: output channel k reads input channel k // (K/C)."""
    import tilelang.language as T

    N, H, W, _, K, R, S, sh, sw, ph, pw = g[:11]
    P, Q, Kg = g.P, g.Q, g.Kg
    bC, bH, bW, threads, V = cfg["block_C"], cfg["block_H"], cfg["block_W"], cfg["threads"], cfg["vec"]
    TH, TW = halo(g, cfg)
    tiles_q = C.ceildiv(Q, bW)
    tiles = C.ceildiv(P, bH) * tiles_q
    x_shape, w_shape, y_shape = tensor_shapes(g)
    # Output channels that are not a whole number of tiles need a channel mask; without
    # one the predicate is uniform along C and NHWC rows load as vectors.
    c_tail = K % bC != 0

    if g.nchw:

        @T.prim_func
        def conv2d_depthwise_nchw(
            X: T.Tensor(x_shape, dtype),
            Wt: T.Tensor(w_shape, dtype),
            Y: T.Tensor(y_shape, dtype),
        ):
            with T.Kernel(tiles, T.ceildiv(K, bC), N, threads=threads) as (bx, by, bz):
                X_s = T.alloc_shared((bC, TH, TW), dtype)
                W_s = T.alloc_shared((bC, R * S), dtype)
                acc = T.alloc_fragment((bC, bH, bW // V, V), ACCUM)
                p0 = bx // tiles_q * bH
                q0 = bx % tiles_q * bW
                for c, i, j in T.Parallel(bC, TH, TW):
                    h = p0 * sh - ph + i
                    w = q0 * sw - pw + j
                    X_s[c, i, j] = T.if_then_else(
                        (by * bC + c < K) and (h >= 0) and (h < H) and (w >= 0) and (w < W),
                        X[bz, (by * bC + c) // Kg, h, w],
                        T.cast(0, dtype),
                    )
                for c, t in T.Parallel(bC, R * S):
                    W_s[c, t] = T.if_then_else(by * bC + c < K, Wt[by * bC + c, 0, t // S, t % S], T.cast(0, dtype))
                T.clear(acc)
                for r in T.unroll(R):
                    for s in T.unroll(S):
                        # A thread's V neighbours (the serial v): the taps they share are
                        # one shared-memory read each once the loops are unrolled.
                        for c, i, jj in T.Parallel(bC, bH, bW // V):
                            for v in T.unroll(V):
                                acc[c, i, jj, v] += T.cast(X_s[c, i * sh + r, (jj * V + v) * sw + s], ACCUM) * T.cast(
                                    W_s[c, r * S + s], ACCUM
                                )
                for c, i, jj in T.Parallel(bC, bH, bW // V):
                    for v in T.unroll(V):
                        if (by * bC + c < K) and (p0 + i < P) and (q0 + jj * V + v < Q):
                            Y[bz, by * bC + c, p0 + i, q0 + jj * V + v] = T.cast(acc[c, i, jj, v], dtype)

        return conv2d_depthwise_nchw

    @T.prim_func
    def conv2d_depthwise_nhwc(
        X: T.Tensor(x_shape, dtype),
        Wt: T.Tensor(w_shape, dtype),
        Y: T.Tensor(y_shape, dtype),
    ):
        with T.Kernel(T.ceildiv(K, bC), tiles, N, threads=threads) as (bx, by, bz):
            X_s = T.alloc_shared((TH, TW, bC), dtype)
            W_s = T.alloc_shared((R * S, bC), dtype)
            acc = T.alloc_fragment((bH, bW, bC), ACCUM)
            p0 = by // tiles_q * bH
            q0 = by % tiles_q * bW
            # (pixel, channel) pairs: TileLang's loop layout of a 3-D (TH, TW, C) loop fails
            # for halo sizes no thread count divides ("mapped indices are not independent").
            for t, c in T.Parallel(TH * TW, bC):
                h = p0 * sh - ph + t // TW
                w = q0 * sw - pw + t % TW
                if c_tail:
                    X_s[t // TW, t % TW, c] = T.if_then_else(
                        (bx * bC + c < K) and (h >= 0) and (h < H) and (w >= 0) and (w < W),
                        X[bz, h, w, (bx * bC + c) // Kg],
                        T.cast(0, dtype),
                    )
                else:
                    X_s[t // TW, t % TW, c] = T.if_then_else(
                        (h >= 0) and (h < H) and (w >= 0) and (w < W),
                        X[bz, h, w, (bx * bC + c) // Kg],
                        T.cast(0, dtype),
                    )
            for t, c in T.Parallel(R * S, bC):
                W_s[t, c] = T.if_then_else(bx * bC + c < K, Wt[bx * bC + c, t // S, t % S, 0], T.cast(0, dtype))
            T.clear(acc)
            for r in T.unroll(R):
                for s in T.unroll(S):
                    for i, j, c in T.Parallel(bH, bW, bC):
                        acc[i, j, c] += T.cast(X_s[i * sh + r, j * sw + s, c], ACCUM) * T.cast(W_s[r * S + s, c], ACCUM)
            for i, j, c in T.Parallel(bH, bW, bC):
                if c_tail:
                    if (bx * bC + c < K) and (p0 + i < P) and (q0 + j < Q):
                        Y[bz, p0 + i, q0 + j, bx * bC + c] = T.cast(acc[i, j, c], dtype)
                else:
                    if (p0 + i < P) and (q0 + j < Q):
                        Y[bz, p0 + i, q0 + j, bx * bC + c] = T.cast(acc[i, j, c], dtype)

    return conv2d_depthwise_nhwc


def grouped_tc_program(g: Geometry, dtype: str, cfg: dict[str, Any]):
    """Channels_last, G groups: per group an implicit GEMM, Y[:, group's K/G] =
    X_col(group)[N*P*Q, R*S*C/G] @ W(group)[K/G, R*S*C/G]^T, on the grid's z axis."""
    import tilelang.language as T

    N, H, W, Cin, K, R, S, sh, sw, ph, pw = g[:11]
    P, Q, Cg, Kg, G = g.P, g.Q, g.Cg, g.Kg, g.G
    M, RSC = N * P * Q, R * S * Cg
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    stages, threads, swizzle, flat_k = cfg["num_stages"], cfg["threads"], cfg["swizzle"], cfg["flat_k"]
    c_chunks = C.ceildiv(Cg, bK)
    c_tail = Cg % bK != 0
    # Where output-channel tiles end at the group's edge, the weight tile and the store
    # are plain copies (TMA); otherwise a tile's last columns are masked there.
    whole = Kg % bN == 0
    k_iters = C.ceildiv(RSC, bK) if flat_k else R * S * c_chunks

    @T.prim_func
    def conv2d_grouped_tc(
        X: T.Tensor((N, H, W, Cin), dtype),
        Wt: T.Tensor((K, R, S, Cg), dtype),
        Y: T.Tensor((N, P, Q, K), dtype),
    ):
        with T.Kernel(T.ceildiv(Kg, bN), T.ceildiv(M, bM), G, threads=threads) as (bx, by, bz):
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
                        h = (m % (P * Q)) // Q * sh - ph + kk // (S * Cg)
                        w = m % Q * sw - pw + kk // Cg % S
                        A_s[i, j] = T.if_then_else(
                            (m < M) and (kk < RSC) and (h >= 0) and (h < H) and (w >= 0) and (w < W),
                            X[m // (P * Q), h, w, bz * Cg + kk % Cg],
                            T.cast(0, dtype),
                        )
                    for n, j in T.Parallel(bN, bK):
                        B_s[n, j] = T.if_then_else(
                            (bx * bN + n < Kg) and (ko * bK + j < RSC),
                            W2[bz * Kg + bx * bN + n, ko * bK + j],
                            T.cast(0, dtype),
                        )
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
                                (m < M) and (h >= 0) and (h < H) and (w >= 0) and (w < W) and (c0 + j < Cg),
                                X[m // (P * Q), h, w, bz * Cg + c0 + j],
                                T.cast(0, dtype),
                            )
                        else:
                            A_s[i, j] = T.if_then_else(
                                (m < M) and (h >= 0) and (h < H) and (w >= 0) and (w < W),
                                X[m // (P * Q), h, w, bz * Cg + c0 + j],
                                T.cast(0, dtype),
                            )
                    if c_tail or not whole:
                        for n, j in T.Parallel(bN, bK):
                            B_s[n, j] = T.if_then_else(
                                (bx * bN + n < Kg) and (c0 + j < Cg),
                                Wt[bz * Kg + bx * bN + n, r, s, c0 + j],
                                T.cast(0, dtype),
                            )
                    else:
                        T.copy(W2[bz * Kg + bx * bN, (r * S + s) * Cg + c0], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=True)
            T.copy(C_f, C_s)
            if whole:
                T.copy(C_s, Y2[by * bM, bz * Kg + bx * bN])
            else:
                for i, j in T.Parallel(bM, bN):
                    if (by * bM + i < M) and (bx * bN + j < Kg):
                        Y2[by * bM + i, bz * Kg + bx * bN + j] = C_s[i, j]

    return conv2d_grouped_tc


def cpu_program(g: Geometry, dtype: str, cfg: dict[str, Any]):
    """The C backend: depthwise as a direct loop nest, other groupings as an implicit
    GEMM per group."""
    return (cpu_depthwise_program if g.Cg == 1 else cpu_gemm_program)(g, dtype, cfg)


def cpu_depthwise_program(g: Geometry, dtype: str, cfg: dict[str, Any]):
    """One input channel a group, either layout: a block_M x block_N tile of (output pixel,
    output channel) pairs, its taps copied to fp32 once, the padding test hoisted out of
    the channel loop. NHWC walks the channels innermost (contiguous in x and y), NCHW the
    pixels (contiguous along a row)."""
    import tilelang.cpu.language as T

    N, H, W, _, K, R, S, sh, sw, ph, pw = g[:11]
    P, Q, Kg, nchw = g.P, g.Q, g.Kg, g.nchw
    M = N * P * Q
    bM, bN = cfg["block_M"], cfg["block_N"]
    x_shape, w_shape, y_shape = tensor_shapes(g)

    @T.prim_func
    def conv2d_depthwise_cpu(
        X: T.Tensor(x_shape, dtype),
        Wt: T.Tensor(w_shape, dtype),
        Y: T.Tensor(y_shape, dtype),
    ):
        with T.Kernel(T.ceildiv(K, bN), T.ceildiv(M, bM)) as (bx, by):
            acc = T.alloc_local((bM, bN), ACCUM)
            W_l = T.alloc_local((R * S, bN), ACCUM)
            for t, j in T.grid(R * S, bN):
                if nchw:
                    W_l[t, j] = T.if_then_else(
                        bx * bN + j < K, T.cast(Wt[bx * bN + j, 0, t // S, t % S], ACCUM), T.float32(0)
                    )
                else:
                    W_l[t, j] = T.if_then_else(
                        bx * bN + j < K, T.cast(Wt[bx * bN + j, t // S, t % S, 0], ACCUM), T.float32(0)
                    )
            T.clear(acc)
            if nchw:
                for j, r, s in T.grid(bN, R, S):
                    # Channels past K read the last one (their sums are never stored).
                    for i in T.serial(bM):
                        m = by * bM + i
                        h = (m % (P * Q)) // Q * sh - ph + r
                        w = m % Q * sw - pw + s
                        if (m < M) and (h >= 0) and (h < H) and (w >= 0) and (w < W):
                            acc[i, j] += (
                                T.cast(X[m // (P * Q), T.min(bx * bN + j, K - 1) // Kg, h, w], ACCUM)
                                * W_l[r * S + s, j]
                            )
            else:
                for i, r, s in T.grid(bM, R, S):
                    m = by * bM + i
                    h = (m % (P * Q)) // Q * sh - ph + r
                    w = m % Q * sw - pw + s
                    if (m < M) and (h >= 0) and (h < H) and (w >= 0) and (w < W):
                        for j in T.serial(bN):
                            acc[i, j] += (
                                T.cast(X[m // (P * Q), h, w, T.min(bx * bN + j, K - 1) // Kg], ACCUM)
                                * W_l[r * S + s, j]
                            )
            for i, j in T.grid(bM, bN):
                m = by * bM + i
                if (m < M) and (bx * bN + j < K):
                    if nchw:
                        Y[m // (P * Q), bx * bN + j, (m % (P * Q)) // Q, m % Q] = T.cast(acc[i, j], dtype)
                    else:
                        Y[m // (P * Q), (m % (P * Q)) // Q, m % Q, bx * bN + j] = T.cast(acc[i, j], dtype)

    return conv2d_depthwise_cpu


def cpu_gemm_program(g: Geometry, dtype: str, cfg: dict[str, Any]):
    """C/G > 1, either layout: conv2d's CPU implicit GEMM (fp32 local tiles, i-k-j order
    that gcc vectorizes) per group, the grid's x axis over (group, output-channel tile)."""
    import tilelang.cpu.language as T

    N, H, W, _, K, R, S, sh, sw, ph, pw = g[:11]
    P, Q, Cg, Kg, G, nchw = g.P, g.Q, g.Cg, g.Kg, g.G, g.nchw
    M = N * P * Q
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    tiles_n = C.ceildiv(Kg, bN)
    c_chunks = C.ceildiv(Cg, bK)
    x_shape, w_shape, y_shape = tensor_shapes(g)

    @T.prim_func
    def conv2d_grouped_cpu(
        X: T.Tensor(x_shape, dtype),
        Wt: T.Tensor(w_shape, dtype),
        Y: T.Tensor(y_shape, dtype),
    ):
        with T.Kernel(tiles_n * G, T.ceildiv(M, bM)) as (bx, by):
            A_l = T.alloc_local((bM, bK), ACCUM)
            B_l = T.alloc_local((bK, bN), ACCUM)
            C_l = T.alloc_local((bM, bN), ACCUM)
            grp = bx // tiles_n
            n0 = bx % tiles_n * bN
            T.clear(C_l)
            for r, s, co in T.grid(R, S, c_chunks):
                for i, k in T.grid(bM, bK):
                    m = by * bM + i
                    h = (m % (P * Q)) // Q * sh - ph + r
                    w = m % Q * sw - pw + s
                    inside = (m < M) and (h >= 0) and (h < H) and (w >= 0) and (w < W) and (co * bK + k < Cg)
                    if nchw:
                        A_l[i, k] = T.if_then_else(
                            inside, T.cast(X[m // (P * Q), grp * Cg + co * bK + k, h, w], ACCUM), T.float32(0)
                        )
                    else:
                        A_l[i, k] = T.if_then_else(
                            inside, T.cast(X[m // (P * Q), h, w, grp * Cg + co * bK + k], ACCUM), T.float32(0)
                        )
                for k, j in T.grid(bK, bN):
                    kept = (n0 + j < Kg) and (co * bK + k < Cg)
                    if nchw:
                        B_l[k, j] = T.if_then_else(
                            kept, T.cast(Wt[grp * Kg + n0 + j, co * bK + k, r, s], ACCUM), T.float32(0)
                        )
                    else:
                        B_l[k, j] = T.if_then_else(
                            kept, T.cast(Wt[grp * Kg + n0 + j, r, s, co * bK + k], ACCUM), T.float32(0)
                        )
                for i, k in T.grid(bM, bK):
                    for j in T.serial(bN):
                        C_l[i, j] += A_l[i, k] * B_l[k, j]
            for i, j in T.grid(bM, bN):
                m = by * bM + i
                if (m < M) and (n0 + j < Kg):
                    if nchw:
                        Y[m // (P * Q), grp * Kg + n0 + j, (m % (P * Q)) // Q, m % Q] = T.cast(C_l[i, j], dtype)
                    else:
                        Y[m // (P * Q), (m % (P * Q)) // Q, m % Q, grp * Kg + n0 + j] = T.cast(C_l[i, j], dtype)

    return conv2d_grouped_cpu
