"""The base class every kernel family subclasses, and the one build path they share.

In: a problem shape (a tuple of ints whose meaning each family fixes, `shape_names`), a
dtype name, a config dict and a TileLang target. Out: compiled TileLang callables that
take and return torch tensors exactly like the family's PyTorch reference, plus what the
profiling, tuning, verification, benchmark and swap-in stages need (aten ops covered,
search space, flops, bytes, tolerances, the torch functions routed to the kernel).

A family module defines one `KernelFamily` subclass and registers an instance with
`evaluator.kernels.register`; importing the `evaluator.kernels` package imports every
family module in it. Families differ in their program factories and config defaults
(`Schedule`); checking the shape and dtype, filling the config, compiling once per key
and screening configs before compiling (`reject_reason`) are written once, here.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import torch

from ..device import arch as A
from ..errors import KernelError
from ..results import Hardware, KernelConfig, Shape
from . import common as C

# Defined in common (which must not import this module); the rest of the evaluator
# imports them from here, the kernels' public module.
from .common import (  # noqa: F401
    CPU_COMPILE_FLAGS,
    DTYPE_ALIASES,
    DTYPE_BYTES,
    TORCH_DTYPES,
    is_cpu_target,
    torch_dtype,
)

ProgramFactory = Callable[[Shape, str, dict], Any]  # (shape, dtype, merged config) -> TileLang PrimFunc


@dataclass(frozen=True)
class Schedule:
    """One way to compute a family on one kind of target: the config keys it takes, with
    their defaults (a config may give any subset; an unknown key is an error), and the
    factory that writes the TileLang program for a shape, dtype and full config."""

    defaults: Mapping[str, Any]
    program: ProgramFactory


class Resolved(NamedTuple):
    """A request checked and filled in: what `build` compiles and `program` returns."""

    shape: Shape
    dtype: str  # canonical name, e.g. "float16"
    config: dict  # the schedule's defaults, the request's config, then the kernel parameters
    program: Callable[[], Any]  # makes the PrimFunc (parsing it costs time: only when needed)


class KernelFamily(abc.ABC):
    """What the pipeline needs from one operator family.

    Required: `name`, `title`, `shape_names` and the abstract methods below. Everything
    else has a default that suits a family with one aten op per call and no kernel
    parameters; override only what differs.
    """

    name: str  # registry key, e.g. "gemm"
    title: str  # for reports, e.g. "GEMM / linear (+bias)"
    shape_names: tuple[str, ...]  # meaning of the shape tuple, e.g. ("M", "N", "K")
    # How many of the last shape_names may be left out (a layout: conv2d's nchw,
    # attention's row pitches), for the command line's message on a wrong count.
    optional_dims: int = 0
    # Profiled aten ops this family covers, e.g. {"aten::addmm"}. Profiling maps ops to
    # families from these alone; a fused variant has none (see `profile_family`).
    aten_ops: frozenset[str] = frozenset()
    # Kernel parameters that are neither tuned nor part of the shape (LayerNorm's eps):
    # compiled into the program, taken from the call at swap-in; these are the defaults.
    params: Mapping[str, float] = MappingProxyType({})
    # Integer config keys that are switches (0/1): the tuner's fine rounds flip them
    # (`tuning.search.neighbours`), as they flip bools.
    fine_flags: tuple[str, ...] = ()
    # The torch functions the router (evaluator.routing.router) hands to `route`. Empty for fused
    # variants: their pattern is two calls, and the first has run before the second is seen.
    functions: tuple = ()
    # A fused family's pattern is two torch calls (or more: `second`): a first whose result
    # only a second reads (gemm_gelu: an F.linear, then F.gelu on its output). `fuses` are the functions a
    # pattern starts with; the router holds such a call back (evaluator.routing.router.Router) and
    # runs the fused kernel when `second` says the next call on its result completes it.
    fuses: tuple = ()
    # The second call's aten op, whose PyTorch time the fused kernel also replaces.
    fused_op: str = ""
    # Whether the second may also be written out as elementwise calls (`ends_chain`).
    chains: bool = False
    # The profile families (of ops without a kernel, profiling.profile.OTHER_FAMILIES and
    # "elementwise") of the calls a fused kernel takes in beside its base call, one entry
    # a call: conv_bn_add_relu's batch norm, residual add and ReLU. End-to-end coverage
    # credits each fused call with their time (routing.router.coverage), since they ran
    # in TileLang too.
    absorbs: tuple[str, ...] = ()
    # The schedules `schedule` picks from by default; a family whose choice depends on
    # the dtype or the config overrides `schedule` instead.
    cpu_schedule: Schedule | None = None
    gpu_schedule: Schedule | None = None

    @property
    def profile_family(self) -> str:
        """The profiled family whose shapes this one takes: itself, or for a fused variant
        with no aten op of its own the family it extends (gemm_gelu -> gemm)."""
        return self.name

    @property
    def awkward_dims(self) -> tuple[str, ...]:
        """The dims `awkward_shape` moves off every tile multiple; flags, strides and a
        head dim that feeds the tensor cores stay as they are."""
        return self.shape_names

    # ------------------------------------------------------------ required

    @abc.abstractmethod
    def standard_shapes(self, device: str) -> list[Shape]:
        """3-5 representative shapes (small, medium, large, one with awkward tails)."""

    @abc.abstractmethod
    def make_inputs(self, shape: Shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
        """Inputs for `reference` and the built kernel; the same seed gives the same tensors on every device."""

    @abc.abstractmethod
    def reference(self, *inputs: torch.Tensor) -> torch.Tensor:
        """PyTorch's own result (what the vendor library computes): one tensor, or a tuple
        where the calls a fused kernel replaces return several (add_layernorm's norm and
        sum); the kernel then returns the same tuple."""

    @abc.abstractmethod
    def search_space(self, shape: Shape, dtype: str, hardware: Hardware) -> list[KernelConfig]:
        """Candidate configs, best guess first, already filtered to those that fit the device."""

    @abc.abstractmethod
    def flops(self, shape: Shape) -> float: ...

    @abc.abstractmethod
    def bytes(self, shape: Shape, dtype: str) -> float:
        """Minimum bytes moved to and from memory."""

    @abc.abstractmethod
    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        """(atol, rtol) for comparing against `reference` (may depend on the shape, e.g. K)."""

    @abc.abstractmethod
    def input_shapes(self, shape: Shape) -> list[tuple[int, ...]]:
        """The shapes of the tensors the compiled kernel takes, in order (its output follows them)."""

    # ------------------------------------------------------------ optional, with defaults

    def covers(self, op: str, input_shapes: Sequence[Sequence[int]] = ()) -> bool:
        """Whether a profiled call of aten `op` is this family's (the shapes let a family
        claim an op only in some forms, as gemm does aten::matmul with a 2-D weight)."""
        return op in self.aten_ops

    def problem_shape(
        self,
        op: str,
        input_shapes: Sequence[Sequence[int]],
        concrete_inputs: Sequence[Any] | None = None,
        input_strides: Sequence[Sequence[int]] | None = None,
    ) -> Shape | None:
        """The family's problem shape for one profiled call of aten `op`, or None when the
        kernel does not compute that call. `concrete_inputs` holds the call's scalar
        arguments (attention's is_causal, a convolution's stride) and `input_strides` its
        tensors' strides (a convolution's memory layout) where the profiler recorded
        them. Default: None (a family with no aten op of its own)."""
        return None

    def layout_free(self, shape: Shape) -> Shape:
        """`shape` without the fields that say how the operands lie in memory (a
        convolution's NCHW flag, attention's row pitches): what a profiler that records
        no strides can still see, so its shape can be matched to the one the route sees
        (`profiling.profile_model`). Default: the whole shape."""
        return tuple(shape)

    def awkward_shape(self, shape: Shape) -> Shape:
        """A shape near `shape` that is not a multiple of any tile, for verification:
        each of `awkward_dims` moved to a size that is not a multiple of 16."""
        shape = self.check(shape)
        moved = set(self.awkward_dims)
        return tuple(C.awkward(d) if n in moved else d for n, d in zip(self.shape_names, shape))

    # A row alignment (in elements) some of the family's schedules need (TMA rows are
    # 16-byte aligned); 0 = none. Such a family's awkward shapes add one with tails at
    # that alignment, for the configs that refuse unaligned rows.
    awkward_align = 0
    # Dims some of the family's configs need whole (conv2d's a_copy reads whole channel
    # chunks): its awkward shapes end with one that keeps them at the model's size.
    awkward_kept: tuple[str, ...] = ()

    def awkward_shapes(self, shape: Shape) -> list[Shape]:
        """Shapes near `shape` that no tile divides, most awkward first; verify checks
        the first one a config accepts. With `awkward_align`, the second keeps each moved
        dim a multiple of it but not of 16, so a schedule that needs aligned rows still
        meets tails in every dim. Then the same below the model's size (and aligned), for
        schedules that bound a dim. Last, with `awkward_kept`, the first with those dims at
        the model's size, for configs that need them whole."""
        awk = self.awkward_shape(shape)
        moved, a = set(self.awkward_dims), self.awkward_align
        # The same distance below the model's size, for a config whose schedule bounds a
        # dim at the size it was tuned for (conv2d's stream keeps C <= 128 in one tile: a
        # model's C of 128 has tails only below it).
        below = tuple(
            C.awkward_below(d, 2 * d - w) if n in moved and w > d else w
            for n, d, w in zip(self.shape_names, tuple(shape) + awk[len(shape) :], awk)
        )
        try:
            below = self.check(below) if below != awk else awk
        except KernelError:  # too small to be a problem of this family (a filter wider than H)
            below = awk
        kept = [self.kept_shape(shape)] if self.awkward_kept else []
        if not a:
            return [awk] + ([below] if below != awk else []) + kept

        def aligned(d: int) -> int:
            up = C.round_up(d, a)
            return up + a if up % 16 == 0 else up

        def aligned_below(d: int) -> int:
            down = d // a * a
            return down - a if down % 16 == 0 else down

        out = [awk, tuple(aligned(d) if n in moved else d for n, d in zip(self.shape_names, awk))]
        if below != awk:
            names = self.shape_names
            out += [below, tuple(max(a, aligned_below(d)) if n in moved else d for n, d in zip(names, below))]
        return out + kept

    def kept_shape(self, shape: Shape) -> Shape:
        """The awkward shape with the `awkward_kept` dims at the model's size."""
        awk = self.awkward_shape(shape)
        full = tuple(shape) + awk[len(shape) :]
        return tuple(d if n in self.awkward_kept else w for n, d, w in zip(self.shape_names, full, awk))

    def route(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> Any:
        """One call of one of `functions` as a `swap.Route` (problem shape, kernel
        parameters, launch), or a one-line reason it stays in PyTorch."""
        return f"{self.name} takes over no torch function"

    def owns(self, func: Callable, args: tuple, kwargs: dict) -> bool:
        """Whether this call of one of `functions` is this family's, where several families
        take the same function (torch.matmul: gemm's by a 2-D weight, bmm's when batched).
        The router asks in registry order; the first owner routes it. Default: yes."""
        return True

    # True where `first` gives every instance that starts patterns the same answer (conv_bn's
    # three variants, gemm's fused epilogues): the router asks one family of the class per
    # call and gives the others its answer.
    first_by_class = False

    def first(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> Any:
        """A call of one of `fuses` as a `swap.Start` (the fused problem shape, what the call
        returns, what the second call needs from it), or a one-line reason it cannot start
        this family's pattern."""
        return f"{self.name} fuses no pattern"

    def second(self, func: Callable, args: tuple, kwargs: dict, start: Any, held: torch.Tensor) -> Any:
        """The call that completes the pattern `start` began, as the fused kernel's
        `swap.Route`, or None when this call (which reads `held`, the first call's held-back
        result) is not this family's second. A longer pattern (conv_bn_relu, conv_bn_add_relu)
        answers a call that goes on with a `swap.Start` (what the call returns, what the
        rest needs): the router holds that call too, and asks `second` again with the next
        call on its result and that Start."""
        return None

    def ends_chain(self, probe: torch.Tensor, result: torch.Tensor, start: Any) -> Any:
        """Where the held result went through a chain of elementwise calls instead of one
        second call: `result` is that chain replayed on `probe` (fp32 values across the
        activation's range). The fused kernel's `swap.Route` when the chain computes this
        family's second, else None."""
        return None

    def check(self, shape: Sequence[int]) -> Shape:
        """The shape as ints, or KernelError saying what a valid shape is."""
        return C.check_shape(shape, self.shape_names, self.name)

    def schedule(self, shape: Shape, dtype: str, target: str) -> Schedule:
        """The schedule that builds (shape, dtype) for `target`, or KernelError saying why
        there is none. Default: `cpu_schedule` on a CPU target, `gpu_schedule` otherwise."""
        on_cpu = is_cpu_target(target)
        found = self.cpu_schedule if on_cpu else self.gpu_schedule
        if found is None:
            raise KernelError(f"{self.name}: no {'CPU' if on_cpu else 'GPU'} schedule (target '{target}')")
        return found

    def config_error(self, shape: Shape, dtype: str, config: dict, target: str) -> str | None:
        """Why a filled-in config cannot be built for `target` at all (checked by `build`
        and `reject_reason` alike), or None."""
        return None

    def needs(self, shape: Shape, dtype: str, config: dict) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The hardware features a filled-in config's program uses, as (what, features)
        pairs: ("pingpong", ("wgmma", "tma", "setmaxnreg")). `device.arch.unsupported`
        decides whether a target has them, for `resolve` (a target string) and
        `reject_reason` (a Hardware record) alike. Default: none beyond the kind's own."""
        return ()

    def feature_error(self, shape: Shape, dtype: str, config: dict, where: Any) -> str | None:
        """Why `where` (a target string or a Hardware record) lacks a feature the config's
        program uses (`needs`), or None."""
        for what, features in self.needs(shape, dtype, config):
            why = A.unsupported(what, features, where)
            if why:
                return why
        return None

    def limits_error(self, shape: Shape, dtype: str, config: dict, hardware: Hardware) -> str | None:
        """Why a buildable config cannot launch on this device (shared memory, stack,
        threads over its limits), or None. Only `reject_reason` asks: `build` compiles
        what it is given, so a lowering test can still inspect such a program."""
        return None

    # ------------------------------------------------------------ the shared build path

    def resolve(self, shape: Sequence[int], dtype: str, config: KernelConfig | None, target: str) -> Resolved:
        """Check the shape and dtype, pick the schedule, fill the config from its defaults
        (kernel parameters ride along in the config) and check it: a KernelError here
        costs no compile."""
        shape = self.check(shape)
        dtype = C.canonical_dtype(dtype)
        C.check_dtype_for_target(self.name, dtype, target)
        sched = self.schedule(shape, dtype, target)
        config = dict(config or {})
        params = {k: float(config.pop(k, v)) for k, v in self.params.items()}
        cfg = C.merge_config(dict(sched.defaults), config, self.name)
        error = self.config_error(shape, dtype, cfg, target) or self.feature_error(shape, dtype, cfg, target)
        if error:
            raise KernelError(f"{self.name}: {error}")
        cfg.update(params)
        return Resolved(shape, dtype, cfg, lambda: sched.program(shape, dtype, cfg))

    def program(self, shape: Shape, dtype: str, config: KernelConfig, target: str) -> Any:
        """The TileLang PrimFunc `build` compiles (for inspection and lowering tests)."""
        return self.resolve(shape, dtype, config, target).program()

    def build(self, shape: Shape, dtype: str, config: KernelConfig, target: str) -> Callable[..., torch.Tensor]:
        """Compile for `target` (once per process and key); the callable takes `make_inputs` tensors."""
        return self.compile(self.resolve(shape, dtype, config, target), target)

    def compile(self, resolved: Resolved, target: str) -> Callable[..., torch.Tensor]:
        inputs = self.input_shapes(resolved.shape)
        return C.build_cached(
            self.name,
            resolved.shape,
            resolved.dtype,
            resolved.config,
            target,
            resolved.program,
            out_idx=[len(inputs)],
            input_shapes=inputs,
        )

    def reject_reason(self, shape: Shape, dtype: str, config: KernelConfig, hardware: Hardware) -> str | None:
        """Why `config` cannot run on `hardware`, or None; checked without compiling, so the
        tuner asks before each candidate (including the neighbours it invents) and records
        a reason as "rejected", search spaces offer only configs it passes, and the
        portability matrix judges each cell by it: one answer to "can this config run
        there" (the target's features, then the family's limits against the record's)."""
        try:
            r = self.resolve(shape, dtype, config, hardware.target or "c")  # no target recorded: the C backend
        except KernelError as exc:
            return str(exc)
        # A record naming the kind only ("cuda") is judged by its compute capability.
        error = self.feature_error(r.shape, r.dtype, r.config, hardware) or self.limits_error(
            r.shape, r.dtype, r.config, hardware
        )
        return f"{self.name}: {error}" if error else None
