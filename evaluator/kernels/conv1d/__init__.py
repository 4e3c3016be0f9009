"""1-D convolution (F.conv1d: Whisper's and wav2vec2's front ends), no bias, run by the
conv2d family's programs on the call's own memory viewed as a 2-D image one row high.

In: shape (N, L, C, K, S, stride, pad, ncl[, groups]) — batch, input length, input
channels, output channels, filter width, stride, zero padding on both ends, the layout
and the number of groups (left out where it is 1): ncl = 1 for PyTorch's contiguous
x[N, C, L] (nn.Conv1d's default), ncl = 0 for an x whose memory is [N, L, C] (a
transposed view, as wav2vec2's positional convolution hands over its hidden states: the
kernel takes that memory as x[N, L, C]); the weight is nn.Conv1d's [K, C/groups, S] in
both (for ncl = 0 the kernel reads a [K, S, C/groups] copy made once per weight tensor,
swap.DERIVED). A 7-int shape is NCL. Out: y[N, K, L'] in the call's dtype, contiguous as
F.conv1d returns it in both layouts (for ncl = 0 a TileLang transpose inside the call
puts it there), compared against F.conv1d on the same memory.

Why a family of its own rather than conv2d shapes with H = R = 1: conv2d's shape has one
stride and one padding for both spatial dims, and a 1-D call pads only along L; the
report, `--families` and the tuning cache name the call the model makes (Whisper's
front end shows as conv1d, its 3000 frames as L); the programs are conv2d's all the
same: `geometry` states the call as a 2-D convolution of x viewed [N, C, 1, L] (or
[N, 1, L, C]) — views, no copies — with stride (1, stride) and padding (0, pad), so every
conv2d schedule (NCHW and channels_last implicit GEMM, the direct depthwise kernel, the
GEMM per group) computes it. Profiled calls are aten::conv1d, and aten::convolution
(and its backends) with a 3-D weight.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F

from ...errors import KernelError
from ...results import Shape
from ...routing.calls import DERIVED, arg, dtype_mismatch
from ...routing.router import Route
from .. import common as C
from ..conv2d.calls import pair as _pair
from ..conv2d.calls import strides_are_channels_last
from ..conv2d.calls import string_padding as _string_padding
from ..conv2d.layout import ViaChannelsLast, transpose_launcher
from ..conv2d.programs import Geometry
from ..conv2d import TRANSPOSED, Conv2dFamily

# Whisper-base's front end on 30 s of audio (80 mel bins, 3000 frames, d_model 512) and
# wav2vec2-base's feature encoder's first layer and positional convolution on 1 s
# (16000 samples, 49 frames, 768 channels in 16 groups), batch 8.
WHISPER_BASE = [(8, 3000, 80, 512, 3, 1, 1, 1), (8, 3000, 512, 512, 3, 2, 1, 1)]
WAV2VEC2_BASE = [(8, 16000, 1, 512, 10, 5, 0, 1), (8, 49, 768, 768, 128, 1, 64, 0, 16)]


def _ksc(w: torch.Tensor) -> torch.Tensor:
    """A [K, C/G, S] weight as the channels_last programs read it, [K, S, C/G]."""
    return w.permute(0, 2, 1).contiguous()


def strides_are_nlc(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a 3-D [N, C, L] tensor's memory is [N, L, C] (a transposed view) and not
    also plainly contiguous: conv2d's channels_last rule on its [N, C, 1, L] view."""
    N, Cn, L = (int(v) for v in sizes)
    s0, s1, s2 = (int(v) for v in strides)
    return strides_are_channels_last((N, Cn, 1, L), (s0, s1, s2 * L, s2))


