"""The report's words and numbers (report/strings.py) and the notes other stages write,
in the report's language (report/notes.py).

In: the shipped templates/i18n/en.yaml and zh.yaml, numbers of every size, and results
whose notes and flags are the English text the bench, soak, upstream and baseline stages
write (tests/report_samples.py). Out: both languages have the same keys; numbers read as
numbers (no scientific notation for days, times or counts); plurals and zero cases read
as prose; every note pattern matches the note it translates, and the Chinese report
shows those notes and flags in Chinese.
"""

from __future__ import annotations

import pytest
import dataclasses
import re

import yaml

from evaluator import checklist as cl
from evaluator import report
from evaluator.report import notes as report_notes
from evaluator.results import LaunchOverhead
from report_samples import evaluate, evidence_result, html_of, page_one, rich_result, section, words
from samples import sample_result


def test_strings_have_the_same_keys_in_every_language():
    def keys(d, prefix=()):
        for k, v in d.items():
            if isinstance(v, dict) and not report.is_plural(v):  # plural forms are one string
                yield from keys(v, prefix + (k,))
            else:
                yield prefix + (k,)

    tables = {
        lang: yaml.safe_load((report.TEMPLATES / "i18n" / f"{lang}.yaml").read_text(encoding="utf-8"))
        for lang in report.LANGS
    }
    assert set(keys(tables["en"])) == set(keys(tables["zh"]))
    for lang, table in tables.items():
        for metric in cl.METRICS:
            # one shared set of words for the per-target portability metrics, {target} filled in
            words = table["metrics"][report.metric_strings_key(metric)]
            assert set(words) == {"label", "fail", "next", "missing"}, (lang, metric)


@pytest.mark.slow
def test_no_scientific_notation_for_days_times_or_counts(tmp_path):
    r = rich_result()
    r = dataclasses.replace(
        r,
        upstream=dataclasses.replace(r.upstream, days_since_last_commit=123.4, days_since_release=1234.0),
        overhead=(LaunchOverhead("gemm", (1, 8, 8), 7460.2, 12.5),),
    )
    html = html_of(r, tmp_path)
    text = re.sub(r"<[^>]+>", " ", html)
    assert "Days since last commit </th><td>123" in re.sub(r"<[^>]+>", " ", section(html, "upstream")).replace(
        "  ", " "
    ) or "Days since last commit</th><td>123<" in section(html, "upstream")
    assert "7,460 µs / 12.5 µs" in text and "1,234" in text
    assert not re.search(r"\d\.?\d*e[+-]\d", re.sub(r"\b\d\.\de-0\d\b", "", text)), re.findall(r"\S*\de[+-]\d\S*", text)
    assert report.num(100.0) == "100" and report.num(7460.2) == "7,460" and report.num(0.5) == "0.5"
    assert report.num(12.34) == "12.3" and report.num(1.0e-6, 2) == "1.0e-06"


@pytest.mark.slow
def test_plurals_and_zero_cases_read_as_prose(tmp_path):
    r = rich_result()
    r = dataclasses.replace(
        r, upstream=dataclasses.replace(r.upstream, authors_90d=0, commits_90d=0, maintenance_score=0.0)
    )
    r = evaluate(r)
    html = html_of(r, tmp_path / "en")
    assert "Only 0" not in html and "(s)" not in page_one(html)
    optional = page_one(html_of(evaluate(sample_result()), tmp_path / "opt"))
    assert "2 optional items did not apply" in optional and "item(s)" not in optional
    assert "Nobody has committed to upstream TileLang in the last 90 days" in html
    assert "Nobody committed to upstream TileLang in the last 90 days" in html
    assert re.search(r"\d checks failed", html)
    one = evaluate(sample_result(softmax_speedup=0.2))  # exactly one blocker
    assert "1 blocker failed:" in page_one(html_of(one, tmp_path / "one"))
    zh = html_of(r, tmp_path / "zh", "zh")
    assert "每周只有 每周" not in zh and not re.search(r"(每周)\s*\S{0,4}\s*\1", zh)
    assert "上游 TileLang 近 90 天没有任何提交" in zh


