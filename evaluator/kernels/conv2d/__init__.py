"""2-D convolution, no bias, in the memory layout the model holds its tensors in: an
implicit GEMM, and for depthwise layers a direct kernel.

In: shape (N, H, W, C, K, R, S, stride, pad, nchw[, groups]) — batch, input height and
width, input channels, output channels, filter height and width, one stride and one zero
padding for both spatial dims (dilation 1), the layout: nchw = 1 for PyTorch's default
contiguous tensors (x[N, C, H, W], weight[K, C/groups, R, S], as nn.Conv2d holds them),
nchw = 0 for channels_last ones (x[N, H, W, C], weight[K, R, S, C/groups]), and the
number of groups, left out where it is 1 (so an ungrouped shape is 10 ints, as it
always was). A 9-int shape (from before layouts were told apart) means channels_last.
Out: y in the input's layout and dtype, compared against `F.conv2d` on the same memory:
what cuDNN / oneDNN run for that model, layout conversions included, so a ratio
measured here is the one the model sees.
The GEMM views (groups = 1): channels_last, M = N*P*Q output pixels x K output channels
over R*S*C, the pixel tile gathered from x; NCHW, per image, K output channels x P*Q
pixels over C*R*S, the weights a plain matrix and the pixel tile gathered (or, for 1x1
stride-1, copied) from x, the output tile stored straight into NCHW. The A/B operand is
never materialised; padding and tails are masked. A channels_last 1x1 (stride 1, no
padding) is also one plain GEMM, x[N*H*W, C] @ w[K, C]^T, which `gemm` hands to the gemm
family. Groups > 1 (`conv2d/grouped`): depthwise (one input channel a group) runs
`direct`, a tile of output pixels x channels a block with the taps unrolled (memory-bound:
no GEMM to feed); other groupings an implicit GEMM per group, channels_last, an NCHW one
between two layout transposes (via_nhwc).
Schedules: on CUDA (fp16/bf16), shared-memory tiles, a pipelined K loop, tensor-core
`T.gemm` into an fp32 fragment and the output written back through shared memory
(direct: fp32 register accumulators on CUDA cores); on CPU (the C backend), loop nests
over fp32 local tiles that gcc vectorizes. The programs themselves are in
`kernels/conv2d/programs.py` and `kernels/conv2d/grouped.py`, the NCHW search space and the
via-channels_last kernel (with its TileLang layout changes) in `kernels/conv2d/layout.py`; this
module sizes, checks, searches and routes them, on a `Geometry` (per-dim stride and
padding) that the conv1d family (conv1d.py) also builds its calls on.

The stride and padding are not recoverable from the two tensors, so `make_inputs`
tags x with its problem shape and `reference` reads it back (see `reference`).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F

from ...device import arch as A
from ...errors import KernelError
from ...results import Hardware, KernelConfig, Shape
from ...routing.calls import DERIVED, arg, dtype_mismatch
from ...routing.router import Route
from .. import common as C
from ..gemm import FAMILY as GEMM
from ..gemm import checks as GK
from . import grouped as GR
from . import programs as P
from .layout import ViaChannelsLast, nchw_space
from .calls import channels_last, pair as _pair, string_padding as _string_padding, strides_are_channels_last
from .programs import Geometry, is_nchw, out_size  # noqa: F401  (out_size: the family's public helper)
from ..base import KernelFamily, Schedule

# Why a transposed convolution stays in PyTorch (conv2d and conv1d both say it).
TRANSPOSED = "transposed convolution: no kernel"

# The attribute make_inputs sets on x so that reference(x, w) knows stride and padding.
SHAPE_ATTR = "conv2d_shape"

# gemm (channels_last 1x1, stride 1, no padding): the convolution is y[N*H*W, K] =
# x[N*H*W, C] @ w[K, C]^T, run by the gemm family's program with this config's tile (see
# `gemm_config`): on CUDA its ping-pong schedule on `gemm` persistent blocks (one per SM),
# on CPU (any value > 0) its C program. 0: the implicit GEMM below. Channels_last 1x1s ran
# 0.63x cuDNN at 56x56 64->256 and 0.87x at 14x14 1024->256 on that (H200,
# reports/examples/kernels/h200-2026-12-01/kernel_sweep_views_conv2d_own.json), where the
# gemm family's ping-pong tiles overlap one tile's store with the next one's loads.
CPU_DEFAULTS = {"block_M": 64, "block_N": 32, "block_K": 32, "gemm": 0}
# flat_k: loop over the flattened R*S*C axis (index math per element, no wasted lanes
# when C is small or not a multiple of block_K, e.g. a 3-channel stem) instead of over
# (r, s, c-chunk) (cheap row-uniform padding tests, vector loads along C).
# The defaults are the search space's usual first pick (see _tc_space).
TC_DEFAULTS = {
    "block_M": 64,
    "block_N": 128,
    "block_K": 64,
    "num_stages": 4,
    "threads": 128,
    "swizzle": True,
    "flat_k": False,
    "gemm": 0,
    # a_copy: the pixel tile read by one tile copy instead of a per-element gather: a 1x1's
    # rows of X as a GEMM's A, a square filter's through im2col (`copy_problem`). On Hopper
    # both become TMA loads issued by the pipeline's producer warpgroup (the gather lowers
    # to cp.async with no warp specialization).
    "a_copy": False,
}
# NCHW: block_M tiles the output channels, block_N the output pixels of one image.
# via_nhwc: run the channels_last program instead (block_M then tiles pixels, block_N
# output channels, flat_k as there) between a TileLang transpose of x and one of y
# back (conv2d/layout), both in the call's time: on the H200 a k x k filter's per-element NCHW gather ran at
# 0.24x cuDNN (3x3, 56x56x64) where the channels_last kernel ran at 1.04x its own.
# stream > 0 (1x1 stride-1, C <= 128 only): that many blocks per output-channel tile,
# each loading its weight tile once and streaming pixel tiles through a pipelined loop
# (conv2d/programs.nchw_stream_program; block_K is unused there, C is one tile).
NCHW_DEFAULTS = {
    "block_M": 64,
    "block_N": 128,
    "block_K": 32,
    "num_stages": 4,
    "threads": 128,
    "swizzle": True,
    "via_nhwc": False,
    "flat_k": False,
    "stream": 0,
}
# Groups > 1 on CUDA. direct (depthwise): block_C channels x block_H x block_W output
# pixels a block, vec neighbours along a row a thread (NCHW; conv2d/grouped.direct_program).
# Otherwise the implicit GEMM per group with the channels_last tile keys above (an NCHW
# shape with via_nhwc).
GROUPED_DEFAULTS = {
    "direct": True,
    "block_C": 64,
    "block_H": 4,
    "block_W": 8,
    "threads": 128,
    "vec": 1,
    "block_M": 64,
    "block_N": 64,
    "block_K": 32,
    "num_stages": 3,
    "swizzle": True,
    "flat_k": False,
    "via_nhwc": False,
}
# Groups > 1 on CPU: block_M output pixels x block_N output channels, block_K input
# channels a chunk of the GEMM per group (unused by depthwise; conv2d/grouped.cpu_program).
GROUPED_CPU_DEFAULTS = {"block_M": 32, "block_N": 16, "block_K": 32}

# ResNet-50's convolutions at batch 32 (torchvision v1.5: the stride sits in the 3x3),
# the bottleneck 3x3s and 1x1s of every stage, as (N, H, W, C, K, R, S, stride, pad,
# nchw), in the NCHW layout torchvision's model runs in unless converted.
RESNET50_LAYERS = [
    (32, 56, 56, 64, 64, 3, 3, 1, 1, 1),
    (32, 28, 28, 128, 128, 3, 3, 1, 1, 1),
    (32, 14, 14, 256, 256, 3, 3, 1, 1, 1),
    (32, 7, 7, 512, 512, 3, 3, 1, 1, 1),
    (32, 56, 56, 128, 128, 3, 3, 2, 1, 1),
    (32, 56, 56, 64, 256, 1, 1, 1, 0, 1),
    (32, 14, 14, 1024, 256, 1, 1, 1, 0, 1),
    (32, 56, 56, 256, 512, 1, 1, 2, 0, 1),
]
RESNET50_STEM = (32, 224, 224, 3, 64, 7, 7, 2, 3, 1)


# Local tiles become stack arrays in the generated C; keep them well inside a thread's stack.
CPU_LOCAL_LIMIT_BYTES = 128 * 1024


def conv2d_nhwc(x: torch.Tensor, w: torch.Tensor, stride: int, pad: int, groups: int = 1) -> torch.Tensor:
    """PyTorch's convolution of NHWC x and KRSC w, returned as NHWC. The permuted views
    are channels_last tensors, so cuDNN / oneDNN run NHWC natively and the final permute
    is a free view of an already channels_last output (no copy in a timed reference)."""
    y = F.conv2d(x.permute(0, 3, 1, 2), w.permute(0, 3, 1, 2), stride=stride, padding=pad, groups=groups)
    return y.permute(0, 2, 3, 1)


def gemm_view(shape: Shape | Geometry) -> tuple[int, int, int]:
    """The gemm family's (M, N, K) of a 1x1 stride-1 unpadded channels_last convolution."""
    N, H, W, Cin, K = P.geometry(shape)[:5]
    return (N * H * W, K, Cin)


