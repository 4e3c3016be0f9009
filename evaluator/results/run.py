"""One run as a whole: every stage's record in one `RunResult`, and what was decided
and kept from it.

In: the records the stages make (environment.py, model.py, kernels.py, upstream.py) and
the run's settings. Out: `RunResult`, the one value pipeline.run passes from stage to
stage and writes as results.json (a baseline's result.json); the go/no-go `Verdict`
with one `Outcome` per checklist item; the baseline it was stored as (`BaselineRef`);
and the comparison with the previous baseline (`Comparison` of `Change`s) and the
`TrendPoint`s across versions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Imported at run time, not only for type checkers: pydantic resolves RunResult's
# annotations in this module's namespace (codec.from_dict).
from .codec import SCHEMA_VERSION
from .environment import Environment, ModelSpec
from .kernels import LaunchOverhead, OpBench, Portability, TunedKernel, VerifyResult
from .model import E2EBench, HotOps, Soak
from .upstream import UpstreamHealth

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
    decision: str  # "GO" | "CONDITIONAL GO" | "NO-GO" | "INCONCLUSIVE"
    checklist: str  # checklist name/path
    outcomes: tuple[Outcome, ...]
    # INCONCLUSIVE: why the evidence cannot carry a decision, and what to rerun and how.
    inconclusive: tuple[str, ...] = ()
    rerun: tuple[str, ...] = ()


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
