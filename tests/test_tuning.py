"""Tuning on the real CPU backend: failing candidates are recorded, the fastest correct one wins,
and the cache is keyed by shape and toolchain."""
import torch

from evaluator import hardware, kernels, tuning


class WithExtraConfigs:
    """The real gemm family with a few hand-picked configs put in front of its search space."""

    def __init__(self, extra):
        self._fam = kernels.get("gemm")
        self._extra = extra

    def __getattr__(self, name):
        return getattr(self._fam, name)

    def search_space(self, shape, dtype, hw):
        return self._extra + self._fam.search_space(shape, dtype, hw)[:1]


def test_broken_candidate_is_data_not_a_crash():
    hw = hardware.detect("cpu")
    fam = WithExtraConfigs([{"block_M": 0, "block_N": 32, "block_K": 32}])
    tk, kernel = tuning.tune(fam, (40, 24, 16), "float32", hw, budget_s=120)
    statuses = [c.status for c in tk.candidates]
    assert statuses[0] == "compile_error" and tk.candidates[0].error
    assert "ok" in statuses and kernel is not None and tk.config is not None
    x, w, b = fam.make_inputs((40, 24, 16), "float32", "cpu", 7)
    torch.testing.assert_close(kernel(x, w, b), torch.nn.functional.linear(x, w, b), atol=1e-4, rtol=1e-4)


def test_best_is_the_fastest_ok_candidate():
    hw = hardware.detect("cpu")
    tk, _ = tuning.tune(kernels.get("softmax"), (64, 96), "float32", hw, budget_s=120)
    ok = [c for c in tk.candidates if c.status == "ok"]
    assert ok and tk.config == min(ok, key=lambda c: c.latency_ms).config


def test_cache_reuse_and_key():
    hw = hardware.detect("cpu")
    store = {}

    def lookup(key):
        return store.get(repr(key))

    def save(key, config):
        store[repr(key)] = config

    fam = kernels.get("softmax")
    first, _ = tuning.tune(fam, (32, 48), "float32", hw, lookup=lookup, save=save, tilelang_version="x")
    again, k = tuning.tune(fam, (32, 48), "float32", hw, lookup=lookup, save=save, tilelang_version="x")
    assert not first.cached and again.cached and again.config == first.config and k is not None
    other, _ = tuning.tune(fam, (32, 48), "float32", hw, lookup=lookup, save=save, tilelang_version="y")
    assert not other.cached  # a toolchain change re-tunes
    k1 = tuning.cache_key("gemm", (1, 2, 3), "float32", hw, "0.1.15")
    assert k1 != tuning.cache_key("gemm", (1, 2, 4), "float32", hw, "0.1.15")


def test_check_output_catches_nan_zeros_and_mismatch():
    ref = torch.ones(4, 4)
    assert tuning.check_output(ref.clone(), ref, 1e-5, 1e-5)[0]
    bad = ref.clone()
    bad[0, 0] = float("nan")
    assert tuning.check_output(bad, ref, 1e-5, 1e-5)[1] == "NaN in output"
    assert tuning.check_output(torch.zeros(4, 4), ref, 10, 10)[1] == "output is all zeros"
    inf = ref.clone()
    inf[1, 1] = float("inf")
    assert tuning.check_output(inf, ref, 1e-5, 1e-5)[1] == "Inf in output"
    assert "mismatch" in tuning.check_output(ref * 1.1, ref, 1e-5, 1e-5)[1]
    assert "shape" in tuning.check_output(torch.ones(2, 2), ref, 1, 1)[1]


def test_a_changed_toolchain_is_named_when_re_tuning(tmp_path):
    from evaluator import baseline
    hw = hardware.detect("cpu")
    fam = kernels.get("softmax")
    store = tmp_path / "store"
    look = lambda key: baseline.tuning_cache_lookup(store, key)  # noqa: E731
    keep = lambda key, conf: baseline.tuning_cache_save(store, key, conf)  # noqa: E731
    tuning.tune(fam, (16, 40), "float32", hw, tilelang_version="0.1.15", lookup=look, save=keep)
    again, _ = tuning.tune(fam, (16, 40), "float32", hw, tilelang_version="0.1.15", lookup=look, save=keep)
    assert again.cached
    key = tuning.cache_key("softmax", (16, 40), "float32", hw, "0.1.16")
    assert look(key) is None
    assert ("tilelang", "0.1.15", "0.1.16") in baseline.tuning_cache_changes(store, key)
