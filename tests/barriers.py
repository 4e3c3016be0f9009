"""Test helper: the mbarrier protocols of the hand-written Hopper programs (the ping-pong
GEMM, the ping-pong attention) run as Python generators under a random scheduler.

In: agents (generators that yield a wait, a callable that is true once they may go on,
or a string naming a violation they saw) and a random source. Out: None when every agent
finished, "deadlock" when none could move, or the first violation.
"""

from __future__ import annotations

import random


class Barrier:
    """An mbarrier: a phase completes when `count` arrivals are in; a wait on parity p
    passes once the phase of that parity has completed, i.e. while the current
    (incomplete) phase's parity differs from p. That is all the hardware checks."""

    def __init__(self, count: int):
        self.count, self.arrived, self.phase = count, 0, 0

    def arrive(self) -> None:
        self.arrived += 1
        if self.arrived == self.count:
            self.arrived, self.phase = 0, self.phase + 1

    def passes(self, parity: int) -> bool:
        return (self.phase & 1) != parity


def interleave(agents: list, rng: random.Random) -> str | None:
    """Step a random agent that may go on until all are done (None), none may ("deadlock"),
    or one reports a violation (its string)."""
    waiting = [lambda: True] * len(agents)
    while agents:
        ready = [j for j, w in enumerate(waiting) if w()]
        if not ready:
            return "deadlock"
        j = rng.choice(ready)
        try:
            step = next(agents[j])
        except StopIteration:
            del agents[j], waiting[j]
            continue
        if isinstance(step, str):
            return step
        waiting[j] = step
    return None
