"""The portability section and its page-one line (report/sections/portability.py).

In: a result with the portability matrix of tests/port_samples.py (two kernels, tuned and
default configs, four targets: one cell needs re-tuning, one target has no backend), and
results without a matrix for each reason. Out: the matrix with each reason once as a
numbered note, the config that fits, one sentence per target, the targets' limits with
their sources, page one's line; in English and Chinese; and why nothing was checked.
(The matrix in the PDF is tested in test_report.py.)
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from report_samples import evaluate, html_of, page_one, rich_result, section, words
from samples import sample_result


@pytest.fixture(scope="module")
def en(tmp_path_factory) -> str:
    """The English HTML of the result with every section filled, shared by the tests here."""
    return html_of(rich_result(), tmp_path_factory.mktemp("en"))


@pytest.fixture(scope="module")
def zh(tmp_path_factory) -> str:
    return html_of(rich_result(), tmp_path_factory.mktemp("zh"), "zh")


@pytest.mark.slow
def test_portability_matrix_notes_summary_and_sources(en):
    from evaluator.device import targets
    import port_samples as S

    sec = section(en, "portability")
    text = words(sec)
    assert "6. Portability (lowered, not run)" in text
    assert re.findall(r"<th>([^<]+)</th>", sec)[:5] == ["Kernel (config)", "A100", "H100", "MI300X", "C500"]
    # 2 kernels x (tuned, default) x 4 targets: one needs re-tuning, C500 fails all four, A100 one codegen gap
    assert sec.count('class="port-retune"') == 1 and sec.count('class="port-fails"') == 5
    assert sec.count('class="port-lowers"') == 10 and "wgmma" in text and "mfma" in text
    assert "gemm 4096x4096x4096 float16 tuned config: block_M=128, block_N=256, block_K=64" in text
    # each reason once, numbered, with the config that fits where there is one
    assert (
        "uses 208 KB of shared memory; MI300X allows 64 KB of LDS per workgroup (the lowered kernel itself "
        "requests 208 KB) → fits and lowers: block_M=128, block_N=128, block_K=32, num_stages=2, threads=256"
    ) in text
    assert (
        "fails to lower (code-generation gap: TypeError: Downcast from tirx.Sub to ir.IntImm failed.) → fits and "
        "lowers: block_M=128, block_N=64, num_stages=1, threads=128"
    ) in text
    assert text.count(S.NO_MACA) == 1  # four cells, one note
    assert (
        "2 of 2 rewritten kernels build for AMD Instinct MI300X; 1 needs re-tuning there: gemm 4096x4096x4096 "
        "float16, tuned config: note 1." in text
    )
    assert (
        "0 of 2 rewritten kernels build for MetaX C500; all of them fail (missing feature, dtype or backend: "
        "note 2)." in text
    )
    assert "2 of 2 rewritten kernels build for NVIDIA H100." in text
    for key in ("a100", "h100", "mi300x", "c500"):  # a footnote per target: its limits and their public source
        spec = targets.TARGETS[key]
        assert f"{key} — {spec.describe()}" in text and f"Source: {spec.source}" in text
    assert "Checked at float16, the dtype the model runs at on a GPU (this run measured float32" in text


def test_page_one_names_where_the_kernels_build(en):
    one = words(page_one(en))
    assert (
        "Portability (lowered, not run) All 2 rewritten kernels build unchanged for H100; 2 of 2 build for "
        "A100 (1 only after re-tuning: attention 1x32x512x512x128x1 float16); 2 of 2 build for MI300X (1 only "
        "after re-tuning: gemm 4096x4096x4096 float16); 0 of 2 build for C500 (missing feature, dtype or "
        "backend)."
    ) in one


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, says",
    [
        ({}, "Not checked: this run did not lower its kernels for other targets"),
        ({"settings": {"targets": []}}, "Not checked: this run was given --targets none."),
        (
            {"stage_errors": {"portability": "KernelError: TileLang exploded"}},
            "Not checked: the portability stage failed: KernelError: TileLang exploded",
        ),
        ({"tuned": (), "verify": (), "op_bench": ()}, "Not checked: no kernel was rewritten in this run."),
    ],
)
def test_portability_not_checked_says_why(tmp_path, change, says):
    html = html_of(evaluate(dataclasses.replace(sample_result(), portability=None, **change)), tmp_path)
    assert says in words(section(html, "portability"))
    assert "port-line" not in page_one(html)  # page one says nothing when nothing was checked


@pytest.mark.slow
def test_portability_in_chinese(zh):
    text = words(section(zh, "portability"))
    assert "6. 可移植性（仅编译，未运行）" in text
    assert "使用 208 KB 共享内存；MI300X 每个工作组最多 64 KB LDS（编译出的内核本身申请 208 KB）" in text
    assert "未安装 MACA 的 TileLang 后端" in text and "需重新调优" in text
    assert "2 个重写内核中有 2 个能为 AMD Instinct MI300X 编译；其中 1 个需要在该目标上重新调优" in text
    assert "每个工作组最多 64 KB LDS，每个 CU 64 KB，每个线程块最多 1024 个线程，wavefront 宽度 64，304 个 CU" in text
    assert "来源：" in text
    # (the sources stay as published: document titles are not translated)
    for english in (
        "uses 208 KB",
        "allows",
        "rewritten kernels",
        "needs re-tuning",
        "fails to lower",
        "threads per block",
        "no TileLang backend",
        "Source:",
    ):
        assert english not in text, english
    assert "可移植性（仅编译，未运行） 全部 2 个重写内核无需改动即可为 H100 编译；" in words(page_one(zh))
