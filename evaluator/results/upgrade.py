"""An upgrade rehearsal: the model's kernels under the current TileLang and a candidate.

In: what `evaluate upgrade` measured per kernel in the two toolchains' worker processes
(evaluator/upgrade/). Out: `Toolchain` (an interpreter and the versions it brings, or why
its worker did not start), `UpgradeSide` (one kernel under one toolchain: built or not,
verified or not, its time and PyTorch's in that process), `UpgradeKernel` (both sides, the
speed ratio candidate/current with its interval, PyTorch's own ratio as the control, and
what that makes of the kernel), `UpgradeVerdict` and `UpgradeResult`, the whole rehearsal
(upgrade.json in its folder, what the upgrade page renders).

A speed ratio here is the current toolchain's time over the candidate's (above 1: the
candidate is faster), as every ratio in a result is the reference's time over the one
being judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Imported at run time: pydantic resolves these annotations in this module (codec.from_dict).
from .codec import KernelConfig, Shape
from .environment import Hardware, ModelSpec
from .kernels import VerifyResult
from .measurement import Ratio, Timing

# UpgradeSide.status: what became of one kernel under one toolchain.
SIDE_OK = "ok"  # built, verified on every case, readied for timing
SIDE_FAILURES = {
    "not_started": "the toolchain's worker did not start",
    "compile_error": "does not build",
    "wrong": "fails verification",
    "runtime_error": "fails at run time",
    "crashed": "crashed or hung its worker",
    "not_run": "built, not run: this interpreter cannot run on the device",
}

# UpgradeKernel.status, worst first: what the pair of sides makes of a kernel.
KERNEL_STATUSES = ("broken", "wrong", "slower", "not_compared", "current_fails", "same", "faster")


@dataclass(frozen=True)
class Toolchain:
    """One Python interpreter and the TileLang it brings."""

    role: str  # "current" | "candidate"
    python: str  # the interpreter as given (--toolchain), or this one's
    executable: str = ""  # sys.executable as its worker reported it
    python_version: str = ""
    torch: str = ""
    tilelang: str = ""
    error: str = ""  # why its worker did not start; "" once it did


@dataclass(frozen=True)
class UpgradeSide:
    """One kernel under one toolchain, in that toolchain's worker process."""

    status: str  # SIDE_OK or a key of SIDE_FAILURES
    error: str = ""  # the first line of what went wrong
    build_s: float | None = None
    verify: VerifyResult | None = None
    tilelang: Timing | None = None  # the kernel's time, in the interleaved rounds
    torch: Timing | None = None  # PyTorch's reference, in the same rounds and process
    speedup: Ratio | None = None  # PyTorch's time / TileLang's, paired per round in this process

    @property
    def builds(self) -> bool:
        return self.status not in ("not_started", "compile_error")

    @property
    def verified(self) -> bool:
        return self.status == SIDE_OK


@dataclass(frozen=True)
class UpgradeKernel:
    family: str
    shape: Shape
    dtype: str
    source: str  # "model" | "standard", as in OpBench
    config: KernelConfig  # tuned under the current toolchain; both sides build this one
    current: UpgradeSide
    candidate: UpgradeSide
    status: str  # one of KERNEL_STATUSES
    # The current toolchain's TileLang time / the candidate's, paired per round (> 1: the
    # candidate is faster); None where either side has no time.
    speed: Ratio | None = None
    # PyTorch's time in the current process / in the candidate's: the same code on both
    # sides (where the interpreters share a torch), so its distance from 1 is what the two
    # processes differ by apart from TileLang.
    control: Ratio | None = None
    tolerance: float | None = None  # the slow-down that counts: the threshold or the control's drift
    note: str = ""  # why the status, in one line


@dataclass(frozen=True)
class UpgradeVerdict:
    decision: str  # "SAFE" | "REGRESSIONS" | "BROKEN" | "INCONCLUSIVE"
    reasons: tuple[str, ...] = ()  # one line each: what made the decision


@dataclass(frozen=True)
class UpgradeResult:
    run_id: str
    created: str  # ISO timestamp
    model: ModelSpec
    hardware: Hardware
    current: Toolchain
    candidate: Toolchain
    kernels: tuple[UpgradeKernel, ...]
    verdict: UpgradeVerdict
    threshold: float  # --regression-threshold
    timing: dict[str, Any] = field(default_factory=dict)  # the policy, as TimingPolicy.describe says it
    placement: str = ""  # how the two sides were timed against each other, in one sentence
    baselines: dict[str, str] = field(default_factory=dict)  # role -> baseline id
    baseline_error: str = ""  # why the pair was not recorded
    families: tuple[str, ...] = ()  # the families rewritten
    seconds: float = 0.0  # wall time of the whole rehearsal
