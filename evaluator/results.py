"""Frozen dataclasses passed between the stages, and their (de)serialisation.

In: values produced by the stages. Out: immutable records that turn into plain JSON
dicts (`to_dict`) and back (`from_dict`, validated by pydantic), so a run folder or a
baseline can be reloaded and re-rendered without rerunning anything.

Shapes are tuples of ints; configs are flat dicts of str -> int/str/bool; times are
milliseconds; shares are fractions in [0, 1]; speedup = torch time / TileLang time
(> 1 means TileLang is faster).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import InitVar, dataclass, field
from typing import Any, TypeVar

from pydantic import TypeAdapter

T = TypeVar("T")

SCHEMA_VERSION = 1

Shape = tuple[int, ...]
KernelConfig = dict[str, Any]


def _clean(value: Any) -> Any:
    """JSON has no NaN/Inf: store them as None so files stay standard JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def to_dict(obj: Any) -> dict[str, Any]:
    """A dataclass as a JSON-ready dict (tuples become lists, NaN becomes None)."""
    return _clean(dataclasses.asdict(obj))


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild (and validate) a dataclass from `to_dict` output."""
    return TypeAdapter(cls).validate_python(data)


def to_json(obj: Any) -> str:
    return json.dumps(to_dict(obj), indent=2, sort_keys=False)


def shape_str(shape: Shape) -> str:
    return "x".join(str(int(s)) for s in shape)


def parse_shape(text: str) -> Shape:
    return tuple(int(p) for p in text.lower().replace(",", "x").split("x") if p.strip())


# ---------------------------------------------------------------- model and device


@dataclass(frozen=True)
class ModelSpec:
    """What was evaluated: enough to load the same model again."""

    name: str  # "bert-tiny", "pkg.mod:factory", "path/file.py:factory"
    source: str  # "zoo" | "module" | "file"
    batch_size: int
    seq_len: int | None
    dtype: str  # "float32" | "float16" | "bfloat16"
    parameters: int = 0
    spec_hash: str = ""  # hash of the name, sizes and parameter shapes
    origin: str = ""  # the --model spec as given, when `name` is a stable --name for it


@dataclass(frozen=True)
class Hardware:
    """The device the kernels were compiled for and timed on."""

    target: str  # TileLang target: "c" on CPU, "cuda" on NVIDIA
    device: str  # "cpu" | "cuda"
    name: str  # "NVIDIA H200", or the CPU model
    platform: str  # short slug used in baseline paths: "h200", "cpu-x86_64"
    cores: int = 0  # CPU cores, or streaming multiprocessors on a GPU
    memory_gb: float = 0.0
    smem_per_block: int = 0  # bytes; 0 on CPU
    smem_per_sm: int = 0
    regs_per_block: int = 0
    regs_per_sm: int = 0
    compute_capability: str = ""
    driver: str = ""
    cuda: str = ""
    peak_tflops: float | None = None  # published dense fp16/bf16 peak
    peak_gbps: float | None = None  # published memory bandwidth
    measured_tflops: float | None = None  # a large matmul through PyTorch, this dtype
    measured_gbps: float | None = None  # a large device-to-device copy (read + write)
    ceilings_note: str = ""  # how the measured ceilings were obtained


@dataclass(frozen=True)
class Environment:
    """Versions of everything a measurement depends on (the baseline manifest)."""

    evaluator: str
    python: str
    os: str
    cpu: str
    torch: str
    tilelang: str
    hardware: Hardware


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


@dataclass(frozen=True)
class HotOps:
    device: str
    total_ms: float  # operator time of one forward pass
    ops: tuple[HotOp, ...]  # sorted by time, descending
    selected: tuple[str, ...]  # families chosen for rewriting
    wall_ms: float = 0.0  # wall time of one forward pass


# ---------------------------------------------------------------- kernels


@dataclass(frozen=True)
class Candidate:
    """One tuning candidate: compiled and timed, or the reason it was not."""

    config: KernelConfig
    # "ok" | "rejected" (before compiling) | "compile_error" | "runtime_error" | "wrong"
    # | "crashed" (killed the isolated worker, or hung past the timeout) | "skipped" (budget spent)
    status: str
    latency_ms: float | None = None
    compile_s: float | None = None
    error: str = ""
    phase: str = "coarse"  # "coarse" (the family's grid) or "fine-<round>" (neighbours of the best)
    device: str | None = None  # the device that timed it ("cuda:1") when tuning used several GPUs


@dataclass(frozen=True)
class TunedKernel:
    family: str
    shape: Shape
    dtype: str
    target: str
    config: KernelConfig | None  # None when no candidate worked
    candidates: tuple[Candidate, ...]
    cached: bool = False  # reused from the tuning cache
    tuning_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.config is not None


@dataclass(frozen=True)
class VerifyCase:
    family: str
    shape: Shape
    dtype: str
    seed: int
    max_abs_err: float | None
    max_rel_err: float | None
    atol: float
    rtol: float
    passed: bool
    reason: str = ""  # why it failed ("NaN in output", "all zeros", "mismatch", ...)


@dataclass(frozen=True)
class VerifyResult:
    family: str
    cases: tuple[VerifyCase, ...]

    @property
    def passed(self) -> bool:
        return bool(self.cases) and all(c.passed for c in self.cases)


# ---------------------------------------------------------------- measurement


@dataclass(frozen=True)
class Timing:
    """Repeated measurements of one callable, in milliseconds."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    mean_ms: float
    cv: float  # coefficient of variation (std / mean)
    reps: int
    timer: str = "perf_counter"  # "perf_counter" | "cuda_event" | "cuda_graph" | "profiler"
    unstable: bool = False  # spread still too wide after one re-measurement
    dropped: int = 0  # rounds dropped as disturbed by outside load (interleaved timing)


