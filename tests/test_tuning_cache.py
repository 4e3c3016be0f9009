"""The cache of tuned configs (evaluator/tuning_cache.py) in a real baseline store.

In: keys from tuning.cache_key for one shape under changing toolchains, and tuned
configs. Out: assertions that a lookup hits only the exact key, that a miss says which
field changed, that a saved config is committed with the next baseline, and that bad
keys or configs are refused before the store is touched.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from evaluator.tuning import cache as tuning_cache
from evaluator.baseline import store as bs
from evaluator.errors import BaselineError
from evaluator.results import Hardware
from evaluator.tuning.search import cache_key
from samples import sample_result
from test_baseline_store import assert_clean, git

HW = Hardware(target="cuda", device="cuda", name="NVIDIA H200", platform="h200", driver="550.54", cuda="12.4")


@pytest.fixture
def store(tmp_path):
    return tmp_path / "baselines"


def test_tuning_cache_hit_and_miss_on_a_changed_toolchain(store):
    hw = HW
    key = cache_key("gemm", (256, 128, 128), "float16", hw, "0.1.15")
    assert tuning_cache.lookup(store, key) is None  # no store yet
    config = {"block_M": 128, "block_N": 128, "block_K": 32, "num_stages": 3}
    tuning_cache.save(store, key, config)
    assert tuning_cache.lookup(store, key) == config
    assert tuning_cache.lookup(store, dict(key, shape=[256, 128, 128])) == config  # tuple or list alike

    newer = cache_key("gemm", (256, 128, 128), "float16", hw, "0.1.16")
    assert tuning_cache.lookup(store, newer) is None
    assert tuning_cache.changes(store, newer) == (("tilelang", "0.1.15", "0.1.16"),)
    new_driver = cache_key("gemm", (256, 128, 128), "float16", dataclasses.replace(hw, driver="560.1"), "0.1.15")
    assert tuning_cache.lookup(store, new_driver) is None
    assert tuning_cache.lookup(store, cache_key("gemm", (512, 128, 128), "float16", hw, "0.1.15")) is None

    [path] = (store / bs.TUNING_DIR).rglob("*.json")
    assert json.loads(path.read_text())["key"]["tilelang"] == "0.1.15"  # the key is kept beside the config
    # The saved config travels in the next baseline's commit.
    ref = bs.record(store, sample_result())
    assert path.relative_to(store).as_posix() in git(store, "show", "--name-only", "--format=", ref.commit)
    assert_clean(store)


def test_a_changed_search_space_is_a_miss_that_names_the_space(store):
    # A newer evaluator whose family offers other schedules re-tunes instead of reusing
    # the best config found without them.
    space = [{"block_M": 128, "block_N": 128}, {"block_M": 64, "block_N": 128}]
    key = cache_key("gemm", (256, 128, 128), "float16", HW, "0.1.15", space)
    tuning_cache.save(store, key, space[0])
    assert (
        tuning_cache.lookup(
            store, cache_key("gemm", (256, 128, 128), "float16", HW, "0.1.15", [dict(c) for c in space])
        )
        == space[0]
    )
    wider = cache_key("gemm", (256, 128, 128), "float16", HW, "0.1.15", space + [{"block_M": 128, "pingpong": 1}])
    assert tuning_cache.lookup(store, wider) is None
    [(field, before, now)] = tuning_cache.changes(store, wider)
    assert field == "space" and before == key["space"] and now == wider["space"] != before


def test_a_miss_on_another_shape_names_no_change_and_the_closest_entry_wins(store):
    old = cache_key("gemm", (256, 128, 128), "float16", HW, "0.1.14")
    closer = cache_key("gemm", (256, 128, 128), "float16", dataclasses.replace(HW, driver="560.1"), "0.1.15")
    tuning_cache.save(store, old, {"block_M": 64})
    tuning_cache.save(store, closer, {"block_M": 128})
    now = cache_key("gemm", (256, 128, 128), "float16", dataclasses.replace(HW, driver="560.1"), "0.1.16")
    assert tuning_cache.changes(store, now) == (("tilelang", "0.1.15", "0.1.16"),)
    assert tuning_cache.changes(store, cache_key("gemm", (64, 64, 64), "float16", HW, "0.1.16")) == ()
    assert tuning_cache.changes(store, {}) == ()


def test_bad_keys_are_refused_before_the_store_is_touched_and_bad_configs_leave_nothing(store):
    with pytest.raises(BaselineError, match="non-empty dict"):
        tuning_cache.save(store, {}, {"block_M": 64})
    assert not store.exists()
    key = cache_key("softmax", (1024, 128), "float32", HW, "0.1.15")
    with pytest.raises(BaselineError, match="flat JSON"):
        tuning_cache.save(store, key, {"block_rows": float("nan")})
    assert tuning_cache.lookup(store, key) is None
    assert not list(store.glob(bs.TMP_PREFIX + "*"))
