"""The TileLang programs of the conv2d family (see conv2d.py for what they compute).

In: a `Geometry` (the convolution's sizes, one stride and one padding per spatial dim,
groups and layout; `geometry` reads it from a conv2d shape (N, H, W, C, K, R, S, stride,
pad, nchw[, groups]), and the conv1d family makes one with H = R = 1), a dtype and a full
config (the schedule's defaults filled in). Out: a TileLang PrimFunc computing the
convolution (groups = 1) as an implicit GEMM in the layout the model holds its tensors in:
- nchw = 0 (channels_last): NHWC x and KRSC weights, GEMM rows are output pixels
  (M = N*P*Q), columns output channels; the A tile is gathered along C.
- nchw = 1 (PyTorch's default layout): NCHW x and KCRS weights (nn.Conv2d's own), one
  GEMM per image with rows = output channels and columns = output pixels, so the
  weights are a plain (K, C*R*S) matrix and the output tile lands in NCHW directly: no
  transpose on either side. A 1x1, stride-1 convolution is then a plain GEMM over the
  image's (C, H*W) slab; its `stream` schedule keeps one weight tile in shared memory
  and streams pixel tiles through a fixed grid of blocks.
On CPU a loop nest over fp32 local tiles, on CUDA shared-memory tiles into tensor-core
`T.gemm`. Grouped and depthwise programs are in `kernels/conv2d/grouped.py`. Checking configs
and compiling are the family's (conv2d.py, base.py); nothing here runs a kernel.

The CPU, channels_last and NCHW programs take an optional `Epilogue`: a fused family's
work on the fp32 accumulator before the store (conv_bn's folded batch norm) and the
kernel signature with its further inputs, so a fused family runs these main loops
rather than its own.
"""

# No `from __future__ import annotations`: TileLang resolves the prim_func's tensor
# annotations from the closure, and names used only there (N, H, ...) are not in it.

from typing import Any, Callable, NamedTuple

from ...results import Shape
from .. import common as C
from ..gemm.prim import renamed

ACCUM = "float32"


class Geometry(NamedTuple):
    """One 2-D convolution as the programs compute it: x [N, C, H, W] (nchw) or
    [N, H, W, C], weight [K, C/G, R, S] or [K, R, S, C/G], stride (sh, sw), zero padding
    (ph, pw) on both sides of each dim, G groups, dilation 1."""

    N: int
    H: int
    W: int
    C: int
    K: int
    R: int
    S: int
    sh: int
    sw: int
    ph: int
    pw: int
    G: int
    nchw: bool

    @property
    def P(self) -> int:
        return (self.H + 2 * self.ph - self.R) // self.sh + 1

    @property
    def Q(self) -> int:
        return (self.W + 2 * self.pw - self.S) // self.sw + 1

    @property
    def Cg(self) -> int:
        return self.C // self.G

    @property
    def Kg(self) -> int:
        return self.K // self.G


def geometry(shape: Shape | Geometry) -> Geometry:
    """A conv2d shape (N, H, W, C, K, R, S, stride, pad[, nchw[, groups]]) as a Geometry
    (a Geometry passes through)."""
    if isinstance(shape, Geometry):
        return shape
    N, H, W, Cin, K, R, S, stride, pad = (int(v) for v in shape[:9])
    nchw = len(shape) > 9 and bool(shape[9])
    G = int(shape[10]) if len(shape) > 10 else 1
    return Geometry(N, H, W, Cin, K, R, S, stride, stride, pad, pad, G, nchw)


def out_size(shape: Shape | Geometry) -> tuple[int, int]:
    """(P, Q): the output height and width."""
    g = geometry(shape)
    return g.P, g.Q


def is_nchw(shape: Shape | Geometry) -> bool:
    return geometry(shape).nchw