@dataclass(frozen=True)
class Ratio:
    """Reference time / candidate time from interleaved paired rounds, with a 95%
    bootstrap interval over the rounds (> 1: the candidate is faster)."""

    value: float
    low: float
    high: float
    rounds: int = 0


@dataclass(frozen=True)
class Compiled:
    """`torch.compile` of the PyTorch side, the comparison a team weighs against TileLang:
    timed by the same timer in the same interleaved rounds as the other two sides.

    Optional, so never a gate: where it could not run, `error` says why in one line and
    the other numbers stand. None where a result has none: not asked for
    (--compile-mode none), or a result written before this comparison existed."""

    mode: str  # as --compile-mode names it: "max-autotune" | "default"
    inductor_mode: str = ""  # what torch.compile was given ("max-autotune-no-cudagraphs" on CUDA)
    timing: Timing | None = None  # None: it could not run, or had nothing to compare with (`error`)
    # compiled time / TileLang time, paired per round with a 95% interval (> 1: TileLang is
    # faster); None where either side has no time.
    ratio: Ratio | None = None
    compile_s: float | None = None  # wall seconds of the first calls, which trace, compile and autotune
    error: str = ""  # why it could not run (inductor error, no C++ compiler, a graph break...), one line
    note: str = ""  # what to know about a number that stands (graph breaks, outputs that differ from eager)


@dataclass(frozen=True)
class OpBench:
    family: str
    shape: Shape
    dtype: str
    source: str  # "model" (a shape the model uses) | "standard"
    tilelang: Timing | None
    torch: Timing
    speedup: float | None  # torch median / TileLang median
    flops: float
    bytes: float
    tilelang_tflops: float | None = None
    tilelang_gbps: float | None = None
    torch_tflops: float | None = None
    torch_gbps: float | None = None
    tilelang_roof_pct: float | None = None  # achieved / attainable (roofline at this intensity)
    torch_roof_pct: float | None = None
    config: KernelConfig | None = None
    error: str = ""
    verified: bool = True  # the kernel passed verification before it was timed
    ratio: Ratio | None = None  # speedup with its interval (interleaved rounds)
    # Kernel time per call from torch.profiler (CUPTI) for each side, the cross-check of
    # the graph-replay timer; `timer_note` says where the two disagree beyond noise.
    tilelang_kernel_ms: float | None = None
    torch_kernel_ms: float | None = None
    timer_note: str = ""
    flags: tuple[str, ...] = ()  # "unstable", "faster than the roofline allows", ...
    compiled: Compiled | None = None  # torch.compile of the reference, the third side


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