def test_a_count_that_picks_the_plural_is_also_quoted():
    t = report.Strings("en")
    assert t("flip.nogo", count=3, items="x") == "What would change the verdict: all 3 blockers must pass: x."


@pytest.mark.slow
def test_zh_evidence_notes_and_comparison_are_chinese(tmp_path):
    r = evidence_result()
    r = dataclasses.replace(
        r,
        soak=dataclasses.replace(
            r.soak, notes=("latency drifted +6.2% from the first to the last window", "memory grew by 80 MB")
        ),
        upstream=dataclasses.replace(
            r.upstream,
            note="shallow clone: history before 2026-01-01 is missing, limited "
            "metrics are listed in details.limited (run `git fetch --unshallow` for full "
            "history)",
        ),
        comparison=dataclasses.replace(
            r.comparison,
            note="1 regression, 1 improvement, 1 unchanged; a change counts beyond max(5%, 3 x combined spread)",
        ),
    )
    html = html_of(evaluate(r), tmp_path, "zh")
    evidence = " ".join(re.findall(r'<td class="evidence">(.*?)</td>', section(html, "checklist"), re.S))
    for english in (
        "kernel families correct",
        "ops on",
        "iterations",
        "windows",
        "as of",
        "against",
        "measurements",
        "regressed",
        "stage not run",
        "commits behind",
        "calls in TileLang",
    ):
        assert english not in evidence, english
    assert "个内核族中" in evidence and "次迭代" in evidence
    assert "faster than" not in section(html, "ops") and "快于 Roofline 上限" in section(html, "ops")
    soak = section(html, "soak")
    assert "延迟从第一个窗口到最后一个窗口漂移了 +6.2%" in soak and "内存增长了 80 MB" in soak
    assert "latency drifted" not in soak
    assert "浅克隆：history before 2026-01-01 is missing" in section(html, "upstream")
    cmp = section(html, "comparison")
    assert "1 项退化、1 项改进、1 项无变化" in cmp and "只有超过 5% 与两次运行合并波动的 3 倍" in cmp
    assert "a change counts" not in cmp and "regression," not in cmp


@pytest.mark.slow
def test_the_capture_path_and_compiled_program_notes_read_in_chinese(tmp_path):
    own = (
        "graph captured on the model's own capture path (its eager path did not capture: AcceleratorError): the "
        "device number is of the program the model runs while captured, the eager view's of the one it runs eagerly"
    )
    r = evidence_result(e2e_flags=(own,))
    html = html_of(r, tmp_path, "zh")
    assert "CUDA Graph 按模型自己的捕获路径捕获（其即时执行路径无法捕获：AcceleratorError）：设备时间是" in section(
        html, "e2e"
    )
    assert "own capture path" not in html
    filled = (
        "graph captured with the numbers the model copies to the device each call filled there instead, the same "
        "values (its eager path did not capture: RuntimeError)"
    )
    html = html_of(evidence_result(e2e_flags=(filled,)), tmp_path, "zh")
    assert "CUDA Graph 捕获时，模型每次调用从主机复制到设备的数值改为直接在设备上填充" in section(html, "e2e")
    assert "filled there" not in html
    note = (
        "the model runs another program under torch.compile than eagerly (it asks torch.compiler.is_compiling()): "
        "it calls scaled_dot_product_attention(float16,float16,float16,bool) with a bool mask [4, 1, 512, 512] x12; "
        "Tensor.add(int64) x2 ..., instead of scaled_dot_product_attention(float16,float16,float16) with no mask, "
        "causal x12; torch.compile's time is of that program; 3 graph breaks (x): those parts ran eagerly; "
        "a note no pattern knows"
    )
    got = report_notes.notes_in_words(note, report.Strings("zh"))
    assert (
        got.startswith("模型在 torch.compile 下运行的程序与即时执行不同")
        and "with a bool mask [4, 1, 512, 512] x12" in got
    )
    assert "那个程序的时间" in got and "3 处图中断（x）" in got, got  # the pieces after it are kept
    assert got.endswith("；a note no pattern knows"), got


