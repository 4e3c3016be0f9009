"""A convolution and the eval-mode batch norm on its result (and the ReLU after it, or a
residual add and then the ReLU) as one kernel: conv_bn, conv_bn_relu, conv_bn_add_relu.

In: a conv2d shape of one group (N, H, W, C, K, R, S, stride, pad, nchw; conv2d's
family says what each means), a dtype, a config of conv2d's keys and a TileLang target.
Out: y = BN(conv2d(x, w)) — `F.batch_norm` with training=False, the running statistics —
for conv_bn_relu max(y, 0), for conv_bn_add_relu max(y + r, 0) with r a tensor of y's
size (a residual block's identity), in the input's layout and dtype.

Why: a CNN in eval mode (ResNet, every torchvision backbone) runs conv -> batch_norm ->
relu; routed alone, the convolution runs in TileLang and writes its output, and the norm
and the ReLU read it back in PyTorch, two passes over the largest tensors of the model
that torch.compile folds away. Eval-mode batch norm is per output channel affine:
y = conv * scale[k] + shift[k] with scale = weight / sqrt(running_var + eps) and
shift = bias - running_mean * scale (a convolution's own bias b adds b * scale). The
factors are folded once per set of norm tensors (`folded`, remade when one is updated in
place) and applied in the convolution's epilogue on the fp32 accumulator, ReLU included.

The programs are conv2d's implicit GEMMs with that epilogue (programs.py): the CPU loop
nest for both layouts, on CUDA the channels_last GEMM and the NCHW one, or the
channels_last one between TileLang layout transposes (conv2d's via_nhwc). The search
space is conv2d's, less the schedules that have no epilogue here (the gemm family's
ping-pong view and the NCHW stream schedule).

Routing: the pattern starts with F.conv2d (`fuses`), held back by the router until the
next call on its result; `second` takes F.batch_norm in eval form. conv_bn_relu goes on:
its `second` answers the norm with a `Start` (the router holds the norm's result too),
and the ReLU on that result, `F.relu` / `torch.relu` in place or not, completes the
pattern; any other call that reads the norm's result gets it computed as conv_bn (or
PyTorch) would have. conv_bn_add_relu goes one call further: the norm, then an add of
one other tensor of its size (`out += identity` or `out + identity`, torchvision's
Bottleneck and BasicBlock), then the ReLU.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F

from ...errors import KernelError
from ...results import Hardware, KernelConfig, Shape
from ...routing.calls import DERIVED, arg
from ...routing.router import Route, Start
from .. import common as C
from ..base import KernelFamily, Schedule
from ..conv2d import CPU_DEFAULTS, FAMILY as CONV2D, SHAPE_ATTR, conv2d_nhwc
from ..conv2d.layout import ViaChannelsLast, transpose_launcher
from ..conv2d.programs import geometry, is_nchw, tensor_shapes
from . import programs as P

EPS = 1e-5  # nn.BatchNorm2d's default: what make_inputs' norm uses

# conv2d's config keys that select a program this family has no epilogue for.
UNFUSED_KEYS = ("gemm", "stream")

RELU_CALLS = (F.relu, torch.relu, torch.Tensor.relu, torch.relu_, torch.Tensor.relu_)
INPLACE_RELU = (torch.relu_, torch.Tensor.relu_)
ADD_CALLS = (torch.Tensor.__iadd__, torch.Tensor.add_, torch.Tensor.__add__, torch.Tensor.add, torch.add)
INPLACE_ADD = (torch.Tensor.__iadd__, torch.Tensor.add_)


def fold(
    mean: torch.Tensor,
    var: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
    conv_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The eval-mode norm as fp32 (scale, shift) per channel, the convolution's own bias
    folded into shift."""
    scale = torch.rsqrt(var.detach().float() + eps)
    if weight is not None:
        scale = scale * weight.detach().float()
    shift = -mean.detach().float() * scale
    if bias is not None:
        shift = shift + bias.detach().float()
    if conv_bias is not None:
        shift = shift + conv_bias.detach().float() * scale
    return scale.contiguous(), shift.contiguous()


def _version(t: torch.Tensor | None) -> tuple:
    if t is None:
        return (None,)
    try:
        return (id(t), t._version, t.data_ptr())
    except RuntimeError:  # inference tensors keep no version counter (and cannot change)
        return (id(t), 0, t.data_ptr())


