"""The whole model: where its time goes, and what the kernels do to it end to end and
over minutes.

In: the profiler's operator table (profiling.py), the model timed with and without the
TileLang kernels swapped in and the router's call counts (bench.py, swap.py), and the
soak. Out: `HotOps` with one `HotOp` per operator family (what was worth rewriting),
`E2EBench` with its timing `E2EView`s, per-shape `CallCount`s and per-family
`FamilyTime`s inside the model, and `Soak` (drift,
memory growth and clocks under sustained load).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# Imported at run time, not only for type checkers: pydantic resolves the annotations
# below in this module's namespace (codec.from_dict).
from .measurement import Compiled, Ratio, Timing

# ---------------------------------------------------------------- profiling


@dataclass(frozen=True)
class HotOp:
    """One operator family's share of the profiled forward pass."""

    family: str  # "gemm", "softmax", ..., or "other"
    time_ms: float  # per forward pass
    share: float  # of the profiled operator time
    calls: int  # per forward pass
    shapes: tuple[str, ...]  # distinct problem shapes, hottest first, e.g. "256x512x128"
    aten_ops: tuple[str, ...]
    has_kernel: bool
    shape_ms: tuple[float, ...] = ()  # time per forward pass of each shape in `shapes`
    shape_calls: tuple[int, ...] = ()  # calls per forward pass of each shape in `shapes`


@dataclass(frozen=True)
class Fusion:
    """A fused family's pattern as one forward pass showed it (swap.fusible): its shapes,
    most calls first, and how many of its results something read after the fused call
    would have consumed them (a pre-norm model's residual sum), which rules a shape out."""

    family: str  # "gemm_gelu", "layernorm_residual", ...
    shapes: tuple[str, ...]  # the shapes where the pattern is fused
    calls: int  # patterns per forward pass at those shapes
    reused: tuple[str, ...] = ()  # shapes seen but left unfused: their first call's result is read again


@dataclass(frozen=True)
class HotOps:
    device: str
    total_ms: float  # operator time of one forward pass
    ops: tuple[HotOp, ...]  # sorted by time, descending
    selected: tuple[str, ...]  # families chosen for rewriting
    wall_ms: float = 0.0  # wall time of one forward pass
    fusions: tuple[Fusion, ...] = ()  # fused families selected with their base family, and where


# ---------------------------------------------------------------- end to end


# The note a fused pattern's first call carries on its own row ("fused into conv_bn_relu");
# every other note is a layout copy.
FUSED_INTO = "fused into "


@dataclass(frozen=True)
class CallCount:
    """What happened to one (family, shape) at the operator during the end-to-end run:
    calls that ran the TileLang kernel, and calls that fell back to PyTorch, by reason."""

    family: str
    shape: str  # problem shape "AxBxC", or "" when the call could not be given one
    tilelang: int
    fallback: dict[str, int] = field(default_factory=dict)  # reason -> calls
    profiled_ms: float = 0.0  # this shape's profiled device time per forward pass
    notes: dict[str, int] = field(default_factory=dict)  # layout work on the way, e.g. "inputs copied to contiguous"

    @property
    def all_fused(self) -> bool:
        """Every call at this shape ran inside another family's fused kernel: this
        family's own kernel ran none of them."""
        fused = sum(n for note, n in self.notes.items() if note.startswith(FUSED_INTO))
        return fused > 0 and self.tilelang == 0 and not self.fallback


@dataclass(frozen=True)
class E2EView:
    """One way of timing the model, both sides side by side in interleaved rounds."""

    method: str  # "cuda_graph" (device), "eager" (host path), "kernel_sum" (profiler), "perf_counter" (CPU)
    reference: Timing
    swapped: Timing | None
    ratio: Ratio | None
    note: str = ""


@dataclass(frozen=True)
class FamilyTime:
    """One family's operator time per forward pass inside the model, from the profiler
    (device time on CUDA, CPU time otherwise): PyTorch's own calls against the routed
    model's, which are its TileLang calls (`tilelang_ms` of it) plus the calls that fell
    back. Unlike the op benchmarks, the inputs are where the model leaves them (in L2)."""

    family: str
    reference_ms: float
    swapped_ms: float
    tilelang_ms: float = 0.0
    # The whole model with only this family routed, against the model as is, timed as the
    # verdict's view (graph replay on CUDA) in interleaved rounds: what this family alone
    # does end to end, device time between kernels included, which the profiled operator
    # time above leaves out. None where one family was routed (the end-to-end ratio is it).
    alone: Ratio | None = None

    @property
    def slows_model(self) -> bool:
        """Routed alone, the model is slower by more than 2%, beyond the interval's noise
        (identical graphs replay within about 1% of each other)."""
        return self.alone is not None and math.isfinite(self.alone.high) and self.alone.high < 0.98

    @property
    def ratio(self) -> float | None:
        return self.reference_ms / self.swapped_ms if self.swapped_ms > 0 and self.reference_ms > 0 else None