def tensor_shapes(shape: Shape | Geometry) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(x, weight, y) shapes in the layout the shape names."""
    g = geometry(shape)
    if g.nchw:
        return (g.N, g.C, g.H, g.W), (g.K, g.Cg, g.R, g.S), (g.N, g.K, g.P, g.Q)
    return (g.N, g.H, g.W, g.C), (g.K, g.R, g.S, g.Cg), (g.N, g.P, g.Q, g.K)


class Epilogue(NamedTuple):
    """A fused family's part of a convolution program. `value(T, acc, channel, output)`:
    the fp32 value one output element stores, from `acc` its fp32 sum, `channel` the
    elements of the per-output-channel inputs at its channel and `output` those of the
    output-shaped inputs (the output's layout) at its position. `kernel(T, body, x, w, y,
    schedule)`: the PrimFunc of x, w and y's shapes around the main loop `body(X, Wt,
    channel_inputs, output_inputs, Y)` (two tuples of its further tensors), under a kernel
    name ending in `schedule` ("cpu", "tc", "nchw")."""

    value: Callable[..., Any]
    kernel: Callable[..., Any]


def plain_kernel(dtype: str) -> Callable[..., Any]:
    """conv2d's own `Epilogue.kernel`: (X, Wt) -> Y, no further inputs."""

    def kernel(T: Any, body: Any, x_shape: tuple, w_shape: tuple, y_shape: tuple, schedule: str) -> Any:
        @T.prim_func
        def conv2d(
            X: T.Tensor(x_shape, dtype),
            Wt: T.Tensor(w_shape, dtype),
            Y: T.Tensor(y_shape, dtype),
        ):
            body(X, Wt, (), (), Y)

        return renamed(conv2d, "conv2d_" + schedule)

    return kernel


def stored(
    T: Any, epilogue: Epilogue | None, acc: Any, inputs: tuple, k: Any, at: tuple, view: Any = None, staged: Any = None
) -> Any:
    """The fp32 value an output element stores: its sum `acc`, or the epilogue's value of
    it. `inputs`: (per-channel, output-shaped) tensors; `k`: the element's output channel;
    `at`: its index in the output, or in `view(t)` of each output-shaped tensor t;
    `staged`: the one output-shaped input's element, already in shared memory (`r_shared`)."""
    if epilogue is None:
        return acc
    channel, output = inputs
    load = (lambda t: t[at]) if view is None else (lambda t: view(t)[at])
    values = [staged] if staged is not None else [load(t) for t in output]
    return epilogue.value(T, acc, [t[k] for t in channel], values)


def cpu_program(shape: Shape | Geometry, dtype: str, cfg: dict[str, Any], epilogue: Epilogue | None = None):
    import tilelang.cpu.language as T

    g = geometry(shape)
    N, H, W, Cin, K, R, S, sh, sw, ph, pw = g[:11]
    nchw = g.nchw
    x_shape, w_shape, y_shape = tensor_shapes(g)
    P, Q = g.P, g.Q
    M = N * P * Q
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    c_chunks = C.ceildiv(Cin, bK)

    def out_at(m, n):
        """Output pixel m's channel n in the output's layout."""
        if nchw:
            return m // (P * Q), n, (m % (P * Q)) // Q, m % Q
        return m // (P * Q), (m % (P * Q)) // Q, m % Q, n

    # One loop nest for both layouts: only the three tensors' index order differs (the
    # `if nchw` branches are resolved when the program is built).
    @T.macro
    def body(X, Wt, Ch, Out, Y):
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
                # Transposed on the way in so the inner loop streams rows of both tiles.
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
                # i-k-j order: the j loop is unit-stride in C_l and B_l, which gcc
                # auto-vectorizes with -O3 -march=native.
                for i, k in T.grid(bM, bK):
                    for j in T.serial(bN):
                        C_l[i, j] += A_l[i, k] * B_l[k, j]
            for i, j in T.grid(bM, bN):
                m = by * bM + i
                n = bx * bN + j
                if (m < M) and (n < K):
                    Y[out_at(m, n)] = T.cast(stored(T, epilogue, C_l[i, j], (Ch, Out), n, out_at(m, n)), dtype)

    kernel = plain_kernel(dtype) if epilogue is None else epilogue.kernel
    return kernel(T, body, x_shape, w_shape, y_shape, "cpu")


def tc_program(shape: Shape | Geometry, dtype: str, cfg: dict[str, Any], epilogue: Epilogue | None = None):
    """channels_last: rows = output pixels, columns = output channels; an epilogue is
    applied per element between the fragment and the shared tile."""
    import tilelang.language as T

    g = geometry(shape)
    N, H, W, Cin, K, R, S, sh, sw, ph, pw = g[:11]
    P, Q = g.P, g.Q
    M, RSC = N * P * Q, R * S * Cin
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    stages, threads, swizzle, flat_k = cfg["num_stages"], cfg["threads"], cfg["swizzle"], cfg["flat_k"]
    # An output-shaped epilogue input (conv_bn_add_relu's residual) read as a tile copy
    # instead of per element in the fragment's layout (scattered 4-byte loads).
    staged = bool(cfg.get("r_shared"))
    # The pixel tile by one tile copy (config a_copy; conv2d.copy_problem says when it
    # applies): a 1x1, stride-1, unpadded convolution's is rows of X (M, C), a square
    # filter's TileLang's im2col over NHWC.
    copied = bool(cfg.get("a_copy"))
    rows = copied and copies_rows(g)
    c_chunks = C.ceildiv(Cin, bK)
    # Chunks that would straddle two (r, s) taps need the channel mask on both operands.
    c_tail = Cin % bK != 0
    k_iters = C.ceildiv(RSC, bK) if flat_k else R * S * c_chunks

    def as_mk(t):
        """An output-shaped (N, P, Q, K) tensor as the GEMM's (M, K) matrix."""
        return T.reshape(t, (M, K))

    @T.macro
    def body(X, Wt, Ch, Out, Y):
        with T.Kernel(T.ceildiv(K, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bM, bK), dtype)
            B_s = T.alloc_shared((bN, bK), dtype)
            C_f = T.alloc_fragment((bM, bN), ACCUM)
            C_s = T.alloc_shared((bM, bN), dtype)
            # KRSC is a plain (K, R*S*C) row-major matrix and NPQK a (M, K) one.
            W2 = T.reshape(Wt, (K, RSC))
            Y2 = T.reshape(Y, (M, K))
            X2 = T.reshape(X, (M, Cin)) if rows else None  # NPQC, with P, Q = H, W
            # Panel rasterization keeps neighbouring blocks on the same weight panel in L2.
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
                elif rows:
                    T.copy(X2[by * bM, ko * bK], A_s)
                    T.copy(W2[bx * bN, ko * bK], B_s)
                elif copied:
                    # k-step ko is tap ko // c_chunks, channels ko % c_chunks * bK on: the
                    # same (r, s, c) order as the KRSC weight's flattened columns.
                    T.im2col(X, A_s, by, ko, R, sh, 1, ph)
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
                            # The predicate is uniform along a row, so the row loads vectorize.
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
            if epilogue is None:
                T.copy(C_f, C_s)
            elif staged and len(Out) == 1:
                # The residual's tile comes in as one bounded tile copy into the output's
                # shared tile, and each element is read back by the thread that writes it.
                T.copy(as_mk(Out[0])[by * bM, bx * bN], C_s)
                for i, j in T.Parallel(bM, bN):
                    n = T.min(bx * bN + j, K - 1)
                    C_s[i, j] = T.cast(stored(T, epilogue, C_f[i, j], (Ch, Out), n, (), staged=C_s[i, j]), dtype)
            else:
                # Columns past K read channel K-1's inputs (rows past M the last pixel's);
                # the bounded store drops them.
                for i, j in T.Parallel(bM, bN):
                    n = T.min(bx * bN + j, K - 1)
                    at = (T.min(by * bM + i, M - 1), n)
                    C_s[i, j] = T.cast(stored(T, epilogue, C_f[i, j], (Ch, Out), n, at, as_mk), dtype)
            T.copy(C_s, Y2[by * bM, bx * bN])

    kernel = plain_kernel(dtype) if epilogue is None else epilogue.kernel
    return kernel(T, body, (N, H, W, Cin), (K, R, S, Cin), (N, P, Q, K), "tc")


def nchw_tc_program(shape: Shape | Geometry, dtype: str, cfg: dict[str, Any], epilogue: Epilogue | None = None):
    """NCHW x, KCRS weights, NCHW y: per image, Y[K, P*Q] = W[K, C*R*S] @ X_col[C*R*S, P*Q],
    the grid's z axis over images so a pixel tile never straddles two of them; an
    epilogue is applied per element between the fragment and the shared tile."""
    import tilelang.language as T

    g = geometry(shape)
    N, H, W, Cin, K, R, S, sh, sw, ph, pw = g[:11]
    P, Q = g.P, g.Q
    PQ, CRS = P * Q, Cin * R * S
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    stages, threads, swizzle = cfg["num_stages"], cfg["threads"], cfg["swizzle"]
    staged = bool(cfg.get("r_shared"))  # as tc_program's
    # A 1x1, stride-1, unpadded convolution reads X_col straight from the image: its
    # rows are the channels' (H*W) planes, copied as tiles (vector loads, no index math).
    direct = R == 1 and S == 1 and sh == sw == 1 and ph == pw == 0

    def as_nkpq(t):
        """An output-shaped (N, K, P, Q) tensor as one (K, P*Q) matrix per image."""
        return T.reshape(t, (N, K, PQ))

    @T.macro
    def body(X, Wt, Ch, Out, Y):
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
                # Bounds-checked copies: rows past K and columns past C*R*S read as zeros.
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
            if epilogue is None:
                T.copy(C_f, C_s)
            elif staged and len(Out) == 1:
                # As tc_program's: the residual tile staged through the output's shared tile.
                T.copy(as_nkpq(Out[0])[bz, by * bM, bx * bN], C_s)
                for i, j in T.Parallel(bM, bN):
                    k = T.min(by * bM + i, K - 1)
                    C_s[i, j] = T.cast(stored(T, epilogue, C_f[i, j], (Ch, Out), k, (), staged=C_s[i, j]), dtype)
            else:
                # Rows past K read channel K-1's inputs (columns past P*Q the last
                # pixel's); the bounded store drops them.
                for i, j in T.Parallel(bM, bN):
                    k = T.min(by * bM + i, K - 1)
                    at = (bz, k, T.min(bx * bN + j, PQ - 1))
                    C_s[i, j] = T.cast(stored(T, epilogue, C_f[i, j], (Ch, Out), k, at, as_nkpq), dtype)
            T.copy(C_s, Y3[bz, by * bM, bx * bN])

    kernel = plain_kernel(dtype) if epilogue is None else epilogue.kernel
    return kernel(T, body, (N, Cin, H, W), (K, Cin, R, S), (N, K, P, Q), "nchw")


# The stream schedule holds a whole (C, block_N) pixel tile per pipeline stage: C is
# bounded so that two or more stages fit in shared memory next to the weight tile.
STREAM_MAX_C = 128


def copies_rows(shape: Shape | Geometry) -> bool:
    """Whether an a_copy pixel tile is plain rows of X (a 1x1, stride 1, no padding)."""
    g = geometry(shape)
    return (g.R, g.S, g.sh, g.sw, g.ph, g.pw) == (1, 1, 1, 1, 0, 0)


def stream_problem(shape: Shape | Geometry) -> str | None:
    """Why the stream schedule cannot take `shape`, or None."""
    g = geometry(shape)
    if not g.nchw or not (g.R == g.S == g.sh == g.sw == 1 and g.ph == g.pw == 0) or g.G != 1:
        return "stream is for 1x1, stride-1, unpadded, ungrouped NCHW convolutions (a plain GEMM per image)"
    if g.C > STREAM_MAX_C:
        return f"stream keeps all C input channels in one tile: C must be at most {STREAM_MAX_C}, got {g.C}"
    return None


def stream_channels(Cin: int) -> int:
    """C rounded up to the tensor cores' 16-deep reduction step (the extra rows read as zeros)."""
    return C.round_up(Cin, 16)


def nchw_stream_program(shape: Shape | Geometry, dtype: str, cfg: dict[str, Any]):
    """1x1 stride-1 NCHW as a stream of pixel tiles: Y[n][K, HW] = W[K, C] @ X[n][C, HW].
    With C <= 128 the reduction is one or two MMA steps, so the tiled GEMM spends its
    time in the prologue and epilogue of each short K loop (2.0 TB/s against cuDNN's 3.1
    on the H200). Here a fixed grid of `stream` blocks per output-channel tile each load
    their W tile [block_M, C] once and walk the (image, pixel tile) pairs t = bx,
    bx + stream, ...; the walk is the pipelined loop, so the next X tile loads (TMA,
    a producer warpgroup) while the current one's MMA and store run."""
    import tilelang.language as T

    N, H, W, Cin, K = geometry(shape)[:5]
    HW = H * W
    bM, bN = cfg["block_M"], cfg["block_N"]
    stages, threads, blocks = cfg["num_stages"], cfg["threads"], cfg["stream"]
    Cp = stream_channels(Cin)
    per_image = C.ceildiv(HW, bN)
    tiles = N * per_image
    steps = C.ceildiv(tiles, blocks)

    @T.prim_func
    def conv2d_nchw_stream(
        X: T.Tensor((N, Cin, H, W), dtype),
        Wt: T.Tensor((K, Cin, 1, 1), dtype),
        Y: T.Tensor((N, K, H, W), dtype),
    ):
        with T.Kernel(blocks, T.ceildiv(K, bM), threads=threads) as (bx, by):
            W_s = T.alloc_shared((bM, Cp), dtype)
            X_s = T.alloc_shared((Cp, bN), dtype)
            C_f = T.alloc_fragment((bM, bN), ACCUM)
            C_s = T.alloc_shared((bM, bN), dtype)
            W2 = T.reshape(Wt, (K, Cin))
            X3 = T.reshape(X, (N, Cin, HW))
            Y3 = T.reshape(Y, (N, K, HW))
            # Bounds-checked: rows past K and channels past C read as zeros.
            T.copy(W2[by * bM, 0], W_s)
            for i in T.Pipelined(steps, num_stages=stages):
                # The last step's blocks past the end redo the last tile: the same values
                # written twice, cheaper than a branch in the pipelined loop.
                t = T.min(bx + i * blocks, tiles - 1)
                # The 3-D view bounds the copy per image: a pixel tile's tail and the
                # channels past C read as zeros, never the next image or channel.
                T.copy(X3[t // per_image, 0, t % per_image * bN], X_s)
                T.gemm(W_s, X_s, C_f, clear_accum=True)
                # Through shared memory: one TMA store of the tile (a store straight from
                # the fragment lowered to 4-byte scattered writes).
                T.copy(C_f, C_s)
                T.copy(C_s, Y3[t // per_image, by * bM, t % per_image * bN])

    return conv2d_nchw_stream
