"""One kernel under two toolchains, side by side: built, verified and timed in both.

In: a tuned kernel (family, shape, dtype, config, target, device, where its shape came
from), the two toolchains' workers (toolchain.py), the seeds, the timing policy and the
regression threshold. Out: an `UpgradeKernel` — each side's build, verification and
times, the speed ratio candidate/current (the current toolchain's TileLang time over the
candidate's, with its 95% interval), PyTorch's ratio between the two processes as the
control, and the kernel's status (see `judge`).

How the two are timed: two TileLang versions cannot load into one process, so each side
runs in its own worker, and the parent interleaves them. Every round takes one sample of
four sides, the order reversed every other round: the kernel under the current
toolchain, under the candidate, and PyTorch's reference in each of the two processes.
The samplers are the measuring timer's own, made in each worker (graph replay on CUDA,
host rounds of at least `sample_ms_cpu` on a CPU), and the rounds go through the same
`time_sides` as every other comparison: disturbed rounds dropped on a CPU, a spread over
the policy's limit measured once more and flagged if it stays. Only one process runs at
a time, so the two sides never compete for the device; a drift in the machine's load
hits both sides alike, which timing each toolchain in a run of its own would not ensure.
PyTorch's reference is the same code in both processes: its ratio shows how far the two
processes differ for reasons other than TileLang, and a kernel counts as slower only by
more than that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..measuring.timing import Sides, TimingPolicy, time_sides
from ..results import KernelConfig, Ratio, Shape, UpgradeKernel, UpgradeSide, VerifyResult, from_dict
from .side import HANDLER_MODULE
from .toolchain import CHECK_TIMEOUT_S, SAMPLE_TIMEOUT_S, ToolchainWorker

PLACEMENT = (
    "each toolchain in its own worker process, the same timer in both, their samples interleaved round by "
    "round (order alternating) with PyTorch's reference sampled in each process as the control"
)


@dataclass(frozen=True)
class Kernel:
    """What is compared: one tuned kernel."""

    family: str
    shape: Shape
    dtype: str
    config: KernelConfig
    source: str = "model"


class SideFailed(Exception):
    """A worker could not give a sample: its role and the answer it gave instead."""

    def __init__(self, role: str, answer: dict[str, Any]):
        super().__init__(answer.get("error", ""))
        self.role, self.answer = role, answer


class _Remote:
    """One side's sampler, living in a worker: each sample is one request."""

    def __init__(self, worker: ToolchainWorker, side: int):
        self.worker, self.side = worker, side

    def sample(self) -> float:
        answer = self.worker.ask(
            {"handler": (HANDLER_MODULE, "sample"), "side": self.side},
            timeout_s=SAMPLE_TIMEOUT_S,
            what="a timing sample",
        )
        if answer.get("status") != "ok":
            raise SideFailed(self.worker.role, answer)
        return float(answer["ms"])


def _side(answer: dict[str, Any]) -> UpgradeSide:
    verify = from_dict(VerifyResult, answer["verify"]) if answer.get("verify") else None
    status = answer.get("status", "runtime_error")
    return UpgradeSide(
        status=status, error=_first_line(answer.get("error", "")), build_s=answer.get("build_s"), verify=verify
    )


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0][:300] if (text or "").strip() else ""


def time_both(
    current: ToolchainWorker,
    candidate: ToolchainWorker,
    device: str,
    policy: TimingPolicy,
    readied: tuple[dict[str, Any], dict[str, Any]] = ({}, {}),
) -> Sides:
    """The four sides in interleaved rounds: current TileLang, candidate TileLang, current
    PyTorch, candidate PyTorch. `readied`: each worker's answer to `check`, naming its
    samplers' timers and notes. Raises SideFailed when a worker stops answering samples."""

    def made(worker: ToolchainWorker, answer: dict[str, Any], side: int) -> tuple:
        timers, notes = answer.get("timers") or ["", ""], answer.get("notes") or ["", ""]
        return (_Remote(worker, side), timers[side], notes[side])

    cur, cand = readied
    sides = [made(current, cur, 0), made(candidate, cand, 0), made(current, cur, 1), made(candidate, cand, 1)]
    return time_sides(sides, device, policy)