@dataclass(frozen=True)
class E2EView:
    """One way of timing the model, both sides side by side in interleaved rounds."""

    method: str  # "cuda_graph" (device), "eager" (host path), "kernel_sum" (profiler), "perf_counter" (CPU)
    reference: Timing
    swapped: Timing | None
    ratio: Ratio | None
    note: str = ""


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


@dataclass(frozen=True)
class LaunchOverhead:
    """Host cost of one call at a tiny shape, where the device work is negligible."""

    family: str
    shape: Shape
    tilelang_us: float
    torch_us: float

    @property
    def extra_us(self) -> float:
        return self.tilelang_us - self.torch_us


# ---------------------------------------------------------------- portability


@dataclass(frozen=True)
class PortCell:
    """One kernel config lowered for one target that is not on the machine (portability.py)."""

    family: str
    shape: Shape
    dtype: str
    config_kind: str  # "tuned" | "default"
    target: str  # TargetSpec.key
    status: str  # "lowers" | "needs_retuning" | "fails"
    failure_class: str = ""  # "" | "resources" | "codegen" | "feature" | "numerical"
    reason: str = ""  # one line: the limit broken, or the first meaningful line of the error
    config: KernelConfig | None = None  # what was lowered (None: the family offered no config)
    # A config of the target's own search space that fits and lowers, when `config` does not.
    fitting_config: KernelConfig | None = None
    instruction: str = ""  # matrix instruction in the lowered source: wgmma, mma.sync, tcgen05, mfma, ""
    smem_bytes: int | None = None  # shared memory (LDS) the lowered kernel requests, static + dynamic
    threads: int | None = None  # threads per block of the lowered kernel
    note: str = ""  # caveats that do not change the status (instruction below the target's best...)
    lower_s: float = 0.0  # seconds spent lowering for this cell (0 when every lowering was cached)


@dataclass(frozen=True)
class Portability:
    """The kernel x target matrix: lowered for each target, judged against its published
    limits, never run there."""

    targets: tuple[str, ...]  # keys, in the order asked
    kernels: tuple[str, ...]  # "gemm 4096x4096x4096 float16", in the order given
    cells: tuple[PortCell, ...]
    summary: tuple[str, ...]  # sentences for the report and the terminal
    target_names: dict[str, str] = field(default_factory=dict)  # key -> "AMD Instinct MI300X"
    target_limits: dict[str, str] = field(default_factory=dict)  # key -> TargetSpec.describe()
    target_sources: dict[str, str] = field(default_factory=dict)  # key -> where the limits come from
    tilelang: str = ""
    seconds: float = 0.0  # wall time of the whole check
    lowerings: int = 0  # lowerings actually run (not served from the cache)


# ---------------------------------------------------------------- upstream


# The typed parts of an upstream measurement (evaluator/upstream/ says how each number is
# defined). Dates are ISO strings in UTC, ages and gaps are days as floats; names, e-mails
# and subjects are repository text, kept verbatim: whoever renders them must escape them.


@dataclass(frozen=True)
class RecentCommit:
    sha: str
    date: str
    author: str  # name after .mailmap
    subject: str


@dataclass(frozen=True)
class PathActivity:
    """Commits that touched one path of interest (src/cuda, ...) on the measured branch."""

    exists: bool  # in the tree at the measured head
    commits_30d: int
    commits_90d: int
    commits_365d: int
    authors_90d: int  # people, bots left out
    days_since_last_commit: float | None  # None: never touched
    last_commit_date: str | None
    first_commit_date: str | None


@dataclass(frozen=True)
class UpstreamActivity:
    """What was read, and how busy the branch is: commit series, merged PRs, paths."""

    branch: str  # the branch measured, as resolved ("main", "origin/main", "HEAD (detached)")
    head_date: str  # committer date of the measured head
    as_of_timestamp: str  # the exact as-of instant (a bare date ends at 23:59:59.999999)
    commits_total: int  # every commit reachable from the head (a lower bound when shallow)
    first_commit_date: str
    repo_age_days: float
    weekly_commits: tuple[int, ...]  # 52 weeks, oldest first, the last one ending at as_of
    weekly_commits_start: str  # start of the oldest week
    bot_commits_365d: int
    merged_prs_per_month: dict[str, int]  # "YYYY-MM" -> PRs, the 12 months up to as_of, oldest first
    merged_prs_90d: int
    merged_prs_365d: int
    recent_commits: tuple[RecentCommit, ...]  # the 10 newest, newest first
    paths: dict[str, PathActivity]  # in the order asked


