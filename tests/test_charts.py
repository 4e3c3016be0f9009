"""Charts: inline SVG that is safe to embed (escaped text, no script, no external
references, ids unique per chart) and None when there is nothing to draw.

In: lists of labels and numbers, as report.py passes them. Out: assertions on the SVG
text, and for the roofline on the drawn label boxes: every point (TileLang's and the
vendor's) carries its number and no two labels overprint. Chinese labels draw without
matplotlib warnings where a CJK font is installed (skipped, naming fonts-noto-cjk, where
none is).
"""

from __future__ import annotations

import logging
import re
import warnings
from datetime import date
from functools import lru_cache

import matplotlib
import pytest

from evaluator.report import charts

EVIL = "<script>alert(1)</script> $x^2$"


@lru_cache(maxsize=None)  # drawing every chart takes about a second; draw each set once
def all_charts(label: str = "gemm") -> dict[str, str | None]:
    return {
        "hot_ops": charts.hot_ops([(label, 0.6, True), ("softmax", 0.3, True), ("other", 0.1, False)]),
        "speedups": charts.speedups([(label, 1.2), ("softmax", 0.4), ("layernorm", None)]),
        "roofline": charts.roofline(
            [
                charts.RooflinePoint(label, 40.0, 300.0, "tilelang"),
                charts.RooflinePoint(label, 40.0, 350.0, "vendor"),
                charts.RooflinePoint("softmax", 0.6, 2.0, "tilelang"),
            ],
            peak_tflops=989.0,
            peak_gbps=4800.0,
        ),
        "soak": charts.soak([11.0, 11.2, 11.1, 11.4], seconds=60),
        "weekly_commits": charts.weekly_commits([3, 0, 5, 7, 2], guide=1.0),
        "releases": charts.releases(
            [(date(2026, 1, 5), label), (date(2026, 6, 1), "v0.1.15")], as_of=date(2026, 11, 29)
        ),
        "trend": charts.trend({label: [("v1", 1.0), ("v2", 1.1)], "model": [("v1", 12.0), ("v2", 11.5)]}),
    }


@pytest.mark.slow
def test_every_chart_is_inline_svg_without_external_references():
    for name, svg in all_charts().items():
        assert svg is not None and svg.startswith("<svg "), name
        assert "<?xml" not in svg and "<!DOCTYPE" not in svg and "<metadata" not in svg, name
        attrs = re.findall(r'(?:href|src)="([^"]*)"', svg)
        assert all(a.startswith("#") for a in attrs), (name, attrs)
        assert "\\mathdefault" not in svg, name  # log axes must not fall back to mathtext


@pytest.mark.slow
def test_labels_are_escaped_and_not_parsed_as_math():
    for name in ("hot_ops", "speedups", "roofline", "releases", "trend"):
        svg = all_charts(EVIL)[name]
        assert "<script" not in svg, name
        assert "&lt;script&gt;" in svg and "$x^2$" in svg, name


def test_ids_are_unique_across_charts():
    ids = []
    for svg in all_charts().values():
        ids += re.findall(r'\bid="([^"]+)"', svg)
    assert len(ids) == len(set(ids))
    svg = all_charts()["speedups"]
    refs = set(re.findall(r'(?:url\(#|href="#)([^")]+)', svg))
    assert refs and refs <= set(re.findall(r'\bid="([^"]+)"', svg))


def test_font_comes_from_the_page():
    # Text inherits the report's font list so Chinese labels pick a CJK font. Without a
    # CJK font matplotlib rightly warns that it measured these glyphs with DejaVu; that
    # is not what this test is about (the report itself keeps such text out of charts).
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        assert "font-family" not in charts.speedups([("中文标签", 1.0)])


@pytest.mark.parametrize(
    "call",
    [
        lambda: charts.hot_ops([]),
        lambda: charts.speedups([("a", None)]),
        lambda: charts.roofline([charts.RooflinePoint("a", 0.0, 1.0, "tilelang")]),
        lambda: charts.soak([]),
        lambda: charts.weekly_commits([]),
        lambda: charts.releases([]),
        lambda: charts.trend({"a": [("v1", 1.0)]}),  # a single version is not a trend
    ],
)
def test_nothing_to_draw_gives_none(call):
    assert call() is None


