"""Tuning on the real CPU backend: failing candidates are recorded, the fastest correct one wins,
the search goes from the coarse grid to the neighbours of the best, within the budget, and
the cache is keyed by shape and toolchain."""

import pytest
import torch

from evaluator.device import hardware
from evaluator import kernels
from evaluator.tuning import cache as tuning_cache
from evaluator.tuning import search as tuning
from evaluator.kernels.gemm import GemmFamily
from evaluator.kernels.softmax import SoftmaxFamily
from evaluator.measuring.checks import check_output


class WithExtraConfigs(GemmFamily):
    """The real gemm family with a few hand-picked configs put in front of its search space,
    and a reject_reason that lets every config through, so a bad one reaches the compiler."""

    def __init__(self, extra):
        super().__init__()
        self._extra = extra

    def reject_reason(self, shape, dtype, config, hw):
        return None

    def search_space(self, shape, dtype, hw):
        return self._extra + super().search_space(shape, dtype, hw)[:1]


class Rejecting(SoftmaxFamily):
    """The real softmax family with a reject_reason that refuses 16 rows or more per block,
    and a record of every config it was asked to build."""

    def __init__(self):
        self.built = []

    def reject_reason(self, shape, dtype, config, hw):
        return f"{config['block_rows']} rows per block is too many" if config["block_rows"] >= 16 else None

    def build(self, shape, dtype, config, target):
        self.built.append(dict(config))
        return super().build(shape, dtype, config, target)


@pytest.fixture(scope="module")
def softmax_64x96():
    """One full coarse-to-fine tune, shared by the tests that only read its result."""
    return tuning.tune(kernels.get("softmax"), (64, 96), "float32", hardware.detect("cpu"), budget_s=300)


def test_broken_candidate_is_data_not_a_crash():
    hw = hardware.detect("cpu")
    fam = WithExtraConfigs([{"block_M": 0, "block_N": 32, "block_K": 32}])
    tk, kernel = tuning.tune(fam, (40, 24, 16), "float32", hw, budget_s=120, fine_rounds=0)
    statuses = [c.status for c in tk.candidates]
    assert statuses[0] == "compile_error" and tk.candidates[0].error
    assert "ok" in statuses and kernel is not None and tk.config is not None
    x, w, b = fam.make_inputs((40, 24, 16), "float32", "cpu", 7)
    torch.testing.assert_close(kernel(x, w, b), torch.nn.functional.linear(x, w, b), atol=1e-4, rtol=1e-4)


def test_best_is_the_fastest_ok_candidate(softmax_64x96):
    tk, _ = softmax_64x96
    ok = [c for c in tk.candidates if c.status == "ok"]
    assert ok and tk.config == min(ok, key=lambda c: c.latency_ms).config


def test_fine_phase_tries_neighbours_of_the_best_coarse_configs(softmax_64x96):
    tk, kernel = softmax_64x96
    coarse = [c for c in tk.candidates if c.phase == "coarse"]
    fine1 = [c for c in tk.candidates if c.phase == "fine-1"]
    assert [c.config for c in coarse] == kernels.get("softmax").search_space(
        (64, 96), "float32", hardware.detect("cpu")
    )
    assert fine1, [(c.phase, c.config) for c in tk.candidates]
    configs = [tuple(sorted(c.config.items())) for c in tk.candidates]
    assert len(configs) == len(set(configs))  # nothing is tried twice
    # round 1 explores around the fastest coarse config (and a close runner-up)
    ranked = sorted((c for c in coarse if c.status == "ok"), key=lambda c: c.latency_ms)
    around = [n for c in ranked[:2] for n in tuning.neighbours(c.config)]
    assert all(c.config in around for c in fine1)
    assert any(c.config in tuning.neighbours(ranked[0].config) for c in fine1)
    rounds = sorted({c.phase for c in tk.candidates} - {"coarse"})
    assert rounds == [f"fine-{i}" for i in range(1, len(rounds) + 1)] and len(rounds) <= tuning.FINE_ROUNDS
    (x,) = kernels.get("softmax").make_inputs((64, 96), "float32", "cpu", 3)
    torch.testing.assert_close(kernel(x), torch.softmax(x, -1), atol=1e-6, rtol=1e-5)


