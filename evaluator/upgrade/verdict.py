"""The upgrade's verdict from its kernels, and the exit code `--fail-on` makes of it.

In: the candidate toolchain (did its worker start?) and every kernel's `UpgradeKernel`.
Out: `UpgradeVerdict` — the decision and one line per reason — and `exit_code`.

The rules, first match wins:

  BROKEN        the candidate's worker did not start (its TileLang does not import, the
                interpreter is not Python...), or a kernel that builds and verifies under
                the current toolchain does not build, fails verification or at run time,
                or crashes its worker under the candidate
  REGRESSIONS   a kernel is slower under the candidate beyond the noise: its speed ratio
                below 1 - tolerance with the whole 95% interval below 1 (the tolerance is
                --regression-threshold, or PyTorch's own drift between the two processes
                where that is larger)
  INCONCLUSIVE  nothing could be compared: no kernel rewritten, every kernel failing under
                the current toolchain too, one that builds under the candidate but was
                not run or timed (an interpreter whose torch cannot reach the device), or
                one that would be slower but whose timing stayed unstable after
                re-measurement (a flagged deciding number asks for a rerun)
  SAFE          every kernel builds, verifies and is timed under both, none slower

Kernels the current toolchain fails are listed and left out of the decision: they say
nothing about the upgrade. `--fail-on` as a CI gate: `broken` exits 1 on BROKEN,
`regressions` on REGRESSIONS or BROKEN, and INCONCLUSIVE counts as BROKEN (a gate never
passes on no evidence); `never` exits 0.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..results import Toolchain, UpgradeKernel, UpgradeVerdict, shape_str

DECISIONS = ("SAFE", "REGRESSIONS", "BROKEN", "INCONCLUSIVE")
FAIL_ON = ("never", "regressions", "broken")
# How bad each decision is for the gate: INCONCLUSIVE is as bad as BROKEN.
_SEVERITY = {"SAFE": 0, "REGRESSIONS": 1, "BROKEN": 2, "INCONCLUSIVE": 2}
_GATE = {"never": 99, "regressions": 1, "broken": 2}


def _name(k: UpgradeKernel) -> str:
    return f"{k.family} {shape_str(k.shape)}"


def decide(candidate: Toolchain, kernels: tuple[UpgradeKernel, ...] | list[UpgradeKernel]) -> UpgradeVerdict:
    if candidate.error:
        return UpgradeVerdict("BROKEN", (f"the candidate toolchain does not start: {candidate.error}",))
    broken = [k for k in kernels if k.status in ("broken", "wrong")]
    if broken:
        return UpgradeVerdict(
            "BROKEN",
            tuple(
                f"{_name(k)}: {'does not build' if k.status == 'broken' else 'fails'} under the candidate: "
                f"{k.candidate.error or k.candidate.status}"
                for k in broken
            ),
        )
    slower = [k for k in kernels if k.status == "slower"]
    if slower:
        return UpgradeVerdict(
            "REGRESSIONS",
            tuple(
                f"{_name(k)}: {k.speed.value:.3g}x the current speed [{k.speed.low:.3g}-{k.speed.high:.3g}], "
                f"beyond the {k.tolerance:.0%} that counts"
                for k in slower
            ),
        )
    compared = [k for k in kernels if k.status in ("same", "faster")]
    open_ = [k for k in kernels if k.status == "not_compared"]
    if open_ or not compared:
        why = [f"{_name(k)}: not compared: {k.candidate.error or k.note}" for k in open_]
        if not kernels:
            why.append("no kernel was rewritten: nothing to compare")
        elif not compared and not open_:
            why.append("every kernel fails under the current toolchain too: nothing to compare")
        return UpgradeVerdict("INCONCLUSIVE", tuple(why))
    left_out = len(kernels) - len(compared)
    return UpgradeVerdict(
        "SAFE",
        (
            f"{len(compared)} kernel{'s' if len(compared) != 1 else ''} build, verify and run under both toolchains; "
            "none is slower beyond the noise"
            + (f" ({left_out} failing under the current toolchain too, left out)" if left_out else ""),
        ),
    )


def check_fail_on(fail_on: str) -> None:
    if fail_on not in FAIL_ON:
        raise ConfigError(f"--fail-on '{fail_on}' is not allowed; use never, regressions or broken")


def exit_code(verdict: UpgradeVerdict, fail_on: str) -> int:
    """1 when the gate rejects the verdict, else 0."""
    return 1 if _SEVERITY.get(verdict.decision, 2) >= _GATE[fail_on] else 0