@dataclass(frozen=True)
class AuthorCommits:
    name: str
    commits: int


@dataclass(frozen=True)
class UpstreamAuthors:
    """People (bots left out, keyed by e-mail after .mailmap), shown by their newest name."""

    total: int  # ever (a lower bound when shallow)
    active_365d: int | None  # None: the year reaches past a shallow clone's history
    new_90d: int | None  # first commit in the last 90 days; None when shallow (anyone could look new)
    new_90d_names: tuple[str, ...]
    bus_factor: int | None  # fewest authors making half of the last year's commits
    bus_factor_names: tuple[str, ...]
    top_365d: tuple[AuthorCommits, ...]  # at most 10, most commits first


@dataclass(frozen=True)
class Release:
    tag: str
    date: str  # tagger date (annotated) or the commit's committer date (lightweight)
    commit: str
    annotated: bool


@dataclass(frozen=True)
class UpstreamReleases:
    """Version tags dated at or before as_of, one per commit."""

    tags: tuple[Release, ...]  # oldest first
    count: int
    in_365d: int
    latest_date: str | None
    median_interval_days: float | None  # over the gaps ending in the last 365 days
    other_tags: int  # tags that do not look like a version ("nightly")


@dataclass(frozen=True)
class ForkDrift:
    """A vendor fork against upstream. Only repo, branch and head are known when
    `measured` is False, and `reason` says why; every other field is then None."""

    repo: str
    branch: str
    head: str  # the fork's newest first-parent commit at or before as_of
    measured: bool
    reason: str = ""
    head_date: str | None = None
    days_since_last_commit: float | None = None  # the fork's own newest commit, or its head
    merge_base: str | None = None
    merge_base_date: str | None = None
    merge_base_age_days: float | None = None  # at as_of
    behind: int | None = None  # upstream commits the fork lacks
    ahead: int | None = None  # fork-only commits
    last_sync_commit: str | None = None  # newest upstream commit in the fork
    last_sync_date: str | None = None
    days_behind: float | None = None  # upstream head's date minus the last sync's
    sync_age_days: float | None = None  # at as_of
    missing_releases: tuple[str, ...] = ()  # upstream release tags the fork lacks, oldest first
    missing_release_count: int | None = None
    ahead_commits_90d: int | None = None
    ahead_authors_90d: int | None = None
    last_own_commit_date: str | None = None


@dataclass(frozen=True)
class ScoreInputs:
    """What the maintenance score was computed from (Scorecard "Maintained", commits only)."""

    commits_90d: int  # as counted, a lower bound when shallow
    lookback_days: int
    commits_per_week_for_10: int
    threshold: int
    repo_age_days: float
    young_repository: bool
    rule: str


@dataclass(frozen=True)
class UpstreamCaveats:
    """How far the numbers can be trusted: a shallow clone's limits, and the notes."""

    shallow: bool
    history_horizon: str | None  # date of the newest shallow-boundary commit; None: history complete
    limited: dict[str, str] = field(default_factory=dict)  # metric -> why it is limited
    lower_bounds: dict[str, int] = field(default_factory=dict)  # headline field -> its lower bound
    notes: tuple[str, ...] = ()  # `UpstreamHealth.note`, one sentence each


@dataclass(frozen=True)
class UpstreamHealth:
    """Git-only health of the upstream repository (and a fork, if given)."""

    measured: bool
    repo: str = ""
    as_of: str = ""  # ISO date the metrics are computed at
    head: str = ""
    days_since_last_commit: float | None = None
    commits_30d: int | None = None
    commits_90d: int | None = None
    commits_365d: int | None = None
    authors_90d: int | None = None
    latest_tag: str | None = None
    days_since_release: float | None = None
    maintenance_score: float | None = None
    fork_behind: int | None = None
    fork_ahead: int | None = None
    fork_days_behind: float | None = None
    note: str = ""  # why not measured, or caveats (shallow clone)
    # Typed parts; None when not measured.
    activity: UpstreamActivity | None = None
    authors: UpstreamAuthors | None = None
    releases: UpstreamReleases | None = None
    fork: ForkDrift | None = None  # also None when no fork was given
    score_inputs: ScoreInputs | None = None
    caveats: UpstreamCaveats | None = None
    # Results written before the typed parts existed carry the same numbers as one dict,
    # `details` (its keys in evaluator/upstream/details.py). Accepted when loading, never
    # kept or written: the parts are rebuilt from it, and a part it cannot rebuild (a
    # hand-made or damaged file) stays None.
    details: InitVar[dict[str, Any] | None] = None

    def __post_init__(self, details: dict[str, Any] | None) -> None:
        if not details or not self.measured or self.activity is not None:
            return
        from evaluator.upstream.details import from_details  # noqa: PLC0415 - it imports this module

        for name, part in from_details(details, self.note)._asdict().items():
            object.__setattr__(self, name, part)  # frozen: set once, while being built