def judge(
    current: UpgradeSide, candidate: UpgradeSide, speed: Ratio | None, tolerance: float, unstable: bool = False
) -> tuple[str, str]:
    """(status, why) of one kernel from its two sides:

    current_fails  the current toolchain does not build or verify it: not the upgrade's doing
    broken         the candidate does not build it (or its worker did not start)
    wrong          the candidate builds it, and it fails verification, fails at run time
                   or crashes its worker
    not_compared   both built, but there is no speed ratio (the candidate cannot run on
                   this device, or timing failed), or it would be slower and a timing it
                   rests on stayed unstable after re-measurement (`unstable`): a deciding
                   number that is flagged makes no regression, it asks for a rerun
    slower         the ratio is below 1 - tolerance and its interval lies wholly below 1
    faster         the ratio is above 1 + tolerance and its interval lies wholly above 1
    same           anything else: no change beyond the noise
    """
    if not current.verified:
        return "current_fails", f"the current toolchain: {current.error or current.status}"
    if not candidate.builds or (candidate.status == "crashed" and candidate.build_s is None):
        return "broken", candidate.error or candidate.status
    if not candidate.verified:
        return ("not_compared" if candidate.status == "not_run" else "wrong"), candidate.error or candidate.status
    if speed is None or not math.isfinite(speed.value):
        return "not_compared", "no speed ratio: the timing failed"
    if speed.value < 1 - tolerance and speed.high < 1:
        if unstable:
            return "not_compared", (
                f"{speed.value:.3g}x, but its timing stayed unstable after re-measurement: rerun on a quieter machine"
            )
        return "slower", f"{speed.value:.3g}x, beyond the {tolerance:.0%} that counts"
    if speed.value > 1 + tolerance and speed.low > 1:
        return "faster", f"{speed.value:.3g}x, beyond the {tolerance:.0%} that counts"
    return "same", f"within {tolerance:.0%}"


def tolerance_from(threshold: float, control: Ratio | None) -> float:
    """The slow-down that counts: the threshold, or PyTorch's own drift between the two
    processes where that is larger (the processes differ by that much without TileLang)."""
    if control is None or not math.isfinite(control.value) or control.value <= 0:
        return threshold
    return max(threshold, abs(1.0 - control.value))


def compare_kernel(
    k: Kernel,
    current: ToolchainWorker,
    candidate: ToolchainWorker,
    *,
    target: str,
    device: str,
    seeds: tuple[int, ...],
    policy: TimingPolicy,
    threshold: float,
) -> UpgradeKernel:
    """Build and verify `k` in both workers, time it in both where both verified, judge it."""
    request = {
        "handler": (HANDLER_MODULE, "check"),
        "family": k.family,
        "shape": list(k.shape),
        "dtype": k.dtype,
        "config": dict(k.config),
        "target": target,
        "device": device,
        "seeds": list(seeds),
        "policy": {f: getattr(policy, f) for f in policy.__dataclass_fields__},
    }
    what = f"{k.family} {'x'.join(map(str, k.shape))}"
    answers = tuple(w.ask(request, timeout_s=CHECK_TIMEOUT_S, what=what) for w in (current, candidate))
    sides = [_side(a) for a in answers]
    speed = control = None
    note = ""
    unstable = False
    if all(s.verified for s in sides):
        try:
            t = time_both(current, candidate, device, policy, answers)
        except SideFailed as failed:
            i = 0 if failed.role == "current" else 1
            answer = failed.answer
            sides[i] = UpgradeSide(
                status=answer.get("status", "runtime_error"),
                error=_first_line(f"while timing: {answer.get('error', '')}"),
                build_s=sides[i].build_s,
                verify=sides[i].verify,
            )
        else:
            sides = [
                _timed(sides[0], t.timings[0], t.timings[2], t.ratio(2, 0)),
                _timed(sides[1], t.timings[1], t.timings[3], t.ratio(3, 1)),
            ]
            speed, control = t.ratio(0, 1), t.ratio(2, 3)
            unstable = any(x.unstable for x in t.timings)
            if unstable:
                note = "unstable timing"
    tol = tolerance_from(threshold, control)
    status, why = judge(sides[0], sides[1], speed, tol, unstable)
    if status == "not_compared" and unstable:
        note = ""  # the reason says it
    return UpgradeKernel(
        family=k.family,
        shape=tuple(k.shape),
        dtype=k.dtype,
        source=k.source,
        config=dict(k.config),
        current=sides[0],
        candidate=sides[1],
        status=status,
        speed=speed,
        control=control,
        tolerance=tol if speed is not None else None,
        note="; ".join(x for x in (why, note) if x),
    )


def _timed(side: UpgradeSide, tl, torch, speedup: Ratio) -> UpgradeSide:
    return UpgradeSide(
        status=side.status,
        error=side.error,
        build_s=side.build_s,
        verify=side.verify,
        tilelang=tl,
        torch=torch,
        speedup=speedup,
    )