def gemm_problem(shape: Shape | Geometry) -> str | None:
    g = P.geometry(shape)
    if g.nchw or (g.R, g.S, g.sh, g.sw, g.ph, g.pw, g.G) != (1, 1, 1, 1, 0, 0, 1):
        return "gemm runs a 1x1, stride-1, unpadded channels_last convolution of one group as one GEMM"
    return None


def copy_problem(shape: Shape | Geometry, block_K: int) -> str | None:
    """Why the pixel tile cannot be read by one tile copy (config `a_copy`), or None: a
    1x1, stride-1, unpadded convolution's pixel tile is rows of X; a square filter with
    one stride and one padding is TileLang's im2col (on Hopper TMA's im2col mode); both
    take whole channel chunks, channels_last, one group."""
    g = P.geometry(shape)
    if g.nchw or g.G != 1 or g.R != g.S or g.sh != g.sw or g.ph != g.pw:
        return (
            "a_copy reads the pixel tile by one tile copy: a channels_last convolution of one group "
            "with a square filter, one stride and one padding"
        )
    if g.C % block_K:
        return f"a_copy needs whole channel chunks: C = {g.C} is not a multiple of block_K = {block_K}"
    return None


def gemm_config(cfg: dict[str, Any], target: str) -> dict[str, Any]:
    """The gemm family's config for a conv2d config with `gemm` set: the same tile, on
    CUDA as ping-pong on cfg["gemm"] persistent blocks."""
    tile = {k: cfg[k] for k in ("block_M", "block_N", "block_K")}
    if C.is_cpu_target(target):
        return tile
    return {
        **tile,
        "num_stages": cfg["num_stages"],
        "threads": cfg["threads"],
        "swizzle": cfg["swizzle"],
        "pingpong": 1,
        "persistent": cfg["gemm"],
    }