def test_speedup_chart_draws_the_parity_line():
    svg = charts.speedups([("a", 2.0), ("b", 0.5)])
    assert re.search(r'id="speedup\d+-parity"', svg)
    assert "2.00x" in svg and "0.50x" in svg


def test_roofline_without_peaks_still_draws_points():
    svg = charts.roofline([charts.RooflinePoint("a", 2.0, 0.1, "tilelang")])
    assert svg is not None and "roofline (" not in svg


def crowded_points() -> list[charts.RooflinePoint]:
    """Ten ops at nearly the same intensity and speed, both sides each: the case where
    op names used to print on top of one another."""
    pts = []
    for n in range(1, 11):
        intensity, tflops = 0.6 * (1 + 0.01 * n), 2.0 * (1 + 0.02 * n)
        pts.append(charts.RooflinePoint(f"softmax {n}", intensity, tflops, "tilelang", n))
        pts.append(charts.RooflinePoint(f"softmax {n}", intensity, tflops * 1.05, "vendor", n))
    return pts


def test_roofline_labels_both_sides_without_overprinting():
    with matplotlib.rc_context(charts._rc()):
        fig, labels = charts._roofline_figure(
            crowded_points(),
            peak_tflops=989.0,
            peak_gbps=4800.0,
            xlabel="x",
            ylabel="y",
            tilelang="TileLang",
            vendor="PyTorch",
            roof="roof",
        )
        renderer = fig._get_renderer()
        boxes = [a.get_window_extent(renderer) for a in labels]
    assert len(labels) == 20
    assert sorted(a.get_text() for a in labels) == sorted(str(n) for n in range(1, 11) for _ in range(2))
    overlaps = [
        (labels[i].get_text(), labels[j].get_text())
        for i in range(len(boxes))
        for j in range(i + 1, len(boxes))
        if boxes[i].overlaps(boxes[j])
    ]
    assert not overlaps, overlaps


def test_roofline_svg_names_each_point_by_number():
    svg = charts.roofline(crowded_points()[:4], peak_tflops=989.0, peak_gbps=4800.0)
    assert sorted(re.findall(r'id="roofline\d+-pt-(\w+-\d+)"', svg)) == [
        "tilelang-1",
        "tilelang-2",
        "vendor-1",
        "vendor-2",
    ]
    assert "softmax 1" not in svg  # numbers on the chart, names in the report's table


def test_roof_legend_has_no_scientific_notation():
    svg = charts.roofline([charts.RooflinePoint("a", 2.0, 0.1, "tilelang", 1)], peak_tflops=1979.0, peak_gbps=12345.0)
    assert "1,979 TFLOP/s, 12,345 GB/s" in svg and "e+" not in svg


@pytest.mark.skipif(charts.cjk_font() is None, reason="needs a CJK font (apt-get install fonts-noto-cjk)")
def test_chinese_labels_draw_without_warnings(caplog):
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING, logger="matplotlib"):
        warnings.simplefilter("always")
        svg = charts.hot_ops(
            [("中文标签", 0.6, True)], xlabel="占剖析算子时间的比例", rewritten="已重写", kept="PyTorch"
        )
    assert "中文标签" in svg
    assert not [w for w in caught if "Glyph" in str(w.message) or "font" in str(w.message).lower()], [
        str(w.message) for w in caught
    ]
    assert not [r for r in caplog.records if r.name.startswith("matplotlib")], caplog.text


def test_flagged_speedups_are_grey_bars():
    svg = charts.speedups([("gemm", 1.4), ("softmax", 0.3, True), ("layernorm", 1.2, False)])

    def fill(gid: str) -> str:
        group = re.search(rf'<g id="speedup\d+-{gid}">(.*?)</g>', svg, re.S).group(1)
        return re.search(r"fill: (#[0-9a-f]{6})", group).group(1)

    assert fill("bar-1-flagged") == charts.FLAGGED  # 0.3x would be red; flagged, it is unconfirmed
    assert fill("bar-0") == fill("bar-2") == charts.PASS
    assert charts.FAIL not in re.search(r'<g id="speedup\d+-bar-1-flagged">.*?</g>', svg, re.S).group(0)
