"""Compiling ahead (evaluator/tuning/ahead.py): the kernels stage's next kernels are built
in the background, in its order, each at the config the tuner tries first (or the tuning
cache's winner) and at the awkward shape verify checks it on; the stage's own builds then
find them in the once-per-process cache; a failure is left to the stage; closing drops
what has not started.

In: real families built by TileLang's C backend. Out: pass/fail.
"""

from __future__ import annotations

import threading

from evaluator import kernels
from evaluator.kernels import common as C
from evaluator.device import hardware
from evaluator.tuning import verify
from evaluator.tuning.ahead import Ahead
from evaluator.tuning.search import first_candidate

HW = hardware.detect("cpu")


def test_the_next_kernels_and_their_awkward_shapes_are_built_in_order_and_reused():
    fam = kernels.get("layernorm")
    shapes = [(88, 232), (56, 344)]  # sizes no other test builds, so the count is this test's
    before = len(C._LAUNCHERS)
    with Ahead([(fam, s) for s in shapes], "float32", HW, threads=1) as ahead:
        ahead.wait()
    firsts = [first_candidate(fam, s, "float32", HW) for s in shapes]
    awkward = [verify.awkward_for(fam, s, "float32", c, HW.target) for s, c in zip(shapes, firsts)]
    assert ahead.built == [("layernorm", s) for pair in zip(shapes, awkward) for s in pair]
    assert len(C._LAUNCHERS) == before + 4
    # The stage's own builds find them: nothing more is compiled.
    for s, c in zip(shapes + awkward, firsts + firsts):
        fam.build(s, "float32", c, HW.target)
    assert len(C._LAUNCHERS) == before + 4


def test_a_cached_winner_is_built_instead_of_the_first_candidate():
    fam = kernels.get("softmax")
    shape = (64, 128)
    space = fam.search_space(shape, "float32", HW)
    winner = space[-1]
    asked = []

    def lookup(f, s):
        asked.append((f.name, s))
        return winner

    with Ahead([(fam, shape)], "float32", HW, lookup=lookup, threads=1) as ahead:
        ahead.wait()
    assert asked == [("softmax", shape)] and ahead.built[0] == ("softmax", shape)
    if winner != space[0]:  # the winner's build is in the cache, the first config's is not
        assert fam.build(shape, "float32", winner, HW.target).config == winner


class _Broken(type(kernels.get("layernorm"))):
    def build(self, shape, dtype, config, target):
        raise RuntimeError("nvcc is not there")


def test_a_build_that_fails_is_left_for_the_stage_to_report():
    with Ahead([(_Broken(), (64, 128))], "float32", HW, threads=1) as ahead:
        ahead.wait()
    assert ahead.built == [] and all(f.exception() is None for f in ahead.futures)


def test_closing_drops_the_builds_not_started():
    gate = threading.Event()
    started = []

    class _Slow(type(kernels.get("layernorm"))):
        def build(self, shape, dtype, config, target):
            started.append(shape)
            gate.wait(10)
            raise RuntimeError("stopped")

    ahead = Ahead([(_Slow(), (64, 128 + 16 * i)) for i in range(5)], "float32", HW, threads=1)
    while not started:
        gate.wait(0.01)
    gate.set()
    ahead.close()
    assert started == [(64, 128)] and sum(f.cancelled() for f in ahead.futures) == 4