def test_neighbours_double_halve_and_flip():
    got = tuning.neighbours({"block_M": 64, "threads": 128, "num_stages": 3, "chunk": 0, "swizzle": True, "rows": 1})
    assert got == [
        {"block_M": 128, "threads": 128, "num_stages": 3, "chunk": 0, "swizzle": True, "rows": 1},
        {"block_M": 32, "threads": 128, "num_stages": 3, "chunk": 0, "swizzle": True, "rows": 1},
        {"block_M": 64, "threads": 256, "num_stages": 3, "chunk": 0, "swizzle": True, "rows": 1},
        {"block_M": 64, "threads": 64, "num_stages": 3, "chunk": 0, "swizzle": True, "rows": 1},
        {"block_M": 64, "threads": 128, "num_stages": 3, "chunk": 0, "swizzle": False, "rows": 1},
    ]


def test_spent_budget_skips_the_rest_but_still_returns_a_kernel():
    hw = hardware.detect("cpu")
    seen = []
    tk, kernel = tuning.tune(kernels.get("softmax"), (32, 48), "float32", hw, budget_s=0, on_candidate=seen.append)
    statuses = [c.status for c in tk.candidates]
    assert statuses[0] == "ok" and kernel is not None and tk.config == tk.candidates[0].config
    assert set(statuses[1:]) == {"skipped"} and all("budget of 0s spent" in c.error for c in tk.candidates[1:])
    # the fine phase is bounded by the same budget: its neighbours are listed, not compiled
    assert any(c.phase == "fine-1" for c in tk.candidates[1:])
    assert seen == list(tk.candidates)  # progress is reported candidate by candidate


def test_a_budget_shorter_than_a_compile_times_the_built_first_candidate_and_compiles_no_other():
    """The kernels stage compiles a shape's first candidate ahead (tuning/ahead.py). With
    less budget left after timing it than its compile took, the rest are skipped without
    being compiled: compiling them could only run the budget out."""
    from evaluator.kernels import common as C

    hw, fam, shape = hardware.detect("cpu"), kernels.get("softmax"), (40, 88)  # a size no other test builds
    first = fam.search_space(shape, "float32", hw)[0]
    built = fam.build(shape, "float32", first, hw.target)  # as compiled ahead
    before = len(C._LAUNCHERS)
    tk, kernel = tuning.tune(fam, shape, "float32", hw, budget_s=built.compile_s * 0.5, fine_rounds=0)
    assert kernel is built and tk.candidates[0].status == "ok" and tk.candidates[0].compile_s == built.compile_s
    assert len(tk.candidates) > 1 and {c.status for c in tk.candidates[1:]} == {"skipped"}
    assert len(C._LAUNCHERS) == before  # nothing else was compiled


def test_rejected_configs_are_recorded_and_never_compiled():
    hw = hardware.detect("cpu")
    fam = Rejecting()
    tk, kernel = tuning.tune(fam, (32, 48), "float32", hw, budget_s=300)
    rejected = [c for c in tk.candidates if c.status == "rejected"]
    assert rejected and all(
        c.config["block_rows"] >= 16 and "too many" in c.error and c.compile_s is None for c in rejected
    )
    assert {c.phase for c in rejected} >= {"coarse"}
    assert not [c for c in fam.built if c["block_rows"] >= 16]
    assert kernel is not None and tk.config["block_rows"] < 16