class ViaGemm(C.LauncherWrapper):
    """A 1x1 channels_last convolution run by the gemm family's kernel `launcher`: x's
    NHWC memory is the GEMM's [N*H*W, C] operand and the KRSC weight its [K, C] one (views,
    no copies), with a zero bias; y comes back as the [N, H, W, K] the family returns."""

    def __init__(self, launcher: C.Launcher, shape: Shape | Geometry, config: dict[str, Any]):
        super().__init__(launcher)
        self.config = dict(config)  # the conv2d config the tuner chose, not the gemm's
        self._dims = tuple(P.geometry(shape)[:5])
        self._zeros: dict[Any, torch.Tensor] = {}

    def __call__(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        N, H, W, Cin, K = self._dims
        bias = self._zeros.get(x.device)
        if bias is None:
            bias = self._zeros[x.device] = torch.zeros(K, dtype=x.dtype, device=x.device)
        return self.launcher(x.reshape(N * H * W, Cin), w.reshape(K, Cin), bias).view(N, H, W, K)


def _tc_smem(cfg: dict[str, Any], dtype: str, cin: int = 0) -> int:
    b = C.dtype_bytes(dtype)
    if cfg.get("stream"):  # the weight tile, the pixel-tile ring, the output tile
        cp = P.stream_channels(cin)
        return (cfg["block_M"] * cp + cfg["num_stages"] * cp * cfg["block_N"] + cfg["block_M"] * cfg["block_N"]) * b
    tiles = (cfg["block_M"] + cfg["block_N"]) * cfg["block_K"] * b * max(1, cfg["num_stages"])
    return tiles + cfg["block_M"] * cfg["block_N"] * b


def _cpu_local(cfg: dict[str, Any]) -> int:
    return (cfg["block_M"] * cfg["block_K"] + cfg["block_K"] * cfg["block_N"] + cfg["block_M"] * cfg["block_N"]) * 4


def _tc_problem(cfg: dict[str, Any]) -> str | None:
    """Why a tensor-core config cannot work on any GPU, or None. Checked before compiling."""
    bM, bN, bK, threads = cfg["block_M"], cfg["block_N"], cfg["block_K"], cfg["threads"]
    if min(bM, bN, bK) <= 0:
        return f"block sizes must be positive, got {bM}x{bN}x{bK}"
    # T.gemm tiles the block into 16x8x16 MMA atoms (64xNx16 for wgmma) over whole warps.
    if bM % 16 or bN % 16 or bK % 16:
        return f"block_M, block_N and block_K must be multiples of 16 for tensor cores, got {bM}x{bN}x{bK}"
    if threads % 128 or not 128 <= threads <= 512:
        return f"threads must be 128, 256, 384 or 512 (whole warpgroups), got {threads}"
    warps = threads // 32
    if (bM // 16) * (bN // 8) < warps:
        return f"a {bM}x{bN} tile has too few 16x8 MMA atoms for {warps} warps"
    if cfg["num_stages"] > 8:
        return f"num_stages must be at most 8, got {cfg['num_stages']}"
    return None


# ---------------------------------------------------------------- the family


class Conv2dFamily(KernelFamily):
    name = "conv2d"
    title = "Conv2d (implicit GEMM; direct depthwise)"
    aten_ops = frozenset(
        {
            "aten::conv2d",
            "aten::convolution",
            "aten::_convolution",
            "aten::cudnn_convolution",
            "aten::mkldnn_convolution",
        }
    )
    shape_names = ("N", "H", "W", "C", "K", "R", "S", "stride", "pad", "nchw", "groups")
    optional_dims = 2  # channels_last; one group
    # The dims awkward_shape makes non-multiples of 16 (filter, stride and pad stay).
    awkward_dims = ("H", "W", "C", "K")
    # The `gemm` configs load rows by TMA (the gemm family's ping-pong): they are checked on
    # tails at multiples of 8 channels, every other config on the first awkward shape.
    awkward_align = 8
    # An `a_copy` config reads whole channel chunks: checked on the last awkward shape,
    # which keeps C and has pixel and output-channel tails.
    awkward_kept = ("C",)

    # Where each op's stride / padding / dilation / groups sit among its arguments
    # (`concrete_inputs` follows the schema; mkldnn and cudnn put padding first).
    _ARG_POS = {
        "aten::conv2d": (3, 4, 5, 6),
        "aten::conv1d": (3, 4, 5, 6),
        "aten::convolution": (3, 4, 5, 8),
        "aten::_convolution": (3, 4, 5, 8),
        "aten::mkldnn_convolution": (4, 3, 5, 6),
        "aten::cudnn_convolution": (3, 2, 4, 5),
    }

    # ------------------------------------------------------------ shapes

    def geometry(self, shape: Shape) -> Geometry:
        """The checked shape as the programs' Geometry."""
        return P.geometry(shape)

    def check(self, shape: Sequence[int]) -> Shape:
        """The shape as 10 ints, or 11 where groups > 1, or KernelError saying what a valid
        convolution shape is. 9 ints are a channels_last shape (nchw = 0), as recorded
        before the layout was; a trailing groups of 1 is dropped (the shape it always was)."""
        names = self.shape_names
        want = (
            f"conv2d: shape must be 10 ints ({', '.join(names[:10])}) or 11 with groups, all positive except "
            f"pad >= 0 and nchw 0 (channels_last) or 1 (NCHW), C and K multiples of groups"
        )
        try:
            shape = tuple(int(s) for s in shape)
        except (TypeError, ValueError):
            raise KernelError(f"{want}, got {shape}") from None
        if len(shape) == 9:
            shape += (0,)
        if len(shape) == 11 and shape[10] == 1:
            shape = shape[:10]
        if (
            len(shape) not in (10, 11)
            or any(s <= 0 for s in shape[:8])
            or shape[8] < 0
            or shape[9] not in (0, 1)
            or (len(shape) == 11 and (shape[10] < 1 or shape[3] % shape[10] or shape[4] % shape[10]))
        ):
            raise KernelError(f"{want}, got {shape}")
        _, H, W, _, _, R, S, _, pad = shape[:9]
        if H + 2 * pad < R or W + 2 * pad < S:
            raise KernelError(
                f"conv2d: the padded input {H + 2 * pad}x{W + 2 * pad} is smaller than the {R}x{S} filter in {shape}"
            )
        return shape

    def covers(self, op: str, input_shapes: Sequence[Sequence[int]] = ()) -> bool:
        """Its aten ops, except where the weight is 3-D: a 1-D convolution (conv1d's)."""
        if op not in self.aten_ops:
            return False
        try:
            return len(input_shapes[1]) != 3
        except (IndexError, TypeError):
            return True

    def _call_args(self, op: str, concrete_inputs: Sequence[Any] | None) -> tuple | None:
        """(stride, padding, dilation, groups) of one profiled call, as recorded, or None."""
        pos = self._ARG_POS.get(op)
        if pos is None or not concrete_inputs:
            return None
        args = list(concrete_inputs)
        i_stride, i_pad, i_dil, i_groups = pos
        if op in ("aten::convolution", "aten::_convolution") and bool(args[6]):
            return None  # transposed convolution
        return args[i_stride], args[i_pad], args[i_dil], int(args[i_groups])

    def problem_shape(
        self,
        op: str,
        input_shapes: Sequence[Sequence[int]],
        concrete_inputs: Sequence[Any] | None = None,
        input_strides: Sequence[Sequence[int]] | None = None,
    ) -> Shape | None:
        """The shape of one profiled convolution call. Stride and padding are scalar
        arguments, which torch.profiler (record_shapes=True) reports in the event's
        `concrete_inputs`; without them the call's shape is unknowable, so None. The
        layout comes from x's strides (`structured_input_strides`); without them, NCHW,
        PyTorch's default."""
        if op == "aten::conv1d":
            return None
        try:
            x, w = [list(s) for s in input_shapes[:2]]
            if len(x) == 3:  # conv2d accepts an unbatched [C, H, W] input
                x = [1] + x
            if len(x) != 4 or len(w) != 4:
                return None
            N, Cin, H, W = (int(v) for v in x)
            K, Cw, R, S = (int(v) for v in w)
            call = self._call_args(op, concrete_inputs)
            if call is None:
                return None
            stride, dil, groups = _pair(call[0]), _pair(call[2]), call[3]
            pad = call[1]
            if isinstance(pad, str):  # aten::conv2d.padding: "valid" or "same"
                pad = _string_padding(pad, R, S, stride)
            else:
                pad = _pair(pad)
        except (IndexError, TypeError, ValueError):
            return None
        if (
            stride is None
            or pad is None
            or dil != (1, 1)
            or groups < 1
            or Cw * groups != Cin
            or K % groups
            or stride[0] != stride[1]
            or pad[0] != pad[1]
        ):
            return None
        try:
            nchw = not strides_are_channels_last(x, input_strides[0]) if input_strides else True
        except (IndexError, TypeError, ValueError):
            nchw = True
        shape = (N, H, W, Cin, K, R, S, stride[0], pad[0], int(nchw)) + ((groups,) if groups > 1 else ())
        try:
            return self.check(shape)
        except KernelError:
            return None

    def standard_shapes(self, device: str) -> list[Shape]:
        if device == "cpu":
            # Single-threaded C: each is a few MFLOP, milliseconds per call.
            medium = (2, 14, 14, 32, 32, 3, 3, 1, 1, 0)
            return [
                medium,
                (2, 14, 14, 64, 32, 1, 1, 1, 0, 1),
                (2, 15, 15, 32, 48, 3, 3, 2, 1, 1),
                self.awkward_shape(medium),
            ]
        # ResNet-50 as torchvision runs it (NCHW): the stem, a 1x1 and a 3x3; one
        # channels_last layer; a tail case.
        return [
            RESNET50_STEM,
            RESNET50_LAYERS[5],
            RESNET50_LAYERS[0],
            channels_last(RESNET50_LAYERS[6]),
            self.awkward_shape(RESNET50_LAYERS[1]),
        ]

    def layout_free(self, shape: Shape) -> Shape:
        return tuple(shape[:9]) + tuple(shape[10:])

    # The op whose string padding ("same", "valid") torch.profiler records as None.
    string_padded_op = "aten::conv2d"

    @staticmethod
    def filter_rs(weight_shape: Sequence[int]) -> tuple[int, int]:
        """(R, S) of a [K, C/G, R, S] weight."""
        return int(weight_shape[2]), int(weight_shape[3])

    def unrecorded_shapes(
        self,
        op: str,
        input_shapes: Sequence[Sequence[int]],
        concrete_inputs: Sequence[Any] | None = None,
        input_strides: Sequence[Sequence[int]] | None = None,
    ) -> tuple[Shape, ...]:
        """The shapes a profiled call may have where torch.profiler did not record its
        padding: a string padding ("valid" or "same", aten::conv2d.padding) is recorded as
        None. "valid" pads 0; "same" pads (R - 1) / 2 and PyTorch allows it only at stride 1,
        so a 1x1 or strided call has one shape, and the profile takes any other from the
        router's pass, which sees the string (`profiling.profile_model`)."""
        call = self._call_args(op, concrete_inputs) if op == self.string_padded_op else None
        if call is None or call[1] is not None:
            return ()
        try:
            R, S = self.filter_rs(input_shapes[1])
        except (IndexError, TypeError, ValueError):
            return ()
        out = []
        for pad in dict.fromkeys(((0, 0), (R // 2, S // 2))):
            concrete = list(concrete_inputs)
            concrete[self._ARG_POS[op][1]] = list(pad[-len(input_shapes[1]) + 2 :])
            shape = self.problem_shape(op, input_shapes, concrete, input_strides)
            if shape is not None and (pad == (0, 0) or _string_padding("same", R, S, _pair(call[0])) == pad):
                out.append(shape)
        return tuple(out)

    def awkward_shape(self, shape: Shape) -> Shape:
        """Odd H and W (so P, Q tails and odd stride-2 edges) and C, K not multiples of 16
        (channel-chunk and output-channel tails); the filter, stride and padding stay.
        Grouped: the channels of a group move instead (depthwise: the groups with them)."""
        shape = self.check(shape)
        N, H, W, Cin, K, R, S, stride, pad, nchw = shape[:10]
        groups = shape[10] if len(shape) > 10 else 1

        def odd(n: int) -> int:
            m = C.awkward(n, minimum=max(R, S) + 2)
            return m if m % 2 else m + 1

        if groups == 1:
            return (N, odd(H), odd(W), C.awkward(Cin), C.awkward(K), R, S, stride, pad, nchw)
        cg, kg = Cin // groups, K // groups
        if cg == 1:  # depthwise: a channel count no tile divides
            g2 = C.awkward(groups)
            return (N, odd(H), odd(W), g2, kg * g2, R, S, stride, pad, nchw, g2)
        cg2, kg2 = C.awkward(cg, minimum=3), C.awkward(kg, minimum=3)
        return (N, odd(H), odd(W), cg2 * groups, kg2 * groups, R, S, stride, pad, nchw, groups)

    def awkward_shapes(self, shape: Shape) -> list[Shape]:
        # The aligned second shape is for the `gemm` configs, which take no grouped shape.
        if self.geometry(self.check(shape)).G > 1:
            return [self.awkward_shape(shape)]
        return super().awkward_shapes(shape)

    # ------------------------------------------------------------ data

    def make_inputs(self, shape: Shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
        """(x, w) in the shape's layout: NCHW x[N, C, H, W] and w[K, C/G, R, S], or
        channels_last x[N, H, W, C] and w[K, R, S, C/G]; x carries `shape` as an attribute
        so that `reference(x, w)` knows the stride and padding."""
        shape = self.check(shape)
        g = self.geometry(shape)
        x_shape, w_shape = self.input_shapes(shape)
        dtype = C.canonical_dtype(dtype)
        gen = C.generator(seed)
        x = C.randn(x_shape, dtype, device, gen)
        # Kaiming-like scaling keeps outputs O(1) for every R*S*C/G, so one tolerance fits all.
        w = C.randn(w_shape, dtype, device, gen, scale=1.0 / math.sqrt(g.R * g.S * g.Cg))
        setattr(x, SHAPE_ATTR, shape)
        return x, w

    def reference(self, *inputs: torch.Tensor) -> torch.Tensor:
        """F.conv2d on the same memory: NCHW tensors as they are, channels_last ones
        through their NCHW-shaped views (returned as NHWC). The protocol passes only the
        tensors, which do not determine stride and padding, so x must be the tensor
        `make_inputs` returned (it carries the problem shape)."""
        x, w, shape = self._reference_inputs(inputs)
        stride, pad = shape[7], shape[8]
        groups = shape[10] if len(shape) > 10 else 1
        if is_nchw(shape):
            return F.conv2d(x, w, stride=stride, padding=pad, groups=groups)
        return conv2d_nhwc(x, w, stride, pad, groups)

    def _reference_inputs(self, inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, Shape]:
        if len(inputs) != 2:
            raise KernelError(f"{self.name}: reference expects (x, w), got {len(inputs)} tensors")
        x, w = inputs
        shape = getattr(x, SHAPE_ATTR, None)
        if shape is None:
            raise KernelError(
                f"{self.name}: reference needs x from make_inputs (it carries stride and padding); "
                "for other tensors call conv2d_nhwc(x, w, stride, pad)"
            )
        x_shape, w_shape = self.input_shapes(shape)
        if tuple(x.shape) != x_shape or tuple(w.shape) != w_shape:
            raise KernelError(
                f"{self.name}: x {tuple(x.shape)} and w {tuple(w.shape)} do not match shape {shape}; "
                f"expected {self._tensor_names(shape)}"
            )
        return x, w, shape

    def _tensor_names(self, shape: Shape) -> str:
        return "x [N, C, H, W] and w [K, C, R, S]" if is_nchw(shape) else "x [N, H, W, C] and w [K, R, S, C]"

    def input_shapes(self, shape: Shape) -> list[tuple[int, ...]]:
        return list(P.tensor_shapes(self.geometry(shape))[:2])

    # ------------------------------------------------------------ metrics

    def flops(self, shape: Shape) -> float:
        g = self.geometry(shape)
        return 2.0 * g.N * g.P * g.Q * g.K * g.Cg * g.R * g.S

    def bytes(self, shape: Shape, dtype: str) -> float:
        g = self.geometry(shape)
        return float(
            (g.N * g.H * g.W * g.C + g.K * g.R * g.S * g.Cg + g.N * g.P * g.Q * g.K)
            * C.dtype_bytes(C.canonical_dtype(dtype))
        )

    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        """Both sides accumulate in fp32 over the R*S*C/G reduction; the difference is the
        summation order (grows ~sqrt of it) plus one output rounding. oneDNN / cuDNN may
        also pick Winograd for 3x3, whose transforms cost a few more ulps. Without a
        shape, a reduction of 1152 (3x3x128) is assumed."""
        dtype = C.canonical_dtype(dtype)
        if shape is not None:
            g = self.geometry(shape)
            k = g.Cg * g.R * g.S
        else:
            k = 1152
        grow = max(1.0, math.sqrt(k / 256.0))
        base = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
        return (base * grow, base * grow)

    # ------------------------------------------------------------ tuning

    def search_space(self, shape: Shape, dtype: str, hardware: Hardware) -> list[KernelConfig]:
        shape = self.check(shape)
        g = self.geometry(shape)
        dtype = C.canonical_dtype(dtype)
        if _on_cpu(hardware):
            cands = self._cpu_space(g)
        elif dtype == "float32":
            return []  # no fp32 CUDA schedule (see reject_reason); the caller falls back to PyTorch
        elif g.G > 1:
            cands = self._grouped_space(g)
        elif g.nchw:
            cands = nchw_space(g, hardware.cores or 132, self._tc_space)
        else:
            cands = self._tc_space(g)
            # Right behind the measured first config, the gemm family's ping-pong tiles on
            # the GEMM view, one persistent block per SM (Hopper's wgmma only). Not timed
            # on a GPU, so not first.
            if gemm_problem(g) is None and A.offers(hardware, GK.PINGPONG_NEEDS):
                cands[1:1] = [
                    {
                        "block_M": bM,
                        "block_N": bN,
                        "block_K": 64,
                        "num_stages": st,
                        "threads": 128,
                        "swizzle": True,
                        "flat_k": False,
                        "gemm": int(hardware.cores or 132),
                    }
                    for bM, bN, st in ((128, 128, 5), (128, 64, 8), (128, 96, 6))
                ]
            cands[1:1] = self._copy_space(g, hardware)
        # Ordered best guess first; the tuner tries the rest.
        return [c for c in cands if self.reject_reason(shape, dtype, c, hardware) is None]

    def limits_error(self, shape: Shape, dtype: str, cfg: dict, hw: Hardware) -> str | None:
        g = self.geometry(shape)
        if cfg.get("gemm"):
            gv = _gemm().resolve(gemm_view(g), dtype, gemm_config(cfg, hw.target or "c"), hw.target or "c")
            return _gemm().limits_error(gv.shape, gv.dtype, gv.config, hw)
        if C.targets_cpu(hw):
            local = _cpu_local(cfg) if g.Cg > 1 or g.G == 1 else (cfg["block_M"] + g.R * g.S) * cfg["block_N"] * 4
            if local > CPU_LOCAL_LIMIT_BYTES:
                return f"local tiles need {local} B, more than the {CPU_LOCAL_LIMIT_BYTES} B stack budget"
            return None
        smem = GR.direct_smem(g, cfg, dtype) if g.G > 1 and cfg["direct"] else _tc_smem(cfg, dtype, g.C)
        if not C.smem_fits(smem, hw):
            return f"needs {smem} B of shared memory, the device allows {hw.smem_per_block} B per block"
        return None

    def _cpu_space(self, g: Geometry) -> list[KernelConfig]:
        M = g.N * g.P * g.Q
        out = []
        if g.G > 1 and g.Cg == 1:
            # Depthwise: channels innermost on NHWC (gcc vectorizes along them), pixels on
            # NCHW; channel tiles that divide K first (a channel tail kept a 48-channel
            # 16x16 NHWC layer at 0.26 ms against 0.035 ms without one).
            tiles = ((16, 32), (32, 16), (8, 64)) if not g.nchw else ((64, 8), (32, 16), (128, 4))
            for bM, bN in tiles:
                out.append({"block_M": min(bM, C.round_up(M, 4)), "block_N": min(bN, C.round_up(g.K, 4))})
            return sorted(C.dedupe(out), key=lambda c: g.K % c["block_N"] != 0)
        for bM, bN, bK in ((64, 32, 32), (32, 64, 32), (64, 64, 16)):
            # Tiles much larger than the problem (a group's) only add zero padding work.
            out.append(
                {
                    "block_M": min(bM, C.round_up(M, 8)),
                    "block_N": min(bN, C.round_up(g.Kg, 8)),
                    "block_K": min(bK, C.round_up(g.Cg, 8)),
                }
            )
        return C.dedupe(out)

    def _tc_space(self, g: Geometry) -> list[KernelConfig]:
        Cin, K = g.C, g.K
        # Ranked by H200 measurements on ResNet-50's layers at batch 32 (fp16 and bf16):
        # 64x128 with one warpgroup was fastest or within 3% on every layer with K >= 128.
        raw = [
            # (block_M, block_N, block_K, num_stages, threads)
            (64, 128, 64, 4, 128),
            (128, 64, 64, 4, 128),
            (64, 64, 64, 4, 128),
            (128, 128, 64, 4, 128),
            (128, 128, 64, 3, 256),
            (64, 64, 64, 6, 128),
            # Also the small-footprint entry for devices with 48 KB of shared memory per block.
            (64, 64, 32, 2, 128),
            (128, 128, 32, 4, 256),
        ]
        if K <= 64:
            # Narrow outputs: a taller tile keeps the MMA busy (best on the 56x56x64 layers).
            raw.insert(0, raw.pop(1))
        # A tile wider than the output channels (rounded to 64) is wasted MMA work.
        n_cap = max(64, C.next_pow2(K))
        out = []
        for bM, bN, bK, stages, threads in raw:
            bN = min(bN, n_cap)
            flat_k = False
            if Cin % bK:
                if Cin % 32 == 0:
                    bK = 32  # still whole channel chunks per tap: vector loads, no masks
                else:
                    flat_k = True  # a 3-channel stem or odd C: pack taps densely instead
            threads = min(threads, 128 * max(1, (bM // 64) * (bN // 64)))
            out.append(
                {
                    "block_M": bM,
                    "block_N": bN,
                    "block_K": bK,
                    "num_stages": stages,
                    "threads": threads,
                    "swizzle": True,
                    "flat_k": flat_k,
                }
            )
        out = C.dedupe(out)
        if out and out[0]["flat_k"]:
            # Per-element tap decoding is the bottleneck there: small tiles and short chunks
            # (less padding of R*S*C) won on the 7x7 stem by 2.5x.
            out.sort(key=lambda c: (c["block_K"], c["block_M"] * c["block_N"]))
        return out

    @staticmethod
    def _copy_space(g: Geometry, hw: Hardware) -> list[KernelConfig]:
        """The tiles that read the pixel tile by one tile copy (a_copy), right behind the
        measured first config (tests/kernels/test_measured_order). Measured on the H100
        (kernel_sweep --only conv_bn_cl; reports/examples/kernels/h100-2026-12-06/): with
        256 threads on 128x128 and 128x256 tiles it ran ResNet-50's 14x14x256 3x3 (with
        its norm and ReLU) in 15.8 us against the gather's best 18.4, and the 28x28x128 ->
        512 1x1 with its residual in 30.3 against 32.9 (torch.compile: 22.5 and 33.5); on
        the gather's own tiles it gained nothing at 64x128 and lost at 64x64. With 64
        input or output channels (one 64-deep k-step, or a 64-wide output) the copy lost
        (a 56x56x64 3x3: 37.0 against 28.7), so it is offered from 128 of each. A k x k
        filter's im2col copy is a TMA mode (elsewhere TileLang lowers it to a per-element
        loop), so it is offered where TMA is; a 1x1's rows copy anywhere."""
        if g.C < 128 or g.K < 128 or copy_problem(g, 64) is not None:
            return []
        if not (P.copies_rows(g) or A.offers(hw, ("tma",))):
            return []
        out = []
        for bM, bN, stages in ((128, 128, 4), (128, 256, 3)):
            if bN > max(64, C.next_pow2(g.K)):
                continue  # wider than the output channels: wasted MMA work
            out.append(
                {
                    "block_M": bM,
                    "block_N": bN,
                    "block_K": 64,
                    "num_stages": stages,
                    "threads": 256,
                    "swizzle": True,
                    "flat_k": False,
                    "a_copy": True,
                }
            )
        return out

    def _grouped_space(self, g: Geometry) -> list[KernelConfig]:
        """Depthwise: the direct tiles alone (a GEMM per channel would be 1 column wide).
        Other groupings: the channels_last tiles on one group's GEMM (its C/G inputs and
        K/G outputs, the output tile no wider than the group rounded to 16), through
        the layout transposes on NCHW."""
        if g.Cg == 1:
            return GR.direct_space(g)
        one = g._replace(C=g.Cg, K=g.Kg, G=1, nchw=False)
        out = []
        for c in self._tc_space(one):
            bN = min(c["block_N"], max(16, C.next_pow2(g.Kg)))
            threads = 128 if bN < 64 else c["threads"]
            out.append({**c, "block_N": bN, "threads": threads, "direct": False, "via_nhwc": g.nchw})
        return C.dedupe(out)[:8]

    # ------------------------------------------------------------ build

    def schedule(self, shape: Shape, dtype: str, target: str) -> Schedule:
        """CPU: the implicit GEMM's loop nest (or the gemm family's program), grouped ones'
        own loop nest. CUDA: the channels_last or the NCHW implicit GEMM, or for groups the
        direct kernel or the GEMM per group."""
        geo = self.geometry
        on_cpu = C.is_cpu_target(target)
        if not on_cpu:
            _check_cuda_dtype(self.name, dtype)
        if geo(shape).G > 1:
            if on_cpu:
                return Schedule(GROUPED_CPU_DEFAULTS, lambda s, d, cfg: GR.cpu_program(geo(s), d, cfg))

            def grouped(s: Shape, d: str, cfg: dict[str, Any]) -> Any:
                g = geo(s)
                if cfg["direct"]:
                    return GR.direct_program(g, d, cfg)
                return GR.grouped_tc_program(g._replace(nchw=False), d, cfg)

            return Schedule(GROUPED_DEFAULTS, grouped)
        if on_cpu:

            def cpu(s: Shape, d: str, cfg: dict[str, Any]) -> Any:
                if cfg["gemm"]:
                    return _gemm().program(gemm_view(geo(s)), d, gemm_config(cfg, target), target)
                return P.cpu_program(geo(s), d, cfg)

            return Schedule(CPU_DEFAULTS, cpu)
        if geo(shape).nchw:

            def nchw(s: Shape, d: str, cfg: dict[str, Any]) -> Any:
                g = geo(s)
                return (
                    P.tc_program(g._replace(nchw=False), d, cfg)
                    if cfg["via_nhwc"]
                    else P.nchw_stream_program(g, d, cfg)
                    if cfg["stream"]
                    else P.nchw_tc_program(g, d, cfg)
                )

            return Schedule(NCHW_DEFAULTS, nchw)

        def last(s: Shape, d: str, cfg: dict[str, Any]) -> Any:
            if cfg["gemm"]:
                return _gemm().program(gemm_view(geo(s)), d, gemm_config(cfg, target), target)
            return P.tc_program(geo(s), d, cfg)

        return Schedule(TC_DEFAULTS, last)

    def config_error(self, shape: Shape, dtype: str, cfg: dict, target: str) -> str | None:
        g = self.geometry(shape)
        if g.G > 1:
            return self._grouped_config_error(g, cfg, target)
        if cfg.get("gemm"):  # merge_config already refused a negative count
            try:
                _gemm().resolve(gemm_view(g), dtype, gemm_config(cfg, target), target)
            except KernelError as exc:
                return f"gemm: the GEMM view {'x'.join(map(str, gemm_view(g)))}: {exc}"
            return gemm_problem(g)
        if C.is_cpu_target(target):
            if min(cfg["block_M"], cfg["block_N"], cfg["block_K"]) <= 0:
                return f"block sizes must be positive, got {cfg}"
            return None
        if cfg.get("flat_k") and g.nchw and not cfg["via_nhwc"]:
            return "flat_k is the channels_last gather's: it needs via_nhwc on an NCHW shape"
        if cfg.get("a_copy"):
            if cfg.get("flat_k"):
                return "a_copy and flat_k are two ways to read the pixel tile: pick one"
            why = copy_problem(g, cfg["block_K"])
            if why:
                return why
        if cfg.get("stream"):
            if cfg["via_nhwc"]:
                return "stream and via_nhwc are two different schedules: pick one"
            return P.stream_problem(g)
        return _tc_problem(cfg)

    @staticmethod
    def _grouped_config_error(g: Geometry, cfg: dict, target: str) -> str | None:
        if C.is_cpu_target(target):
            if min(cfg["block_M"], cfg["block_N"], cfg["block_K"]) <= 0:
                return f"block sizes must be positive, got {cfg}"
            return None
        if cfg["direct"]:
            if cfg["via_nhwc"] or cfg["flat_k"]:
                return "direct runs in the call's own layout: via_nhwc and flat_k are the grouped GEMM's"
            return GR.direct_problem(g, cfg)
        if g.nchw and not cfg["via_nhwc"]:
            return "the GEMM per group runs channels_last: an NCHW shape needs via_nhwc (or direct)"
        if not g.nchw and cfg["via_nhwc"]:
            return "via_nhwc is for NCHW shapes"
        return _tc_problem(cfg)

    def compile(self, resolved: Any, target: str) -> Callable[..., torch.Tensor]:
        g = self.geometry(resolved.shape)
        if resolved.config.get("gemm"):
            kernel = _gemm().build(gemm_view(g), resolved.dtype, gemm_config(resolved.config, target), target)
            return ViaGemm(kernel, g, resolved.config)
        if g.nchw and resolved.config.get("via_nhwc"):
            inputs = list(P.tensor_shapes(g._replace(nchw=False))[:2])
            return ViaChannelsLast(
                C.build_cached(
                    self.name,
                    resolved.shape,
                    resolved.dtype,
                    resolved.config,
                    target,
                    resolved.program,
                    out_idx=[2],
                    input_shapes=inputs,
                ),
                g,
                target,
            )
        return C.build_cached(
            self.name,
            resolved.shape,
            resolved.dtype,
            resolved.config,
            target,
            resolved.program,
            out_idx=[2],
            input_shapes=list(P.tensor_shapes(g)[:2]),
        )

    # ------------------------------------------------------------ swap-in (at the operator)

    # A transposed convolution (nn.ConvTranspose2d) has no kernel, but the profile files
    # its aten::convolution under this family: it is counted here, as falling back.
    functions = (F.conv2d, F.conv_transpose2d)

    def route(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> Route | str:
        """One F.conv2d call (nn.Conv2d's forward, or any call site) as the family's shape."""
        if func is F.conv_transpose2d:
            return TRANSPOSED
        x, w, b = arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "weight"), arg(args, kwargs, 2, "bias")
        stride, padding = _pair(arg(args, kwargs, 3, "stride", 1)), arg(args, kwargs, 4, "padding", 0)
        dilation, groups = _pair(arg(args, kwargs, 5, "dilation", 1)), int(arg(args, kwargs, 6, "groups", 1))
        if x.dim() != 4 or w.dim() != 4:
            return "not a batched 4-D input"
        N, Cin, H, W = (int(s) for s in x.shape)
        K, Cw, R, S = (int(s) for s in w.shape)
        if groups < 1 or Cw * groups != Cin or K % groups:
            return "weight does not match the input's channels and groups"
        if dilation != (1, 1):
            return "dilated convolution"
        pad = _string_padding(padding, R, S, stride) if isinstance(padding, str) else _pair(padding)
        if stride is None or pad is None or stride[0] != stride[1] or pad[0] != pad[1]:
            return "asymmetric stride or padding"
        bad = dtype_mismatch(dtype, x, w, b)
        if bad:
            return bad
        if N <= 0 or H + 2 * pad[0] < R or W + 2 * pad[1] < S:
            return "empty input or filter larger than the padded input"
        geometry = (N, H, W, Cin, K, R, S, stride[0], pad[0])
        grouped = (groups,) if groups > 1 else ()
        # The kernel runs in the layout the input arrives in, and the output comes back
        # in the layout PyTorch's conv2d would have returned, so the rest of the model
        # runs exactly as its authors wrote it (handing an NCHW model channels_last
        # tensors would speed up its remaining PyTorch convolutions and credit TileLang
        # with a layout change).
        # A weight the model computes on every call (weight_norm's) is a new tensor each
        # time: its copies are made per call, as a cache keyed by tensors that die with
        # the call would only grow.
        constant = isinstance(w, torch.nn.Parameter)
        if strides_are_channels_last(x.shape, x.stride()):
            nhwc = x.permute(0, 2, 3, 1)  # a free view of channels_last memory

            def launch_nhwc(kernel: Callable[..., torch.Tensor]) -> torch.Tensor:
                w_krsc = DERIVED.get(w, "krsc", _krsc) if constant else _krsc(w.detach())
                y = kernel(nhwc, w_krsc)
                if b is not None:
                    y = y + b  # broadcasts over the channel-last dim
                return y.permute(0, 3, 1, 2)

            return Route(geometry + (0,) + grouped, launch_nhwc)
        # Any other strides (a sliced or permuted view) are copied to NCHW, counted in the time.
        notes = () if x.is_contiguous() else ("input copied to contiguous NCHW",)
        w_kcrs = (
            w if w.is_contiguous() else DERIVED.get(w, "kcrs", torch.Tensor.contiguous) if constant else w.contiguous()
        )

        def launch_nchw(kernel: Callable[..., torch.Tensor]) -> torch.Tensor:
            if not constant and isinstance(kernel, ViaChannelsLast):  # its KRSC copy, per call
                y = kernel(x.contiguous(), w_kcrs, w_krsc=_krsc(w.detach()))
            else:
                y = kernel(x.contiguous(), w_kcrs)
            return y if b is None else y + b.view(1, -1, 1, 1)

        return Route(geometry + (1,) + grouped, launch_nchw, notes=notes)


def _krsc(w: torch.Tensor) -> torch.Tensor:
    """A [K, C/G, R, S] weight as the channels_last programs read it, [K, R, S, C/G]."""
    return w.permute(0, 2, 3, 1).contiguous()


def _gemm() -> KernelFamily:
    """The plain GEMM family: a 1x1, stride-1, unpadded channels_last convolution is one GEMM."""
    return GEMM


def _on_cpu(hw: Hardware) -> bool:
    return C.targets_cpu(hw) or hw.device == "cpu"


def _check_cuda_dtype(family: str, dtype: str) -> None:
    if dtype not in ("float16", "bfloat16"):
        # T.gemm on fp32 operands runs TF32 tensor cores; a SIMT fp32 schedule is not written.
        raise KernelError(f"{family}: the CUDA schedule takes float16 or bfloat16, got {dtype}")


FAMILY = Conv2dFamily()


# The registry (evaluator.kernels) registers these, in this order.
FAMILIES = (FAMILY,)