class As2d(C.LauncherWrapper):
    """A conv2d kernel `launcher` built for the call's Geometry, taking 1-D tensors: x and
    w viewed with a size-1 height (views of the same memory), y returned as [N, K, L'];
    for ncl = 0 the weight is read as its [K, S, C/G] copy (made once per weight tensor)
    and the kernel's [N, L', K] goes through a TileLang transpose to [N, K, L']."""

    def __init__(self, launcher: Any, g: Geometry, target: str):
        super().__init__(launcher)
        self._ncl = g.nchw
        self._dims = (g.N, g.Q, g.K)
        self.to_ncl = None if g.nchw else transpose_launcher(g.N, g.Q, g.K, launcher.dtype, target)
        if self.to_ncl is not None:
            self.compile_s = launcher.compile_s + self.to_ncl.compile_s

    @property
    def source(self) -> str:
        return self.launcher.source + ("" if self.to_ncl is None else "\n" + self.to_ncl.source)

    def __call__(self, x: torch.Tensor, w: torch.Tensor, cache: bool = True) -> torch.Tensor:
        """`cache`: whether the weight outlives the call, so that its [K, S, C/G] copy (for
        the channels_last programs) is made once per weight tensor; a weight the model
        computes on every call (cache=False) gets its copy per call."""

        def ksc() -> torch.Tensor:
            return DERIVED.get(w, "ksc", _ksc) if cache else _ksc(w.detach())

        if self._ncl:  # x [N, C, L] -> [N, C, 1, L], w [K, C/G, S] -> [K, C/G, 1, S]
            if isinstance(self.launcher, ViaChannelsLast):  # its KRSC weight, from w itself (the view is new each call)
                return self.launcher(x.unsqueeze(2), w.unsqueeze(2), w_krsc=ksc().unsqueeze(1)).squeeze(2)
            return self.launcher(x.unsqueeze(2), w.unsqueeze(2)).squeeze(2)
        # x [N, L, C] -> [N, 1, L, C], w [K, C/G, S] -> its copy [K, S, C/G] -> [K, 1, S, C/G]
        y = self.launcher(x.unsqueeze(1), ksc().unsqueeze(1))
        N, Lo, K = self._dims
        return self.to_ncl(y.view(N, Lo, K))


