"""The comparison of two runs (evaluator/baseline/compare.py) and its printed rows, without a store.

In: synthetic RunResults from tests/samples.py, changed in one respect at a time (slower,
noisier, another driver, another timing policy, an op gone). Out: assertions on each
Change's status, ratio and threshold, on the environment changes and the note that names
likely causes; and, in a fresh interpreter where `import git` fails, that a comparison
still runs: comparing needs no git. Comparisons of stored baselines (`diff`, `previous`)
are in test_baseline_store.py.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evaluator.baseline.compare import E2E_TILELANG, E2E_TORCH, compare, plausible_cause
from evaluator.baseline.rows import comparison_rows, environment_rows
from evaluator.errors import BaselineError
from samples import replace, sample_result

TESTS = Path(__file__).resolve().parent


def with_hw(result, **changes):
    env = result.environment
    return replace(result, environment=dataclasses.replace(env, hardware=dataclasses.replace(env.hardware, **changes)))


def test_noisier_timings_widen_the_threshold():
    ref = sample_result()
    slower = sample_result(scale=1.3)
    cand = replace(
        slower,
        op_bench=tuple(
            dataclasses.replace(
                b,
                tilelang=dataclasses.replace(
                    b.tilelang, p10_ms=b.tilelang.median_ms * 0.6, p90_ms=b.tilelang.median_ms * 1.4
                ),
            )
            for b in slower.op_bench
        ),
    )
    ops = [ch for ch in compare(ref, cand).changes if ch.kind == "op"]
    assert all(ch.status == "unchanged" and ch.threshold > 0.5 for ch in ops)


def test_environment_changes_listed_as_likely_causes():
    ref = sample_result()
    cand = with_hw(sample_result(scale=1.3), driver="560.1", cuda="12.6")
    cand = replace(
        cand,
        environment=dataclasses.replace(cand.environment, torch="2.14.0"),
        settings={**cand.settings, "ops": 3, "out": "reports/run-2"},
    )
    c = compare(ref, cand)
    changed = {f: (a, b) for f, a, b in c.environment_changes}
    assert changed["driver"] == ("", "560.1") and changed["cuda"] == ("", "12.6")
    assert changed["torch"] == ("2.13.0", "2.14.0") and changed["settings.ops"] == ("2", "3")
    assert "settings.out" not in changed and "tilelang" not in changed
    assert c.comparable and "likely causes: " in c.note and "torch 2.13.0 -> 2.14.0" in c.note
    assert ("torch", "2.13.0", "2.14.0") in environment_rows(c)
    assert compare(ref, sample_result()).environment_changes == ()


def test_a_model_library_update_is_a_likely_cause():
    # Which kernels a model runs is the library's code: transformers' BertModel replayed
    # 1773 µs of kernels under graph capture against 810 µs eagerly (H200, 2026-12-02).
    ref = sample_result()
    ref = replace(ref, environment=dataclasses.replace(ref.environment, libraries={"transformers": "4.57.0"}))
    slower = sample_result(scale=1.3)
    cand = replace(
        slower,
        environment=dataclasses.replace(slower.environment, libraries={"transformers": "5.24.0", "timm": "1.0.20"}),
    )
    c = compare(ref, cand)
    changed = {f: (a, b) for f, a, b in c.environment_changes}
    assert changed["transformers"] == ("4.57.0", "5.24.0") and changed["timm"] == ("", "1.0.20")
    assert "transformers 4.57.0 -> 5.24.0" in c.note and plausible_cause("transformers")


def test_different_timing_policies_are_marked_not_comparable():
    ref = sample_result()
    cand = replace(
        sample_result(scale=1.3),
        settings={**ref.settings, "timing": {"timer": "perf_counter", "warmup": 3, "reps": 100}},
    )
    c = compare(ref, cand)
    assert not c.comparable and "NOT COMPARABLE" in c.note and "timing policies differ" in c.note
    assert all(row[6].endswith("(not comparable)") for row in comparison_rows(c))
    assert ("settings.timing.reps", "20", "100") in c.environment_changes


def test_gone_and_new_measurements_and_the_labels_of_runs_not_stored():
    ref = sample_result(run_id="ref-run")
    moved = dataclasses.replace(ref.op_bench[0], shape=(512, 512, 512))
    cand = replace(sample_result(run_id="cand-run"), op_bench=(ref.op_bench[0], moved), e2e=None)
    c = compare(ref, cand)
    assert (c.reference, c.candidate) == ("ref-run", "cand-run")
    status = {ch.key: ch.status for ch in c.changes}
    assert status == {
        "gemm 256x128x128 float32": "unchanged",
        "softmax 1024x128 float32": "gone",
        E2E_TILELANG: "gone",
        E2E_TORCH: "gone",
        "gemm 512x512x512 float32": "new",
    }
    gone = next(ch for ch in c.changes if ch.key == E2E_TORCH)
    assert gone.ratio is None and gone.candidate_ms is None and gone.reference_ms == pytest.approx(12.0)
    assert "1 unchanged, 1 new, 3 gone" in c.note
    # Under different timing policies a ratio is a hint only, but new and gone stay facts.
    other_timer = replace(cand, settings={**cand.settings, "timing": {"timer": "cuda_event"}})
    statuses = [row[6] for row in comparison_rows(compare(ref, other_timer))]
    assert statuses == ["unchanged (not comparable)", "gone", "gone", "gone", "new"]
    assert compare(ref, cand, reference_id="a/b/2026Q4-1").reference == "a/b/2026Q4-1"


def test_a_regression_without_a_speed_relevant_change_is_unexplained():
    ref = sample_result()
    cand = replace(
        sample_result(scale=1.3),
        settings={**ref.settings, "checklist": "production"},
        environment=dataclasses.replace(ref.environment, python="3.12.1"),
    )
    c = compare(ref, cand)
    assert {f for f, _, _ in c.environment_changes} == {"python", "settings.checklist"}
    assert "unexplained: no change of driver" in c.note and "likely causes" not in c.note


def test_plausible_cause_names_only_what_affects_speed():
    for field in (
        "driver",
        "cuda",
        "torch",
        "tilelang",
        "device",
        "gpu_clocks",
        "clock_sm",
        "settings.dtype",
        "settings.timing.reps",
        "settings.batch_size",
    ):
        assert plausible_cause(field), field
    for field in ("python", "os", "settings.checklist", "settings.upstream", "settings", "upstream.head"):
        assert not plausible_cause(field), field


def test_a_negative_threshold_is_refused():
    with pytest.raises(BaselineError, match="must be >= 0"):
        compare(sample_result(), sample_result(), threshold=-0.1)
    with pytest.raises(BaselineError, match="must be >= 0"):
        compare(sample_result(), sample_result(), noise_k=-1)


@pytest.mark.slow
def test_comparing_needs_no_git():
    # A fresh interpreter in which `import git` fails, as on a machine without GitPython:
    # the comparison, its rows and the package's old names for them all work; only the
    # store (which is never imported here) would need git.
    code = textwrap.dedent(f"""
        import sys
        sys.modules["git"] = None
        sys.path.insert(0, {str(TESTS)!r})
        from evaluator.baseline.compare import compare
        from evaluator.baseline.rows import comparison_rows
        from evaluator import baseline
        from samples import sample_result

        c = compare(sample_result(), sample_result(scale=1.3))
        assert len(c.regressions) == 4 and comparison_rows(c)[0][6] == "regression", c
        assert baseline.compare is compare and baseline.plausible_cause("driver")
        assert baseline.comparison_rows(c) == comparison_rows(c)
        assert "evaluator.baseline.store" not in sys.modules and sys.modules["git"] is None
        try:
            baseline.record
        except ImportError:
            print("the store needs git, the comparison does not")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "the store needs git, the comparison does not"