@dataclass(frozen=True)
class KeptFamilies:
    """The model with only the routed families that do not slow it down on their own
    (`FamilyTime.slows_model`), against the model as is: the end-to-end number a team
    gets keeping PyTorch's calls where TileLang's make the model slower."""

    families: tuple[str, ...]  # routed
    left: tuple[str, ...]  # left to PyTorch
    ratio: Ratio


@dataclass(frozen=True)
class E2EBench:
    """The model with and without the TileLang kernels swapped in."""

    families: tuple[str, ...]
    reference: Timing
    swapped: Timing | None
    speedup: float | None
    samples_per_s_reference: float
    samples_per_s_swapped: float | None
    max_abs_err: float | None
    outputs_match: bool
    replaced_modules: int = 0
    coverage: float = 0.0  # share of profiled time whose calls actually ran in TileLang
    amdahl_speedup: float | None = None
    error: str = ""
    # The views (graph replay, eager, profiler kernel sum; one interleaved perf_counter
    # view on CPU). `method` names the one `speedup` and the verdict come from.
    views: tuple[E2EView, ...] = ()
    method: str = ""
    ratio: Ratio | None = None  # speedup with its interval
    calls: tuple[CallCount, ...] = ()
    tilelang_calls: int = 0
    fallback_calls: int = 0
    # Output check: relative L2 error and max error relative to max|ref| over every
    # floating-point leaf of the output structure, against the dtype's tolerances.
    rel_l2_err: float | None = None
    rel_max_err: float | None = None
    tolerance: dict[str, float] = field(default_factory=dict)
    flags: tuple[str, ...] = ()  # "unstable", "contradicts the Amdahl estimate", "graph capture failed: ..."
    # Host cost of the operator router itself per forward pass (eager, every call falling
    # back): what routing adds to the eager path before any kernel runs.
    router_overhead_ms: float | None = None
    # The whole model through torch.compile, timed as a third side of the view the verdict
    # uses (graph replay on CUDA, wall clock on CPU); its ratio is compiled / swapped.
    compiled: Compiled | None = None
    # Each routed family's operator time inside the model, both sides profiled the same way.
    in_model: tuple[FamilyTime, ...] = ()
    # Set where some routed families slow the model on their own and others do not.
    kept: KeptFamilies | None = None
    # The output check's non-finite counts per side ({"swapped NaN": 1024, "reference Inf": 3}),
    # and why the reference carries no signal ("" where it does): a match against a
    # (near) zero or constant reference says nothing about the kernels.
    nonfinite: dict[str, int] = field(default_factory=dict)
    no_signal: str = ""
    inputs_redrawn: bool = False  # the first inputs gave no signal; another seed's were used
    # The calls of families not chosen for rewriting, per shape: every one ran in PyTorch.
    # With `calls`, every call a family knows is accounted for.
    not_chosen: tuple[CallCount, ...] = ()


@dataclass(frozen=True)
class FamilyCalls:
    """One family's calls in the checked forward pass: how many ran in TileLang, how many
    in PyTorch, and why those did (reason -> calls, most first)."""

    family: str
    tilelang: int
    pytorch: int
    reasons: tuple[tuple[str, int], ...]
    chosen: bool


def family_calls(e2e: E2EBench) -> tuple[FamilyCalls, ...]:
    """Every family's calls (the chosen ones', then the others'), most calls first."""
    out = []
    for rows, chosen in ((e2e.calls, True), (e2e.not_chosen, False)):
        fams: dict[str, list] = {}
        for c in rows:
            row = fams.setdefault(c.family, [0, 0, {}])
            row[0] += c.tilelang
            for why, n in c.fallback.items():
                row[1] += n
                row[2][why] = row[2].get(why, 0) + n
        out += sorted(
            (
                FamilyCalls(f, t, p, tuple(sorted(r.items(), key=lambda kv: -kv[1])), chosen)
                for f, (t, p, r) in fams.items()
            ),
            key=lambda x: -(x.tilelang + x.pytorch),
        )
    return tuple(out)


# ---------------------------------------------------------------- soak


@dataclass(frozen=True)
class Soak:
    seconds: float
    window_ms: tuple[float, ...]  # median latency per window
    drift: float  # (last - first) / first
    cv: float
    memory_growth_mb: float
    iterations: int
    notes: tuple[str, ...] = ()
    reserved_growth_mb: float | None = None  # CUDA caching allocator, reserved not just allocated
    clocks_mhz: tuple[float, ...] = ()  # SM clock per window (NVIDIA, via nvidia-smi)
    throttle_reasons: tuple[str, ...] = ()  # active clock-throttle reasons seen during the soak
    timer: str = "perf_counter"  # "cuda_graph": each iteration is one graph replay (device time)
    host_cv: float | None = None  # spread of host wall time per iteration (launch jitter), apart from device drift