class Conv1dFamily(Conv2dFamily):
    name = "conv1d"
    title = "Conv1d (the conv2d programs on [N, C, 1, L])"
    aten_ops = frozenset({"aten::conv1d"})
    shape_names = ("N", "L", "C", "K", "S", "stride", "pad", "ncl", "groups")
    optional_dims = 2  # NCL; one group
    awkward_dims = ("L", "C", "K")

    # ------------------------------------------------------------ shapes

    def geometry(self, shape: Shape) -> Geometry:
        N, L, Cin, K, S, stride, pad = (int(v) for v in shape[:7])
        ncl = len(shape) < 8 or bool(shape[7])
        G = int(shape[8]) if len(shape) > 8 else 1
        return Geometry(N, 1, L, Cin, K, 1, S, 1, stride, 0, pad, G, ncl)

    def check(self, shape: Sequence[int]) -> Shape:
        """The shape as 8 ints, or 9 where groups > 1, or KernelError saying what a valid
        1-D convolution shape is. 7 ints are NCL (ncl = 1); a trailing groups of 1 is dropped."""
        want = (
            "conv1d: shape must be 8 ints (N, L, C, K, S, stride, pad, ncl) or 9 with groups, all positive "
            "except pad >= 0 and ncl 1 (x [N, C, L]) or 0 (x's memory [N, L, C]), C and K multiples of groups"
        )
        try:
            shape = tuple(int(s) for s in shape)
        except (TypeError, ValueError):
            raise KernelError(f"{want}, got {shape}") from None
        if len(shape) == 7:
            shape += (1,)
        if len(shape) == 9 and shape[8] == 1:
            shape = shape[:8]
        if (
            len(shape) not in (8, 9)
            or any(s <= 0 for s in shape[:6])
            or shape[6] < 0
            or shape[7] not in (0, 1)
            or (len(shape) == 9 and (shape[8] < 1 or shape[2] % shape[8] or shape[3] % shape[8]))
        ):
            raise KernelError(f"{want}, got {shape}")
        L, S, pad = shape[1], shape[4], shape[6]
        if L + 2 * pad < S:
            raise KernelError(f"conv1d: the padded input ({L + 2 * pad}) is shorter than the filter ({S}) in {shape}")
        return shape

    def covers(self, op: str, input_shapes: Sequence[Sequence[int]] = ()) -> bool:
        """aten::conv1d, and conv2d's aten ops where the weight is 3-D."""
        if op in self.aten_ops:
            return True
        if op not in Conv2dFamily.aten_ops:
            return False
        try:
            return len(input_shapes[1]) == 3
        except (IndexError, TypeError):
            return False

    def problem_shape(
        self,
        op: str,
        input_shapes: Sequence[Sequence[int]],
        concrete_inputs: Sequence[Any] | None = None,
        input_strides: Sequence[Sequence[int]] | None = None,
    ) -> Shape | None:
        """The shape of one profiled 1-D convolution: stride, padding and groups from the
        call's `concrete_inputs` (None without them), the layout from x's strides (NCL
        without them)."""
        if not self.covers(op, input_shapes):
            return None
        try:
            x, w = [list(s) for s in input_shapes[:2]]
            if len(x) == 2:  # conv1d accepts an unbatched [C, L] input
                x = [1] + x
            if len(x) != 3 or len(w) != 3:
                return None
            N, Cin, L = (int(v) for v in x)
            K, Cw, S = (int(v) for v in w)
            call = self._call_args(op, concrete_inputs)
            if call is None:
                return None
            stride, dil, groups = _pair(call[0]), _pair(call[2]), call[3]
            pad = call[1]
            pad = _string_padding(pad, 1, S, stride) if isinstance(pad, str) else _pair(pad)
        except (IndexError, TypeError, ValueError):
            return None
        if stride is None or pad is None or dil[0] != 1 or groups < 1 or Cw * groups != Cin or K % groups:
            return None
        try:
            ncl = not strides_are_nlc(x, input_strides[0]) if input_strides else True
        except (IndexError, TypeError, ValueError):
            ncl = True
        shape = (N, L, Cin, K, S, stride[-1], pad[-1], int(ncl)) + ((groups,) if groups > 1 else ())
        try:
            return self.check(shape)
        except KernelError:
            return None

    def standard_shapes(self, device: str) -> list[Shape]:
        if device == "cpu":
            # Whisper's two front-end convolutions and wav2vec2's first and positional
            # ones at tiny widths; a tail case.
            medium = (2, 64, 16, 32, 3, 1, 1, 1)
            return [
                medium,
                (2, 64, 32, 32, 3, 2, 1, 1),
                (2, 400, 1, 16, 10, 5, 0, 1),
                (2, 40, 32, 32, 16, 1, 8, 0, 2),
                self.awkward_shape(medium),
            ]
        return [*WHISPER_BASE, *WAV2VEC2_BASE, self.awkward_shape(WHISPER_BASE[1])]

    string_padded_op = "aten::conv1d"  # conv2d's unrecorded_shapes, on a [K, C/G, S] weight

    @staticmethod
    def filter_rs(weight_shape: Sequence[int]) -> tuple[int, int]:
        return 1, int(weight_shape[2])

    def layout_free(self, shape: Shape) -> Shape:
        return tuple(shape[:7]) + tuple(shape[8:])

    def awkward_shape(self, shape: Shape) -> Shape:
        """An odd L (tails of the pixel tiles and odd stride-2 ends) and C, K no tile divides
        (grouped: a group's channels; depthwise: the groups); the filter, stride and
        padding stay."""
        shape = self.check(shape)
        N, L, Cin, K, S, stride, pad, ncl = shape[:8]
        groups = shape[8] if len(shape) > 8 else 1
        m = C.awkward(L, minimum=S + 2)
        L2 = m if m % 2 else m + 1
        if groups == 1:
            return (N, L2, C.awkward(Cin), C.awkward(K), S, stride, pad, ncl)
        cg, kg = Cin // groups, K // groups
        if cg == 1:
            g2 = C.awkward(groups)
            return (N, L2, g2, kg * g2, S, stride, pad, ncl, g2)
        return (
            N,
            L2,
            C.awkward(cg, minimum=3) * groups,
            C.awkward(kg, minimum=3) * groups,
            S,
            stride,
            pad,
            ncl,
            groups,
        )

    # ------------------------------------------------------------ data

    def input_shapes(self, shape: Shape) -> list[tuple[int, ...]]:
        g = self.geometry(shape)
        return [(g.N, g.C, g.W) if g.nchw else (g.N, g.W, g.C), (g.K, g.Cg, g.S)]

    def _tensor_names(self, shape: Shape) -> str:
        return ("x [N, C, L]" if self.geometry(shape).nchw else "x [N, L, C]") + " and w [K, C, S]"

    def reference(self, *inputs: torch.Tensor) -> torch.Tensor:
        """F.conv1d on the same memory: NCL tensors as they are, [N, L, C] ones through
        their [N, C, L] views; y as F.conv1d returns it, [N, K, L'] contiguous. x must be
        the tensor `make_inputs` returned (it carries stride and padding)."""
        x, w, shape = self._reference_inputs(inputs)
        g = self.geometry(shape)
        return F.conv1d(x if g.nchw else x.permute(0, 2, 1), w, stride=g.sw, padding=g.pw, groups=g.G)

    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        """conv2d's rule on the S*C/G reduction; without a shape, 3 taps over 512 channels."""
        if shape is None:
            dtype = C.canonical_dtype(dtype)
            grow = max(1.0, math.sqrt(3 * 512 / 256.0))
            base = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
            return (base * grow, base * grow)
        return super().tolerance(dtype, shape)

    # ------------------------------------------------------------ build

    def compile(self, resolved: Any, target: str) -> Callable[..., torch.Tensor]:
        return As2d(super().compile(resolved, target), self.geometry(resolved.shape), target)

    # ------------------------------------------------------------ swap-in

    functions = (F.conv1d, F.conv_transpose1d)  # the transposed one counted, as conv2d's

    def route(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> Route | str:
        """One F.conv1d call (nn.Conv1d's forward, or any call site) as the family's shape."""
        if func is F.conv_transpose1d:
            return TRANSPOSED
        x, w, b = arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "weight"), arg(args, kwargs, 2, "bias")
        stride, padding = _pair(arg(args, kwargs, 3, "stride", 1)), arg(args, kwargs, 4, "padding", 0)
        dilation, groups = _pair(arg(args, kwargs, 5, "dilation", 1)), int(arg(args, kwargs, 6, "groups", 1))
        if x.dim() != 3 or w.dim() != 3:
            return "not a batched 3-D input"
        N, Cin, L = (int(s) for s in x.shape)
        K, Cw, S = (int(s) for s in w.shape)
        if groups < 1 or Cw * groups != Cin or K % groups:
            return "weight does not match the input's channels and groups"
        if dilation is None or dilation[0] != 1:
            return "dilated convolution"
        pad = _string_padding(padding, 1, S, stride) if isinstance(padding, str) else _pair(padding)
        if stride is None or pad is None:
            return "asymmetric stride or padding"
        bad = dtype_mismatch(dtype, x, w, b)
        if bad:
            return bad
        if N <= 0 or L + 2 * pad[-1] < S:
            return "empty input or filter longer than the padded input"
        dims = (N, L, Cin, K, S, stride[-1], pad[-1])
        grouped = (groups,) if groups > 1 else ()

        def add_bias(y: torch.Tensor) -> torch.Tensor:
            return y if b is None else y + b.view(1, -1, 1)

        # A weight the model computes on every call (wav2vec2's positional convolution is
        # weight-normalised) is a new tensor each time: its copies are made per call, as a
        # cache keyed by tensors that die with the call would only grow.
        constant = isinstance(w, torch.nn.Parameter)
        w_kcs = (
            w if w.is_contiguous() else DERIVED.get(w, "kcs", torch.Tensor.contiguous) if constant else w.contiguous()
        )
        if strides_are_nlc(x.shape, x.stride()):
            # [N, L, C] memory read as it lies; the kernel returns y as NCL, as F.conv1d does.
            nlc = x.permute(0, 2, 1)
            return Route(dims + (0,) + grouped, lambda kernel: add_bias(kernel(nlc, w_kcs, cache=constant)))
        notes = () if x.is_contiguous() else ("input copied to contiguous NCL",)
        return Route(
            dims + (1,) + grouped, lambda kernel: add_bias(kernel(x.contiguous(), w_kcs, cache=constant)), notes=notes
        )


FAMILY = Conv1dFamily()


# The registry (evaluator.kernels) registers these, in this order.
FAMILIES = (FAMILY,)