def test_a_call_keyed_in_another_layout_is_compared_as_one():
    """An older baseline keyed a convolution by 9 sizes and attention by 6; this version
    adds the memory layout (NCHW flag, q/k/v row pitches). The same call on both sides
    is one row, compared, with a note, not a 'gone' and a 'new'."""

    def with_ops(result, shapes):
        b = result.op_bench[0]
        return replace(result, op_bench=tuple(dataclasses.replace(b, family=f, shape=s) for f, s in shapes))

    old = [("attention", (1, 32, 512, 512, 64, 1)), ("conv2d", (32, 56, 56, 64, 64, 1, 1, 1, 0, 0))]
    new = [("attention", (1, 32, 512, 512, 64, 1, 32, 32, 32)), ("conv2d", (32, 56, 56, 64, 64, 1, 1, 1, 0, 1))]
    c = compare(with_ops(sample_result(), old), with_ops(sample_result(scale=1.3), new))
    ops = {ch.key: ch for ch in c.changes if ch.kind == "op"}
    assert set(ops) == {"attention 1x32x512x512x64x1x32x32x32 float32", "conv2d 32x56x56x64x64x1x1x1x0x1 float32"}
    assert all(ch.status == "regression" and abs(ch.ratio - 1.3) < 1e-9 for ch in ops.values())
    assert "same call in another memory layout: attention 1x32x512x512x64x1 float32 is now" in c.note
    # Two candidates for one old key: ambiguous, so both sides stay as they are.
    two = new + [("attention", (1, 32, 512, 512, 64, 1, 0, 0, 32))]
    statuses = {
        ch.key: ch.status for ch in compare(with_ops(sample_result(), old), with_ops(sample_result(), two)).changes
    }
    assert statuses["attention 1x32x512x512x64x1 float32"] == "gone"
