"""Checklist loading (every validation error points at the item and says what is
allowed), the metric catalogue, and each verdict path including waivers."""

from __future__ import annotations

import dataclasses
import textwrap
from datetime import date

import pytest

from evaluator import checklist as cl
from evaluator.errors import ChecklistError, ConfigError
from evaluator.results import Change, Comparison, OpBench, RunResult
from samples import sample_result, timing

TODAY = date(2026, 11, 29)

ITEM = """\
  - id: {id}
    title: A check
    metric: {metric}
    comparator: "{comparator}"
    threshold: {threshold}
    severity: {severity}
    rationale: Because.
"""


def write(tmp_path, body: str, name: str = "c.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def checklist_text(*items: dict, header: str = "name: test\n") -> str:
    defaults = dict(id="a", metric="ops.speedup_min", comparator=">=", threshold=0.5, severity="blocker")
    return header + "items:\n" + "".join(ITEM.format(**{**defaults, **i}) for i in items)


def load_error(tmp_path, text: str) -> str:
    with pytest.raises(ChecklistError) as exc:
        cl.load(write(tmp_path, text))
    msg = str(exc.value)
    assert "\n" not in msg, msg
    return msg


# ---------------------------------------------------------------- validation


def test_shipped_checklists_load_and_encode_the_method():
    default = cl.load(cl.DEFAULT_CHECKLIST)
    items = {i.id: i for i in default.items}
    assert items["kernels-correct"].severity == "blocker"
    assert (items["ops-geomean"].threshold, items["ops-geomean"].severity) == (0.9, "major")
    assert (items["ops-no-cliff"].threshold, items["ops-no-cliff"].severity) == (0.5, "blocker")
    assert items["e2e-speed"].threshold == 0.95
    assert items["soak-drift"].threshold == 5 and items["soak-jitter"].threshold == 3
    assert items["upstream-commits"].threshold == 1 and items["upstream-authors"].threshold == 3
    assert items["upstream-release"].threshold == 180 and items["fork-drift"].threshold == 90
    assert items["no-regressions"].metric == "baseline.regressions"
    production = cl.validate(cl.DEFAULT_CHECKLIST.parent / "production.yaml")
    assert production.on_not_evaluated == "fail"
    assert {i.metric for i in default.items + production.items} <= set(cl.METRICS)


def test_unknown_metric_names_item_line_and_suggests(tmp_path):
    msg = load_error(tmp_path, checklist_text({"id": "x"}, {"id": "speed", "metric": "ops.speedup_mn"}))
    assert ":12:" in msg and "item 2 (id 'speed')" in msg
    assert "unknown metric 'ops.speedup_mn'" in msg and "ops.speedup_min" in msg
    assert "evaluate checklist metrics" in msg


def test_every_problem_is_kept_and_the_one_line_says_how_to_see_them(tmp_path):
    text = checklist_text(
        {"id": "a", "metric": "kernels.all_corect"},
        {"id": "b", "metric": "ops.speedup_mn"},
        {"id": "a", "severity": "critical"},
    )
    path = write(tmp_path, text)
    with pytest.raises(cl.ChecklistProblems) as exc:
        cl.validate(path)
    problems = exc.value.problems
    assert len(problems) == 4 and all("\n" not in p for p in problems)
    assert "c.yaml:5: item 1 (id 'a'): unknown metric 'kernels.all_corect'" in problems[0]
    assert "c.yaml:12: item 2 (id 'b'): unknown metric 'ops.speedup_mn'" in problems[1]
    assert "c.yaml:17: item 3 (id 'a'): duplicate id 'a' (first used by item 1)" in problems[2]
    assert "c.yaml:22: item 3 (id 'a'): severity 'critical' is not allowed" in problems[3]
    msg = load_error(tmp_path, text)
    assert msg.startswith(problems[0])
    assert msg.endswith(f" (and 3 more problems; `evaluate checklist validate {path}` lists them all)")


def test_a_misspelt_field_is_one_problem_not_also_a_missing_one(tmp_path):
    path = write(tmp_path, checklist_text({"id": "typo"}).replace("threshold:", "treshold:"))
    with pytest.raises(cl.ChecklistProblems) as exc:
        cl.load(path)
    assert len(exc.value.problems) == 1 and "unknown field 'treshold'" in exc.value.problems[0]
    assert "more problem" not in str(exc.value)


def test_bad_comparator_lists_allowed(tmp_path):
    msg = load_error(tmp_path, checklist_text({"id": "cmp", "comparator": "=>"}))
    assert ":6:" in msg and "id 'cmp'" in msg
    assert "'=>'" in msg and ">=, <=, >, <, ==, !=" in msg


def test_bad_severity_lists_allowed(tmp_path):
    msg = load_error(tmp_path, checklist_text({"id": "sev", "severity": "critical"}))
    assert ":8:" in msg and "id 'sev'" in msg and "blocker, major, minor" in msg


def test_duplicate_id_points_at_second(tmp_path):
    msg = load_error(tmp_path, checklist_text({"id": "same"}, {"id": "same"}))
    assert ":10:" in msg and "item 2" in msg and "duplicate id 'same'" in msg and "item 1" in msg


def test_missing_field_names_field_and_item(tmp_path):
    text = checklist_text({"id": "one"}, {"id": "two"}).replace("    threshold: 0.5\n", "", 1)
    msg = load_error(tmp_path, text)
    assert "item 1 (id 'one')" in msg and "missing required field 'threshold'" in msg
    assert ":3:" in msg  # the item's own line when the field is absent


def test_unknown_field_suggests_the_right_one(tmp_path):
    text = checklist_text({"id": "typo"}).replace("threshold:", "treshold:")
    msg = load_error(tmp_path, text)
    assert "unknown field 'treshold'" in msg and "did you mean 'threshold'" in msg and ":7:" in msg


def test_threshold_must_be_a_number(tmp_path):
    msg = load_error(tmp_path, checklist_text({"id": "num", "threshold": "fast"}))
    assert "threshold must be a number" in msg and "id 'num'" in msg


def test_a_date_that_is_no_date_is_one_line(tmp_path):
    msg = load_error(tmp_path, "name: x\nitems:\n  - id: a\n    waiver: {expires: 2027-13-45, reason: r}\n")
    assert "reads as a date but is none (month must be in 1..12)" in msg and str(tmp_path) in msg


def test_malformed_yaml_gives_line(tmp_path):
    msg = load_error(tmp_path, "name: x\nitems:\n  - id: a\n    title: [unclosed\n    metric: e2e.speedup\n")
    assert "not valid YAML" in msg and str(tmp_path) in msg
    assert ":5:" in msg or ":4:" in msg


def test_waiver_date_and_fields_validated(tmp_path):
    text = checklist_text({"id": "w"}) + "    waiver: {reason: known, who: ana, expires: soon}\n"
    msg = load_error(tmp_path, text)
    assert "id 'w'" in msg and "YYYY-MM-DD" in msg
    text = checklist_text({"id": "w"}) + "    waiver: {reason: known, expires: 2027-01-01}\n"
    assert "missing required field 'who'" in load_error(tmp_path, text)


def test_shape_errors(tmp_path):
    assert "mapping with 'name' and 'items'" in load_error(tmp_path, "- just\n- a list\n")
    assert "no items" in load_error(tmp_path, "name: empty\nitems: []\n")
    with pytest.raises(ChecklistError, match="not found"):
        cl.load(tmp_path / "nope.yaml")


# ---------------------------------------------------------------- metrics


def bare() -> RunResult:
    r = sample_result()
    return RunResult(run_id=r.run_id, created=r.created, model=r.model, environment=r.environment, settings={})


def test_every_metric_is_none_for_a_run_that_measured_nothing():
    r = bare()
    assert {name: m(r) for name, m in cl.METRICS.items()} == {name: None for name in cl.METRICS}
    assert all(m.explain(r) for m in cl.METRICS.values())  # always says why


def test_metric_values_from_sample(result):
    m = {name: metric(result) for name, metric in cl.METRICS.items()}
    assert m["kernels.all_correct"] == 1.0 and m["kernels.correct_fraction"] == 1.0
    assert m["ops.speedup_geomean"] == pytest.approx((1.1 * 0.9) ** 0.5)
    assert m["ops.speedup_min"] == pytest.approx(0.9)
    assert m["e2e.outputs_match"] == 1.0 and m["e2e.speedup"] == pytest.approx(12 / 11)
    assert m["soak.drift_pct"] == pytest.approx(0.5) and m["soak.cv_pct"] == pytest.approx(1.0)
    assert m["upstream.commits_per_week_90d"] == pytest.approx(120 / (90 / 7))
    assert m["fork.days_behind"] is None and m["baseline.regressions"] is None
    assert set(cl.describe_metrics().split()) >= set(cl.METRICS)


def test_op_metrics_use_model_shapes_only(result):
    slow_standard = OpBench("gemm", (4096, 4096, 4096), "float32", "standard", timing(10.0), timing(1.0), 0.1, 1, 1)
    r = dataclasses.replace(result, op_bench=result.op_bench + (slow_standard,))
    assert cl.METRICS["ops.speedup_min"](r) == pytest.approx(0.9)
    only_standard = dataclasses.replace(result, op_bench=(slow_standard,))
    assert cl.METRICS["ops.speedup_min"](only_standard) == pytest.approx(0.1)


def test_a_model_shape_whose_every_call_ran_fused_into_another_kernel_is_left_out(result):
    # ResNet's plain convolution kernels: tuned and timed at every conv shape, but the
    # routed model ran each of those calls inside conv_bn_relu, whose rows time that work.
    from evaluator.results import CallCount

    unused = OpBench("conv2d", (2, 7, 7, 8, 8, 3, 3, 1, 1, 0), "float32", "model", timing(10.0), timing(1.0), 0.1, 1, 1)
    r = dataclasses.replace(result, op_bench=result.op_bench + (unused,))
    assert cl.METRICS["ops.speedup_min"](r) == pytest.approx(0.1)  # counted while the model may run it
    fused = CallCount("conv2d", "2x7x7x8x8x3x3x1x1x0", 0, notes={"fused into conv_bn_relu": 3})
    ran = dataclasses.replace(r, e2e=dataclasses.replace(r.e2e, calls=r.e2e.calls + (fused,)))
    assert cl.METRICS["ops.speedup_min"](ran) == pytest.approx(0.9)
    assert cl.METRICS["ops.speedup_geomean"](ran) == pytest.approx((1.1 * 0.9) ** 0.5)
    assert "1 shape (conv2d) left out: every call ran fused" in cl.METRICS["ops.speedup_min"].explain(ran)
    # One call that ran the kernel itself, or fell back, keeps the shape counted.
    for other in (dataclasses.replace(fused, tilelang=1), dataclasses.replace(fused, fallback={"shape not tuned": 1})):
        kept = dataclasses.replace(r, e2e=dataclasses.replace(r.e2e, calls=r.e2e.calls + (other,)))
        assert cl.METRICS["ops.speedup_min"](kept) == pytest.approx(0.1)


def test_unverified_selected_family_is_not_correct(result):
    r = dataclasses.replace(result, verify=result.verify[:1])  # softmax never reached verification
    assert cl.METRICS["kernels.all_correct"](r) == 0.0
    assert cl.METRICS["kernels.correct_fraction"](r) == 0.5
    assert "softmax" in cl.METRICS["kernels.all_correct"].explain(r)


def test_regressions_counted_only_when_comparable(result):
    changes = (
        Change("op", "gemm 256x128x128 float32", 0.4, 0.5, 1.25, 0.05, "regression"),
        Change("e2e", "model", 12.0, 12.0, 1.0, 0.05, "unchanged"),
    )
    comp = Comparison("bert-tiny/cpu-x86_64/v1", "this run", True, "", changes)
    assert cl.METRICS["baseline.regressions"](dataclasses.replace(result, comparison=comp)) == 1.0
    other = dataclasses.replace(comp, comparable=False, note="timer changed")
    assert cl.METRICS["baseline.regressions"](dataclasses.replace(result, comparison=other)) is None


def test_a_crashed_swap_in_is_a_failed_match_not_not_measured(result):
    e2e = dataclasses.replace(result.e2e, swapped=None, speedup=None, outputs_match=False, error="boom")
    r = dataclasses.replace(result, e2e=e2e)
    assert cl.METRICS["e2e.outputs_match"](r) == 0.0
    assert "boom" in cl.METRICS["e2e.outputs_match"].explain(r)


# ---------------------------------------------------------------- verdicts


def evaluate(result, path=cl.DEFAULT_CHECKLIST, today=TODAY):
    return cl.evaluate(cl.load(path), result, today=today)


def statuses(v):
    return {o.id: o.status for o in v.outcomes}


def test_go(result):
    v = evaluate(result)
    assert v.decision == "GO"
    assert statuses(v)["fork-drift"] == "not_evaluated"  # listed, though optional
    assert v.checklist == "default (default.yaml)"
    o = next(o for o in v.outcomes if o.id == "ops-no-cliff")
    assert o.value == pytest.approx(0.9) and o.unit == "x" and "softmax" in o.evidence


def test_conditional_go_when_only_a_major_fails():
    v = evaluate(sample_result(softmax_speedup=0.6))  # geomean 0.81 < 0.9, worst 0.6 >= 0.5
    assert v.decision == "CONDITIONAL GO"
    assert statuses(v)["ops-geomean"] == "fail" and statuses(v)["ops-no-cliff"] == "pass"


def test_no_go_when_a_blocker_fails():
    v = evaluate(sample_result(correct=False))
    assert v.decision == "NO-GO" and statuses(v)["kernels-correct"] == "fail"
    assert evaluate(sample_result(softmax_speedup=0.3)).decision == "NO-GO"


def test_not_evaluated_never_passes():
    v = evaluate(sample_result(upstream=False))
    s = statuses(v)
    assert s["upstream-commits"] == s["upstream-authors"] == s["upstream-release"] == "not_evaluated"
    assert v.decision == "CONDITIONAL GO"
    assert all(o.value is None for o in v.outcomes if o.status == "not_evaluated")
    assert "no --upstream given" in next(o.evidence for o in v.outcomes if o.id == "upstream-commits")


def test_unverified_selected_families_fail_and_a_missing_blocker_under_a_strict_checklist_is_no_go(result):
    # Families were selected and tuned but never verified: a failed item, not "not measured".
    assert statuses(evaluate(dataclasses.replace(result, verify=())))["kernels-correct"] == "fail"
    # The run stopped before the kernels stage: now it is not evaluated.
    r = dataclasses.replace(result, hot_ops=None, tuned=(), verify=(), op_bench=())
    assert evaluate(r).decision == "CONDITIONAL GO"  # default: cannot be GO without evidence
    strict = cl.DEFAULT_CHECKLIST.parent / "production.yaml"
    assert statuses(evaluate(r, strict))["kernels-correct"] == "not_evaluated"
    assert evaluate(r, strict).decision == "NO-GO"


def test_a_bare_run_is_never_go():
    v = evaluate(bare())
    assert v.decision == "CONDITIONAL GO"
    assert set(statuses(v).values()) == {"not_evaluated"}


WAIVED = checklist_text({"id": "worst", "metric": "ops.speedup_min", "threshold": 0.95}) + textwrap.indent(
    "waiver:\n  reason: softmax template rewrite lands next quarter\n  who: Ana Li\n  expires: 2026-12-31\n", "    "
)


def test_active_waiver_turns_failure_into_go(tmp_path, result):
    v = evaluate(result, write(tmp_path, WAIVED))
    assert statuses(v) == {"worst": "waived"} and v.decision == "GO"
    assert "Ana Li" in v.outcomes[0].evidence and "2026-12-31" in v.outcomes[0].evidence
    assert evaluate(result, write(tmp_path, WAIVED), today=date(2026, 12, 31)).decision == "GO"  # last day counts


def test_expired_waiver_no_longer_applies(tmp_path, result):
    v = evaluate(result, write(tmp_path, WAIVED), today=date(2027, 1, 1))
    assert statuses(v) == {"worst": "fail"} and v.decision == "NO-GO"
    assert "expired on 2026-12-31" in v.outcomes[0].evidence


def test_waiver_does_not_cover_a_passing_item(tmp_path):
    v = evaluate(sample_result(softmax_speedup=1.2), write(tmp_path, WAIVED))
    assert statuses(v) == {"worst": "pass"}


def test_comparators(tmp_path, result):
    items = [
        {"id": f"c{i}", "metric": "ops.speedup_min", "comparator": c, "threshold": th}
        for i, (c, th) in enumerate([(">=", 0.9), ("<=", 0.9), (">", 0.8), ("<", 1.0), ("==", 0.9), ("!=", 1)])
    ]
    v = evaluate(result, write(tmp_path, checklist_text(*items)))
    assert set(statuses(v).values()) == {"pass"}


@pytest.mark.parametrize(
    "decision, fail_on, code",
    [
        ("GO", "conditional", 0),
        ("CONDITIONAL GO", "conditional", 1),
        ("NO-GO", "conditional", 1),
        ("GO", "no-go", 0),
        ("CONDITIONAL GO", "no-go", 0),
        ("NO-GO", "no-go", 1),
        ("NO-GO", None, 0),
    ],
)
def test_fail_on_gate(decision, fail_on, code):
    from evaluator.results import Verdict

    assert cl.exit_code(Verdict(decision, "default", ()), fail_on) == code


def test_fail_on_without_verdict_or_with_bad_level():
    assert cl.exit_code(None, "no-go") == 1 and cl.exit_code(None, None) == 0
    with pytest.raises(ConfigError, match="no-go, conditional"):
        cl.exit_code(None, "maybe")


# ---------------------------------------------------------------- failures are failed items


def _metric(name, result):
    from evaluator import checklist as C

    return C.METRICS[name](result)


def test_a_selected_family_without_a_verified_kernel_fails_kernels_correct():
    from tests.samples import replace, sample_result

    r = sample_result()
    only_gemm = tuple(v for v in r.verify if v.family == "gemm")
    no_softmax = tuple(t for t in r.tuned if t.family == "gemm")
    r = replace(r, verify=only_gemm, tuned=no_softmax)
    assert _metric("kernels.all_correct", r) == 0.0


def test_a_model_shape_without_a_working_kernel_fails_instead_of_leaving_the_geomean():
    import dataclasses
    from tests.samples import replace, sample_result

    r = sample_result()
    broken = dataclasses.replace(
        r.op_bench[1], tilelang=None, speedup=None, verified=False, error="no candidate worked (compile_error)"
    )
    failed_tune = dataclasses.replace(r.tuned[1], config=None)
    r = replace(r, op_bench=(r.op_bench[0], broken), tuned=(r.tuned[0], failed_tune))
    assert _metric("ops.speedup_min", r) == 0.0
    assert _metric("kernels.all_correct", r) == 0.0
    assert abs(_metric("ops.speedup_geomean", r) - 1.1) < 1e-9  # only verified kernels have a speed


def test_an_unstable_number_cannot_pass_an_item():
    import dataclasses
    from evaluator import checklist as C
    from tests.samples import replace, sample_result

    r = sample_result()
    fast_but_unstable = dataclasses.replace(r.e2e, speedup=3.0, flags=("unstable",))
    verdict = C.evaluate(C.load(C.DEFAULT_CHECKLIST), replace(r, e2e=fast_but_unstable))
    item = next(o for o in verdict.outcomes if o.metric == "e2e.speedup")
    assert item.status == "fail" and "cannot pass on this number: unstable" in item.evidence


def test_a_kernel_gone_since_the_last_baseline_is_a_regression():
    from evaluator.results import Change, Comparison
    from tests.samples import replace, sample_result

    gone = Change("op", "softmax 1024x128 float32", 0.2, None, None, 0.05, "gone")
    for comparable in (True, False):
        comp = Comparison("bert-tiny/cpu/2026Q4-1", "this run", comparable, "", (gone,))
        assert _metric("baseline.regressions", replace(sample_result(), comparison=comp)) == 1.0


def _gemm_only(r: RunResult, **changes) -> RunResult:
    """`r` rerun with --families gemm: softmax is neither selected nor measured."""
    return dataclasses.replace(
        r,
        hot_ops=dataclasses.replace(r.hot_ops, selected=("gemm",)),
        op_bench=tuple(b for b in r.op_bench if b.family == "gemm"),
        tuned=tuple(t for t in r.tuned if t.family == "gemm"),
        verify=tuple(v for v in r.verify if v.family == "gemm"),
        **changes,
    )


def test_a_family_this_run_did_not_select_is_not_measured_not_regressed(result):
    from evaluator import baseline

    metric = cl.METRICS["baseline.regressions"]
    run = _gemm_only(result)
    run = dataclasses.replace(run, comparison=baseline.compare(result, run, reference_id="bert-tiny/cpu/2026Q4-1"))
    assert [c.key for c in run.comparison.changes if c.status == "gone"] == ["softmax 1024x128 float32"]
    assert metric(run) == 0.0
    assert "1 measurement of softmax not measured in this run" in metric.explain(run)
    # A family measured in both runs whose kernel no longer works is still a regression.
    failed = dataclasses.replace(result.op_bench[0], tilelang=None, speedup=None, error="compile_error")
    broken = dataclasses.replace(result, op_bench=(failed, result.op_bench[1]))
    broken = dataclasses.replace(broken, comparison=baseline.compare(result, broken))
    assert metric(broken) == 1.0 and "gemm 256x128x128 float32" in metric.explain(broken)
    # --no-e2e: the end-to-end timings are not measured in this run either.
    no_e2e = _gemm_only(result, e2e=None, settings={**result.settings, "e2e": False})
    no_e2e = dataclasses.replace(no_e2e, comparison=baseline.compare(result, no_e2e))
    assert metric(no_e2e) == 0.0
    # Nothing measured in both: no number to judge, not a pass.
    only_softmax = dataclasses.replace(
        result,
        op_bench=result.op_bench[1:],
        e2e=None,
        settings={**result.settings, "e2e": False},
        hot_ops=dataclasses.replace(result.hot_ops, selected=("softmax",)),
    )
    disjoint = dataclasses.replace(no_e2e, comparison=baseline.compare(only_softmax, no_e2e))
    assert metric(disjoint) is None and "nothing measured in both" in metric.explain(disjoint)


# ---------------------------------------------------------------- portability metrics


def test_portability_metrics_one_per_target_none_until_checked(result):
    from evaluator.device import targets
    from port_samples import sample_portability

    names = ["portability.targets_ok", "portability.kernels_ok"] + [
        f"portability.{k}.kernels_ok" for k in targets.TARGETS
    ]
    assert set(names) <= set(cl.METRICS)
    assert all(cl.METRICS[n].meaning and cl.METRICS[n].unit == "fraction" for n in names)
    assert all(cl.METRICS[n](result) is None for n in names)  # the stage did not run
    assert cl.METRICS["portability.h100.kernels_ok"].explain(result) == "portability stage not run"
    skipped = dataclasses.replace(result, settings={**result.settings, "targets": []})
    assert cl.METRICS["portability.kernels_ok"].explain(skipped) == "portability not checked (--targets none)"
    failed = dataclasses.replace(result, stage_errors={"portability": "KernelError: boom"})
    assert "portability stage failed: KernelError: boom" in cl.METRICS["portability.targets_ok"].explain(failed)

    r = dataclasses.replace(result, portability=sample_portability())
    m = {n: cl.METRICS[n](r) for n in names}
    # A100 and MI300X build both kernels after re-tuning one; C500 has no backend here.
    assert m["portability.targets_ok"] == pytest.approx(3 / 4) and m["portability.kernels_ok"] == 0.0
    assert m["portability.h100.kernels_ok"] == m["portability.mi300x.kernels_ok"] == 1.0
    assert m["portability.c500.kernels_ok"] == 0.0
    assert m["portability.b200.kernels_ok"] is None  # not among the targets checked
    assert cl.METRICS["portability.b200.kernels_ok"].explain(r) == (
        "b200 was not among the targets checked (a100, h100, mi300x, c500)"
    )
    assert (
        cl.METRICS["portability.mi300x.kernels_ok"]
        .explain(r)
        .startswith("2 of 2 rewritten kernels build for AMD Instinct MI300X; 1 needs re-tuning there")
    )


def test_production_requires_the_kernels_to_build_for_h100(result):
    from port_samples import sample_portability

    strict = cl.DEFAULT_CHECKLIST.parent / "production.yaml"
    [item] = [i for i in cl.load(strict).items if i.metric.startswith("portability.")]
    assert (item.metric, item.comparator, item.threshold, item.severity) == (
        "portability.h100.kernels_ok",
        ">=",
        1.0,
        "major",
    )
    assert "C500" in item.rationale  # why not every target
    assert item.metric not in {i.metric for i in cl.load(cl.DEFAULT_CHECKLIST).items}  # default.yaml untouched
    assert statuses(evaluate(dataclasses.replace(result, portability=sample_portability()), strict))[item.id] == "pass"
    assert statuses(evaluate(result, strict))[item.id] == "not_evaluated"  # counts as failed under production
    only_amd = sample_portability(targets=("mi300x", "c500"))
    assert statuses(evaluate(dataclasses.replace(result, portability=only_amd), strict))[item.id] == "not_evaluated"


# ---------------------------------------------------------------- the package


def test_the_package_is_the_whole_api():
    from evaluator.checklist import (
        metrics_baselines,
        metrics_e2e,
        metrics_kernels,
        metrics_portability,
        metrics_upstream,
    )

    for name in (
        "METRICS",
        "load",
        "validate",
        "evaluate",
        "exit_code",
        "describe_metrics",
        "kernel_status",
        "op_rows",
        "op_speedup",
        "op_label",
        "DEFAULT_CHECKLIST",
        "CHECKLISTS",
        "Metric",
        "Checklist",
    ):
        assert hasattr(cl, name), name
    areas = [
        metrics_kernels.KERNELS,
        metrics_kernels.OPS,
        metrics_kernels.PROFILE,
        metrics_e2e.E2E,
        metrics_e2e.SOAK,
        metrics_upstream.UPSTREAM,
        metrics_upstream.FORK,
        metrics_baselines.BASELINES,
        metrics_portability.PORTABILITY,
    ]
    # A name defined in two areas would silently keep only one of them in METRICS.
    assert sum(len(a) for a in areas) == len(cl.METRICS)
    assert {m.name for a in areas for m in a} == set(cl.METRICS)