# ---------------------------------------------------------------- decision


@dataclass(frozen=True)
class Outcome:
    id: str
    title: str
    severity: str  # "blocker" | "major" | "minor"
    metric: str
    comparator: str  # ">=", "<=", ">", "<", "==", "!="
    threshold: float
    value: float | None
    status: str  # "pass" | "fail" | "not_evaluated" | "waived"
    rationale: str = ""
    evidence: str = ""
    unit: str = ""


@dataclass(frozen=True)
class Verdict:
    decision: str  # "GO" | "CONDITIONAL GO" | "NO-GO"
    checklist: str  # checklist name/path
    outcomes: tuple[Outcome, ...]


@dataclass(frozen=True)
class BaselineRef:
    store: str
    model: str
    platform: str
    version: str
    path: str  # folder inside the store
    commit: str
    tag: str


# ---------------------------------------------------------------- baselines over time


@dataclass(frozen=True)
class Change:
    """One measurement compared between two baselines (times: lower is better)."""

    kind: str  # "op" | "e2e"
    key: str  # e.g. "gemm 256x512x128 float32"
    reference_ms: float | None
    candidate_ms: float | None
    ratio: float | None  # candidate / reference time (> 1 means slower)
    threshold: float  # relative change that counts, from noise and the configured floor
    status: str  # "regression" | "improvement" | "unchanged" | "new" | "gone"


@dataclass(frozen=True)
class Comparison:
    reference: str  # baseline id "<model>/<platform>/<version>"
    candidate: str  # baseline id, or "this run"
    comparable: bool  # False when the timing policies differ
    note: str
    changes: tuple[Change, ...]
    environment_changes: tuple[tuple[str, str, str], ...] = ()  # (field, reference, candidate)

    @property
    def regressions(self) -> tuple[Change, ...]:
        # A measurement that worked before and is gone now (a kernel that stopped
        # compiling, a shape that lost its kernel) is a regression too.
        return tuple(c for c in self.changes if c.status in ("regression", "gone"))


@dataclass(frozen=True)
class TrendPoint:
    version: str
    created: str
    key: str
    median_ms: float


# ---------------------------------------------------------------- the whole run


@dataclass(frozen=True)
class RunResult:
    """Everything one run measured; each stage fills its field, None = not reached."""

    run_id: str
    created: str  # ISO timestamp
    model: ModelSpec
    environment: Environment
    settings: dict[str, Any]
    hot_ops: HotOps | None = None
    tuned: tuple[TunedKernel, ...] = ()
    verify: tuple[VerifyResult, ...] = ()
    op_bench: tuple[OpBench, ...] = ()
    overhead: tuple[LaunchOverhead, ...] = ()
    e2e: E2EBench | None = None
    soak: Soak | None = None
    # The rewritten kernels lowered for other accelerators; None: not checked (--targets
    # none, no kernel rewritten, the stage failed, or a results.json from before it existed).
    portability: Portability | None = None
    upstream: UpstreamHealth | None = None
    comparison: Comparison | None = None  # against the previous baseline
    trend: tuple[TrendPoint, ...] = ()
    verdict: Verdict | None = None
    baseline: BaselineRef | None = None
    stage_errors: dict[str, str] = field(default_factory=dict)
    # Stages that ran to their end (an optional stage whose error is recorded counts), in
    # order, and how long each took: `evaluate --resume` starts after the last of them.
    finished: tuple[str, ...] = ()
    stage_seconds: dict[str, float] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @property
    def families(self) -> tuple[str, ...]:
        return self.hot_ops.selected if self.hot_ops else ()