@pytest.mark.slow
def test_note_patterns_match_their_own_english_strings():
    """The English note strings reproduce the stages' notes, so each pattern matches the
    note it translates (a stage that rewords its note breaks this test, not the report)."""
    t = report.Strings("en")
    sample = {
        "pct": "+6.2",
        "mb": "80",
        "reasons": "HW slowdown",
        "a": "1980",
        "b": "1500",
        "cut": "x",
        "branch": "main",
        "n": "3",
        "days": "40",
        "fetched": "12",
        "url": "https://x/y.git",
        "why": "timeout",
        "date": "2026-01-02",
        "cand": "h200",
        "cand_name": "NVIDIA H200",
        "ref": "cpu-x86_64",
        "ref_name": "Test CPU",
        "floor": "5%",
        "k": "3",
        "side": "TileLang",
        "roof": "compute",
        "est": "0.81",
        "lo": "2.55",
        "hi": "2.71",
        "ms": "0.12",
        "fam": "attention",
        "x": "0.92",
        "ops": "1.06",
        "diff": "calls torch.sigmoid(float32) x1, instead of silu(float32) x1",
        "hits": "1",
        "total": "2",
        "graphs": "graphs",
        "s": "0.1",
        "breaks": "graph breaks",
        "torch": "2.11.0+cu130",
        "mib": "1024",
        "dtype": "float16",
        "bytes": "147456",
        "t_run": "7.5 ms",
        "t_other": "30 us",
        "what": "largest value 2e-30",
    }
    for kind, rx in report.NOTE_PATTERNS:
        text = t(f"notes.{kind}", **sample)
        if kind in ("up_fork_not", "up_fork_reason"):
            text = text.replace("timeout", "upstream is a shallow clone")
        if kind == "rule":
            text = "a change counts beyond max(5%, 3 x combined spread)"
        assert rx.fullmatch(text), kind
    port = {
        "kb": "208 KB",
        "req": "210 KB",
        "target": "MI300X",
        "what": "LDS",
        "unit": "workgroup",
        "n": "1024",
        "cores": "2nd-gen tensor cores (fp16, int8, int4)",
        "dtype": "bfloat16",
        "arch": "sm_80",
        "kind": "MACA",
        "version": "0.1.15",
        "target_kind": "maca",
        "got": "mma.sync",
        "want": "tcgen05",
    }
    for kind, rx in report.PORT_PATTERNS:
        assert rx.fullmatch(t(f"notes.{kind}", **port)), kind


@pytest.mark.slow
def test_flags_the_bench_writes_read_in_chinese(tmp_path):
    r = evidence_result(
        e2e_flags=(
            "contradicts the Amdahl estimate (0.81x from the op speedups, measured 2.55-2.71x)",
            "graph capture failed (RuntimeError: capture); the device number includes launch gaps",
        ),
        softmax_flags=("TileLang faster than the memory roof allows",),
    )
    html = html_of(r, tmp_path, "zh")
    assert "与阿姆达尔估计矛盾（按算子加速比估计为 0.81x，实测 2.55-2.71x）" in page_one(html)
    assert "CUDA Graph 捕获失败（RuntimeError: capture）；设备时间包含启动间隙" in section(html, "e2e")
    assert "TileLang 快于带宽上限所允许的速度" in section(html, "ops")
    assert "contradicts" not in html and "roof allows" not in html