def folded(
    mean: torch.Tensor,
    var: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
    conv_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`fold`, made once per set of norm tensors (their identity and version, so a norm
    whose statistics or affine weights change in place is folded again) and kept while
    the running variance lives (swap.DERIVED). One tensor [2, K]: scale, then shift."""
    kind = ("bn_fold", float(eps), _version(mean), _version(weight), _version(bias), _version(conv_bias))
    both = DERIVED.get(var, kind, lambda v: torch.stack(fold(mean, v, weight, bias, eps, conv_bias)))
    return both[0], both[1]


class Folded(C.LauncherWrapper):
    """The compiled epilogue kernel behind the family's calling convention: (x, w, mean,
    var, weight, bias) as make_inputs returns them, folded (once per set, `folded`) and
    launched; `run` takes the factors already folded (the router's launch)."""

    def __init__(self, inner: Any, dtype: str):
        super().__init__(inner if isinstance(inner, C.Launcher) else inner.launcher)
        self.inner = inner
        self.dtype = dtype
        self.compile_s = inner.compile_s  # the layout transposes' too, where there are some

    @property
    def source(self) -> str:
        return self.inner.source

    def run(
        self,
        x: torch.Tensor,
        w: torch.Tensor,
        scale: torch.Tensor,
        shift: torch.Tensor,
        r: torch.Tensor | None = None,
        **more: Any,
    ) -> torch.Tensor:
        """`r`: the residual (conv_bn_add_relu), in the output's layout."""
        if isinstance(self.inner, ViaBn):
            return self.inner(x, w, scale, shift, r, **more)
        rest = () if r is None else (r.detach().contiguous(),)
        # The factors are fp32 whatever the kernel's dtype: called past Launcher's one-dtype check.
        return self.inner.kernel(x.detach().contiguous(), w.detach().contiguous(), scale, shift, *rest)

    def __call__(self, x, w, mean, var, weight, bias, r=None) -> torch.Tensor:
        scale, shift = folded(mean, var, weight, bias, EPS)
        return self.run(x, w, scale, shift, r)


class ViaBn(ViaChannelsLast):
    """conv2d's via_nhwc path (an NCHW convolution run by the channels_last kernel between
    two TileLang transposes) with the epilogue kernel's further inputs."""

    def __init__(self, launcher: C.Launcher, shape: Shape, target: str):
        super().__init__(launcher, shape, target)
        self.target = target
        self.r_to_nhwc: C.Launcher | None = None  # compiled at the first residual

    def __call__(self, x, w, scale, shift, r=None, w_krsc: torch.Tensor | None = None) -> torch.Tensor:
        """`r`: an NCHW residual, moved to NHWC by one more transpose (K x P*Q per image)."""
        N, H, W, Cin, K, P_, Q = self._dims
        if w_krsc is None:
            w_krsc = DERIVED.get(w, "krsc", lambda t: t.permute(0, 2, 3, 1).contiguous())
        x_nhwc = self.to_nhwc(x.contiguous().view(N, Cin, H * W)).view(N, H, W, Cin)
        rest = ()
        if r is not None:
            if self.r_to_nhwc is None:
                self.r_to_nhwc = transpose_launcher(N, K, P_ * Q, self.launcher.dtype, self.target)
            rest = (self.r_to_nhwc(r.contiguous().view(N, K, P_ * Q)).view(N, P_, Q, K),)
        y = self.launcher.kernel(x_nhwc, w_krsc, scale, shift, *rest)
        return self.to_nchw(y.view(N, P_ * Q, K)).view(N, K, P_, Q)


class ConvBnFamily(KernelFamily):
    """conv2d -> batch_norm(eval) [-> relu] in one kernel (module docstring)."""

    shape_names = ("N", "H", "W", "C", "K", "R", "S", "stride", "pad", "nchw")
    optional_dims = 1  # channels_last
    awkward_dims = ("H", "W", "C", "K")
    awkward_kept = ("C",)  # conv2d's: a_copy reads whole channel chunks
    aten_ops = frozenset()  # fused: its shapes are the convolution's (profile_family)
    profile_family = "conv2d"
    fuses = (F.conv2d,)
    fused_op = "aten::batch_norm"
    first_by_class = True  # first() is conv2d's route of the call, the same for all three

    def __init__(self, relu: bool = False, residual: bool = False):
        self.relu = relu or residual
        self.residual = residual
        self.fine_flags = ("r_shared",) if residual else ()
        self.name = "conv_bn_add_relu" if residual else "conv_bn_relu" if relu else "conv_bn"
        self.absorbs = ("batchnorm",) + ("elementwise",) * (int(residual) + int(self.relu))
        self.title = (
            "Conv2d + eval batch norm"
            + (" + residual add + ReLU" if residual else " + ReLU" if relu else "")
            + " (folded epilogue)"
        )
        self.cpu_schedule = Schedule(
            {k: v for k, v in CPU_DEFAULTS.items() if k not in UNFUSED_KEYS},
            functools.partial(_cpu, relu=self.relu, residual=residual),
        )

    # ------------------------------------------------------------ shapes

    def check(self, shape: Sequence[int]) -> Shape:
        try:
            shape = CONV2D.check(shape)
        except KernelError as exc:
            raise KernelError(str(exc).replace("conv2d:", f"{self.name}:", 1)) from None
        if len(shape) > 10:
            raise KernelError(f"{self.name}: one group only (a grouped convolution's norm stays in PyTorch): {shape}")
        return shape

    def standard_shapes(self, device: str) -> list[Shape]:
        return [s for s in CONV2D.standard_shapes(device) if len(s) == 10]

    def awkward_shape(self, shape: Shape) -> Shape:
        return CONV2D.awkward_shape(self.check(shape))

    def awkward_shapes(self, shape: Shape) -> list[Shape]:
        # No gemm configs: no aligned second shape; the input channels kept for a_copy.
        return [self.awkward_shape(shape), self.kept_shape(shape)]

    def layout_free(self, shape: Shape) -> Shape:
        return CONV2D.layout_free(shape)

    # ------------------------------------------------------------ data

    def make_inputs(self, shape: Shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
        """(x, w) as conv2d makes them, then the norm's running mean and variance, weight
        and bias [K] in the same dtype (a model's buffers and parameters), at the sizes a
        trained network has: means near zero, variances 0.5-2, weights near one; for
        conv_bn_add_relu then the residual, in the output's shape and layout."""
        shape = self.check(shape)
        x, w = CONV2D.make_inputs(shape, dtype, device, seed)
        K = shape[4]
        gen = C.generator(seed + 104729)
        dtype = C.canonical_dtype(dtype)
        mean = C.randn((K,), dtype, device, gen, scale=0.5)
        var = (torch.rand(K, generator=gen) * 1.5 + 0.5).to(device=device, dtype=C.torch_dtype(dtype))
        weight = C.randn((K,), dtype, device, gen, scale=0.25, shift=1.0)
        bias = C.randn((K,), dtype, device, gen, scale=0.5)
        if not self.residual:
            return x, w, mean, var, weight, bias
        r = C.randn(tensor_shapes(geometry(shape))[2], dtype, device, gen)
        return x, w, mean, var, weight, bias, r

    def reference(self, *inputs: torch.Tensor) -> torch.Tensor:
        """F.conv2d then F.batch_norm(training=False) on its result (through the NCHW-shaped
        views of channels_last tensors), then F.relu for conv_bn_relu: PyTorch's calls as a
        model makes them, each output rounded to the dtype."""
        want = 7 if self.residual else 6
        if len(inputs) != want:
            names = "x, w, mean, var, weight, bias" + (", r" if self.residual else "")
            raise KernelError(f"{self.name}: reference expects ({names}), got {len(inputs)} tensors")
        x, w, mean, var, weight, bias = inputs[:6]
        shape = getattr(x, SHAPE_ATTR, None)
        if shape is None:
            raise KernelError(f"{self.name}: reference needs x from make_inputs (it carries stride and padding)")
        stride, pad = shape[7], shape[8]
        if is_nchw(shape):
            y = F.conv2d(x, w, stride=stride, padding=pad)
        else:
            y = conv2d_nhwc(x, w, stride, pad).permute(0, 3, 1, 2)
        y = F.batch_norm(y, mean, var, weight, bias, False, 0.0, EPS)
        if self.residual:
            y = y + (inputs[6] if is_nchw(shape) else inputs[6].permute(0, 3, 1, 2))
        if self.relu:
            y = F.relu(y)
        return y if is_nchw(shape) else y.permute(0, 2, 3, 1)

    def input_shapes(self, shape: Shape) -> list[tuple[int, ...]]:
        x, w, y = tensor_shapes(geometry(self.check(shape)))
        K = shape[4]
        return [x, w, (K,), (K,), (K,), (K,)] + ([y] if self.residual else [])

    # ------------------------------------------------------------ metrics

    def flops(self, shape: Shape) -> float:
        g = geometry(self.check(shape))
        return CONV2D.flops(shape) + (2.0 + self.relu + self.residual) * g.N * g.P * g.Q * g.K

    def bytes(self, shape: Shape, dtype: str) -> float:
        g = geometry(self.check(shape))
        r = g.N * g.P * g.Q * g.K * C.dtype_bytes(C.canonical_dtype(dtype)) if self.residual else 0
        return CONV2D.bytes(self.check(shape), dtype) + 2 * shape[4] * 4.0 + r

    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        """conv2d's, doubled below fp32: PyTorch rounds the convolution's output to the
        dtype before the norm reads it and rounds again after it, the kernel rounds once."""
        atol, rtol = CONV2D.tolerance(dtype, shape)
        return (atol, rtol) if C.canonical_dtype(dtype) == "float32" else (2 * atol, 2 * rtol)

    # ------------------------------------------------------------ tuning

    def search_space(self, shape: Shape, dtype: str, hardware: Hardware) -> list[KernelConfig]:
        shape = self.check(shape)
        cands = [
            {k: v for k, v in c.items() if k not in UNFUSED_KEYS}
            for c in CONV2D.search_space(shape, dtype, hardware)
            if not any(c.get(k) for k in UNFUSED_KEYS)
        ]
        if self.residual and not (C.targets_cpu(hardware) or hardware.device == "cpu") and cands:
            # The residual read as one tile copy (`r_shared`) beside the per-element read:
            # after the first config, which the tuner times before the rest, its first
            # three configs that way; fine rounds flip it around the best.
            cands[1:1] = [{**c, "r_shared": 1} for c in cands[:3]]
        return [c for c in C.dedupe(cands) if self.reject_reason(shape, dtype, c, hardware) is None]

    def limits_error(self, shape: Shape, dtype: str, cfg: dict, hw: Hardware) -> str | None:
        return CONV2D.limits_error(shape, dtype, cfg, hw)

    # ------------------------------------------------------------ build

    def schedule(self, shape: Shape, dtype: str, target: str) -> Schedule:
        if C.is_cpu_target(target):
            return self.cpu_schedule
        conv = CONV2D.schedule(shape, dtype, target)  # checks the CUDA dtype
        defaults = {k: v for k, v in conv.defaults.items() if k not in UNFUSED_KEYS}
        if self.residual:
            defaults["r_shared"] = 0  # the residual read per element; 1: as one tile copy
        return Schedule(defaults, functools.partial(_gpu, relu=self.relu, residual=self.residual))

    def config_error(self, shape: Shape, dtype: str, cfg: dict, target: str) -> str | None:
        return CONV2D.config_error(shape, dtype, cfg, target)

    def compile(self, resolved: Any, target: str) -> Callable[..., torch.Tensor]:
        g = geometry(resolved.shape)
        K = g.K
        via = g.nchw and resolved.config.get("via_nhwc")
        x_shape, w_shape, y_shape = tensor_shapes(g._replace(nchw=False) if via else g)
        inputs = [x_shape, w_shape, (K,), (K,)] + ([y_shape] if self.residual else [])
        launcher = C.build_cached(
            self.name,
            resolved.shape,
            resolved.dtype,
            resolved.config,
            target,
            resolved.program,
            out_idx=[len(inputs)],
            input_shapes=inputs,
        )
        return Folded(ViaBn(launcher, g, target) if via else launcher, resolved.dtype)

    # ------------------------------------------------------------ swap-in (a fused pattern)

    functions = ()

    def first(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> Any:
        """An F.conv2d call the conv2d family would route, of one group."""
        route = CONV2D.route(func, args, kwargs, dtype)
        if isinstance(route, str):
            return route
        if len(route.shape) > 10:
            return "grouped convolution"
        x, w, b = arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "weight"), arg(args, kwargs, 2, "bias")
        g = geometry(route.shape)
        out = ((g.N, g.K, g.P, g.Q), x.dtype, x.device)
        return Start(route.shape, out, state={"x": x, "w": w, "b": b, "notes": route.notes})

    def second(self, func: Callable, args: tuple, kwargs: dict, start: Any, held: torch.Tensor) -> Any:
        """F.batch_norm of the held convolution's result in eval form (training=False, the
        running statistics, per-channel tensors of K): conv_bn's fused route; for
        conv_bn_relu, a `Start` that holds the norm's result until the next call."""
        if self.residual and start.state.get("bn") is not None and start.state.get("r") is None:
            return self._add(func, args, kwargs, start, held)
        if start.state.get("bn") is not None:  # the norm (and the add) taken: this is the ReLU
            return self._third(func, args, kwargs, start, held)
        if func is not F.batch_norm or arg(args, kwargs, 0, "input") is not held:
            return None
        mean, var = arg(args, kwargs, 1, "running_mean"), arg(args, kwargs, 2, "running_var")
        weight, bias = arg(args, kwargs, 3, "weight"), arg(args, kwargs, 4, "bias")
        training, eps = arg(args, kwargs, 5, "training", False), float(arg(args, kwargs, 7, "eps", 1e-5))
        K = start.shape[4]
        if training or mean is None or var is None:
            return None
        for t in (mean, var, weight, bias):
            if t is not None and (tuple(t.shape) != (K,) or not t.is_floating_point() or t.device != held.device):
                return None
        bn = (mean, var, weight, bias, eps)
        if self.relu:
            return Start(start.shape, start.out, state={**start.state, "bn": bn})
        return self._route(start, bn)

    def _add(self, func: Callable, args: tuple, kwargs: dict, start: Any, held: torch.Tensor) -> Start | None:
        """The held norm's result plus one other tensor of its size, dtype and device (no
        alpha, no broadcast): in place on the result (`out += identity`), or out of place
        in either order. The other is the kernel's residual, read in the output's layout."""
        if func not in ADD_CALLS or kwargs or len(args) != 2:
            return None
        a, b = args
        if func in INPLACE_ADD and a is not held:
            return None  # written into the other tensor: not the held result's
        other = b if a is held else a if b is held else None
        if (
            not isinstance(other, torch.Tensor)
            or other is held
            or tuple(other.shape) != tuple(held.shape)
            or other.dtype != held.dtype
            or other.device != held.device
        ):
            return None
        return Start(start.shape, start.out, state={**start.state, "r": other})

    def _third(self, func: Callable, args: tuple, kwargs: dict, start: Any, held: torch.Tensor) -> Route | None:
        """The ReLU on the held norm's result, in place or not, and nothing else."""
        if func not in RELU_CALLS or len(args) != 1 or args[0] is not held or any(k != "inplace" for k in kwargs):
            return None
        inplace = func in INPLACE_RELU or bool(kwargs.get("inplace", False))
        return self._route(start, start.state["bn"], inplace=inplace)

    def _route(self, start: Start, bn: tuple, inplace: bool = False) -> Route:
        x, w, b, notes = (start.state[k] for k in ("x", "w", "b", "notes"))
        mean, var, weight, bias, eps = bn
        constant = isinstance(w, torch.nn.Parameter)
        r = start.state.get("r")

        def factors() -> tuple[torch.Tensor, torch.Tensor]:
            return folded(mean, var, weight, bias, eps, b)

        if not is_nchw(start.shape):
            nhwc = x.permute(0, 2, 3, 1)  # a free view of channels_last memory

            # The residual as the kernel reads it: NHWC memory (a copy where it is not).
            r_nhwc = None if r is None else r.permute(0, 2, 3, 1)
            if r is not None and not r_nhwc.is_contiguous():
                notes += ("residual copied to channels_last",)

            def launch(kernel: Callable[..., torch.Tensor]) -> Any:
                w_krsc = DERIVED.get(w, "krsc", _krsc) if constant else _krsc(w.detach())
                y = kernel.run(nhwc, w_krsc, *factors(), r_nhwc).permute(0, 3, 1, 2)
                return (y, y) if inplace else y

        else:
            w_kcrs = w if w.is_contiguous() else DERIVED.get(w, "kcrs", torch.Tensor.contiguous)
            if r is not None and not r.is_contiguous():
                notes += ("residual copied to contiguous NCHW",)

            def launch(kernel: Callable[..., torch.Tensor]) -> Any:
                more = {} if constant or not isinstance(kernel.inner, ViaBn) else {"w_krsc": _krsc(w.detach())}
                y = kernel.run(x.contiguous(), w_kcrs, *factors(), r, **more)
                return (y, y) if inplace else y

        # In place, the ReLU's input (the held norm result) is its output: the router
        # makes the held result the kernel's (`also_first`).
        return Route(start.shape, launch, notes=notes, also_first=inplace)


def _krsc(w: torch.Tensor) -> torch.Tensor:
    return w.permute(0, 2, 3, 1).contiguous()


def _cpu(shape: Shape, dtype: str, cfg: dict[str, Any], relu: bool, residual: bool) -> Any:
    return P.cpu_program(geometry(shape), dtype, cfg, relu, residual)


def _gpu(shape: Shape, dtype: str, cfg: dict[str, Any], relu: bool, residual: bool) -> Any:
    g = geometry(shape)
    if not g.nchw:
        return P.tc_program(g, dtype, cfg, relu, residual)
    if cfg.get("via_nhwc"):
        return P.tc_program(g._replace(nchw=False), dtype, cfg, relu, residual)
    return P.nchw_tc_program(g, dtype, cfg, relu, residual)


FAMILY = ConvBnFamily()
RELU = ConvBnFamily(relu=True)
ADD_RELU = ConvBnFamily(residual=True)

# The registry (evaluator.kernels) registers these, in this order.
FAMILIES = (FAMILY, RELU, ADD_RELU)