def test_cache_reuse_and_key():
    hw = hardware.detect("cpu")
    store = {}

    def lookup(key):
        return store.get(repr(key))

    def save(key, config):
        store[repr(key)] = config

    fam = kernels.get("softmax")
    first, _ = tuning.tune(fam, (32, 48), "float32", hw, lookup=lookup, save=save, tilelang_version="x", fine_rounds=0)
    again, k = tuning.tune(fam, (32, 48), "float32", hw, lookup=lookup, save=save, tilelang_version="x")
    assert not first.cached and again.cached and again.config == first.config and k is not None
    other, _ = tuning.tune(fam, (32, 48), "float32", hw, lookup=lookup, save=save, tilelang_version="y", fine_rounds=0)
    assert not other.cached  # a toolchain change re-tunes
    k1 = tuning.cache_key("gemm", (1, 2, 3), "float32", hw, "0.1.15")
    assert k1 != tuning.cache_key("gemm", (1, 2, 4), "float32", hw, "0.1.15")


def test_check_output_catches_nan_zeros_and_mismatch():
    ref = torch.ones(4, 4)
    assert check_output(ref.clone(), ref, 1e-5, 1e-5)[0]
    bad = ref.clone()
    bad[0, 0] = float("nan")
    assert check_output(bad, ref, 1e-5, 1e-5)[1] == "NaN in output"
    assert check_output(torch.zeros(4, 4), ref, 10, 10)[1] == "output is all zeros"
    inf = ref.clone()
    inf[1, 1] = float("inf")
    assert check_output(inf, ref, 1e-5, 1e-5)[1] == "Inf in output"
    assert "mismatch" in check_output(ref * 1.1, ref, 1e-5, 1e-5)[1]
    assert "shape" in check_output(torch.ones(2, 2), ref, 1, 1)[1]


def test_a_changed_toolchain_is_named_when_re_tuning(tmp_path):
    hw = hardware.detect("cpu")
    fam = kernels.get("softmax")
    store = tmp_path / "store"
    look = lambda key: tuning_cache.lookup(store, key)  # noqa: E731
    keep = lambda key, conf: tuning_cache.save(store, key, conf)  # noqa: E731
    tuning.tune(fam, (16, 40), "float32", hw, tilelang_version="0.1.15", lookup=look, save=keep, fine_rounds=0)
    again, _ = tuning.tune(fam, (16, 40), "float32", hw, tilelang_version="0.1.15", lookup=look, save=keep)
    assert again.cached
    key = tuning.cache_key("softmax", (16, 40), "float32", hw, "0.1.16")
    assert look(key) is None
    assert ("tilelang", "0.1.15", "0.1.16") in tuning_cache.changes(store, key)


def test_neighbours_flip_the_familys_switches_and_turn_the_tile():
    cfg = {"block_M": 128, "block_N": 64, "swap_ab": 1, "persistent": 132, "split_k": 1}
    got = tuning.neighbours(cfg, flags=("swap_ab", "split_k"))
    assert {**cfg, "swap_ab": 0} in got and {**cfg, "split_k": 0} in got
    assert {**cfg, "block_M": 64, "block_N": 128} in got  # the tile turned
    assert not any(n["persistent"] != 132 for n in got)  # a block count is not a switch
    assert {**cfg, "swap_ab": 0} not in tuning.neighbours(cfg)  # undeclared 0/1 ints stay


def test_a_shape_without_a_working_candidate_says_the_commonest_error():
    from evaluator.results import Candidate
    from evaluator.tuning.stage import failed_because

    why = "dtype bfloat16 is not supported on TileLang's CPU backend"
    cands = [Candidate({"b": i}, "rejected", error=f"gemm: {why}\n  (target 'c')") for i in range(3)]
    cands.append(Candidate({"b": 9}, "compile_error", error="one other"))
    assert failed_because(cands) == f"compile_error; rejected: gemm: {why} (target 'c')"
    assert failed_because([Candidate({}, "skipped")]) == "skipped"
    assert failed_because([]) == "no candidate"