@pytest.mark.slow
def test_two_flags_on_one_op_read_as_a_list_with_no_stray_separator(tmp_path):
    both = ("TileLang faster than the memory roof allows", "PyTorch faster than the memory roof allows")
    r = evidence_result(softmax=0.3, softmax_flags=both)

    def text(html: str) -> str:
        return words(re.sub(r"<style>.*?</style>", "", html, flags=re.S))

    en, zh = text(html_of(r, tmp_path / "en")), text(html_of(r, tmp_path / "zh", "zh"))
    assert (
        "softmax 1024x128 float32 is flagged (TileLang faster than the memory roof allows, PyTorch faster than "
        "the memory roof allows)" in en
    )
    assert "已被标记（TileLang 快于带宽上限所允许的速度、PyTorch 快于带宽上限所允许的速度）" in zh
    for seen in (en, zh):
        doubled = r"[;；,，、]\s*[;；,，、]"
        assert not re.search(doubled, seen), re.findall(r".{40}" + doubled + r".{20}", seen)
    assert "roof allows" not in zh
    t = report.Strings("en")
    assert (
        report_notes.notes_in_words("TileLang faster than the compute roof allows, mystery; ; , odd", t)
        == "TileLang faster than the compute roof allows; mystery; odd"
    )


@pytest.mark.slow
def test_the_chinese_examples_keep_no_english_the_product_wrote():
    """The committed H200 and CPU runs in Chinese: checklist titles, the targets' limits and
    sources, torch.compile's notes, the roof's note, the calls' layout notes, the tuner's
    reasons and the environment's field names are Chinese; measured values, model names,
    commit subjects and document titles stay as they are."""
    from pathlib import Path

    from report_samples import example_result

    examples = Path(__file__).resolve().parents[1] / "reports" / "examples"
    for folder in (
        examples / "llama" / "h200" / "2026-12-01" / "defaults",
        examples / "bert-tiny" / "cpu-x86_64" / "2026-12-01",
    ):
        html = report.render_html(example_result(folder), "zh")
        seen = words(re.sub(r"<(style|svg)\b.*?</\1>", "", html, flags=re.S))
        for english in (
            "The model runs at least 95% as fast",
            "Every rewritten kernel gives the same results",
            "tensor cores",
            "matrix cores",
            "shared memory per block",
            "per block opt-in",
            "on this machine",
            "provides it",
            "on-disk cache",
            "warm compile",
            "copy of",
            "matmul in",
            "copied to contiguous",
            "tuning budget",
            "of stack",
            "(this run: ",
        ):
            assert english not in seen, (folder.name, english)
        env = words(section(html, "environment"))
        for key in (
            "batch_size",
            "seq_len",
            "spec_hash",
            "measured_tflops",
            "smem_per_block",
            "tune_budget_s",
            "families",
            "timing.reps",
            "null",
            "[]",
        ):
            assert key not in env, (folder.name, key)
        assert "批大小" in env and "计时 · 重复次数" in env
        one = section(html, "checklist")
        assert "使用 TileLang 内核时模型速度至少达到原来的 95%" in one or "每个重写的内核与 PyTorch 结果一致" in one
    assert "NVIDIA CUDA C++ Programming Guide" in seen  # a document's title is its name


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_key_number_card_shows_two_notes_and_counts_the_rest(lang):
    # A CPU run's end-to-end card carried six notes (each family alone, the Amdahl check)
    # in a column one card wide; the evidence section has them all.
    from evaluator.report.sections.page_one import CARD_NOTES, _card

    flags = [f"routing gemm{i} alone makes the model 0.4x end to end" for i in range(5)]
    card = _card("End-to-end speed", "0.37x", "", "fail", flags=flags, t=report.Strings(lang))
    parts = card["doubt"].split(report.Strings(lang)("list_semi"))
    assert len(parts) == CARD_NOTES + 1 and "3" in parts[-1]
    assert card["dim"]
    few = _card("End-to-end speed", "0.37x", "", "fail", flags=flags[:2], t=report.Strings(lang))
    assert len(few["doubt"].split(report.Strings(lang)("list_semi"))) == 2
