"""Charts for the report: plain numbers in, inline SVG strings out.

In: lists of labels and numbers that the report's sections (evaluator/report/sections/)
extract from a RunResult (this module knows nothing about results). Out: an `<svg ...>`
string ready to drop into HTML, or None when there is nothing to draw, so the report can
say "not measured" instead.

Matplotlib is driven through `Figure` objects only (no pyplot state), text stays text
(`svg.fonttype: none`, so Chinese labels use the reader's CJK font and text remains
searchable), mathtext is off (a `$` in a git tag must not be parsed as a formula), and
every id inside one SVG gets a per-chart prefix so several charts can share a page.

Chinese labels need a CJK font for matplotlib to measure them; `cjk_font()` says whether
one is installed (also one installed after matplotlib cached its font list), and the
report keeps chart text in English where there is none rather than draw with missing
glyphs (which matplotlib warns about once per character).
"""

from __future__ import annotations

import functools
import io
import itertools
import math
import re
import subprocess
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Mapping, Sequence

import matplotlib
import matplotlib.transforms
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

# Same palette as report.css so charts and tables agree.
TILELANG = "#2b6cb0"
VENDOR = "#a0aec0"
PASS = "#2f855a"
FAIL = "#c53030"
WARN = "#b7791f"
INK = "#2d3748"
GRID = "#e2e8f0"
FLAGGED = "#a0aec0"  # a number the run flagged: grey, like its row in the report's tables
DIM = "#718096"


_CJK_NAMES = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Noto Sans SC",
    "Source Han Sans SC",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Droid Sans Fallback",
    "AR PL UMing CN",
)


@functools.lru_cache(maxsize=None)
def cjk_font() -> str | None:
    """The family name of an installed CJK font matplotlib can measure with, or None.

    Matplotlib caches its font list on first use; a font package installed later (the
    usual order: pip install, then apt-get install fonts-noto-cjk) is missing from that
    cache, so fontconfig is asked for a Chinese font file, which is then added.
    """
    from matplotlib import font_manager

    have = {f.name for f in font_manager.fontManager.ttflist}
    for name in _CJK_NAMES:
        if name in have:
            return name
    try:
        out = subprocess.run(["fc-list", ":lang=zh", "file"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None  # no fontconfig tools: treat as no CJK font, the report then keeps chart text ASCII
    paths = [line.split(":")[0].strip() for line in out.splitlines() if line.strip()]
    # The regular weight first: a family known only in bold makes matplotlib warn that it
    # has no normal weight on every label it measures.
    paths.sort(key=lambda p: (not re.search(r"(?i)regular", Path(p).name), Path(p).name))
    for path in paths:
        try:
            font_manager.fontManager.addfont(path)
            return font_manager.FontProperties(fname=path).get_name()
        except (OSError, RuntimeError, ValueError):
            continue  # a font file matplotlib cannot read (bitmap, odd collection): try the next
    return None


def _fonts() -> list[str]:
    """Fonts matplotlib measures text with: DejaVu, then the CJK font if one is installed,
    so Chinese labels get real widths. Only installed names, since every missing one logs."""
    cjk = cjk_font()
    return ["DejaVu Sans", *([cjk] if cjk else []), "sans-serif"]


def _rc() -> dict:
    # Built per chart, not at import: the CJK lookup runs only when a chart is drawn.
    return {
        "svg.fonttype": "none",
        "svg.hashsalt": "evaluator",  # stable ids: the same data gives the same SVG
        "text.parse_math": False,
        "font.family": _fonts(),
        "font.size": 9,
        "axes.edgecolor": "#718096",
        "axes.labelcolor": INK,
        "xtick.color": INK,
        "ytick.color": INK,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }


WIDTH_IN = 6.6  # fits an A4 page inside the report's margins
_counter = itertools.count()


def _svg(fig: Figure, name: str) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    # The metadata block and DOCTYPE carry namespace URLs; nothing in them is needed inline.
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    prefix = f"{name}{next(_counter)}-"
    ids = set(re.findall(r'\bid="([^"]+)"', text))

    def repl(m: re.Match) -> str:
        return m.group(1) + prefix + m.group(2) if m.group(2) in ids else m.group(0)

    text = re.sub(r'(\bid="|url\(#|href="#)([^")]+)', repl, text)
    # Text inherits the page's font list (report.css), which knows the report language.
    text = re.sub(r"font-family: [^;\"]*;? ?", "", text)
    return text.replace("<svg ", f'<svg class="chart chart-{name}" role="img" ', 1)


def _figure(height_in: float) -> Figure:
    fig = Figure(figsize=(WIDTH_IN, max(1.6, height_in)), layout="constrained")
    return fig


def _style(ax) -> None:
    ax.grid(True, axis="x", color=GRID, linewidth=0.6)
    ax.set_axisbelow(True)


def hot_ops(
    rows: Sequence[tuple[str, float, bool]],
    *,
    xlabel: str = "share of profiled operator time",
    rewritten: str = "rewritten in TileLang",
    kept: str = "stays in PyTorch",
) -> str | None:
    """Horizontal bars of each op family's share; rows are (label, share 0..1, rewritten)."""
    rows = [r for r in rows if r[1] is not None and math.isfinite(r[1])]
    if not rows:
        return None
    with matplotlib.rc_context(_rc()):
        fig = _figure(0.35 * len(rows) + 0.9)
        ax = fig.add_subplot()
        labels = [r[0] for r in rows][::-1]
        shares = [r[1] * 100 for r in rows][::-1]
        colors = [TILELANG if r[2] else VENDOR for r in rows][::-1]
        bars = ax.barh(range(len(rows)), shares, color=colors, height=0.65)
        ax.set_yticks(range(len(rows)), labels)
        ax.set_xlabel(xlabel + " (%)")
        for bar, v in zip(bars, shares):
            ax.text(
                bar.get_width() + 0.5,
                bar.get_y() + bar.get_height() / 2,
                f"{v:.1f}%",
                va="center",
                fontsize=8,
                color=INK,
            )
        ax.set_xlim(0, max(shares) * 1.15 + 1)
        from matplotlib.patches import Patch

        ax.legend(
            handles=[Patch(color=TILELANG, label=rewritten), Patch(color=VENDOR, label=kept)],
            loc="lower right",
            frameon=False,
            fontsize=8,
        )
        _style(ax)
        return _svg(fig, "hotops")


def speedups(
    rows: Sequence[tuple[str, float | None] | tuple[str, float | None, bool]],
    *,
    xlabel: str = "speedup vs vendor library (x)",
    guides: Sequence[float] = (0.5, 0.9),
    missing: str = "no TileLang time",
) -> str | None:
    """Per-op speedup bars with the 1.0 line (parity with the vendor library); rows with
    no speedup are drawn as a labelled gap so a failed kernel is not silently dropped. A
    row's optional third item marks its number as flagged (unstable, unverified,
    implausible): its bar is grey, never green or red, as its row in the table is."""
    if not rows or all(r[1] is None for r in rows):
        return None
    with matplotlib.rc_context(_rc()):
        fig = _figure(0.32 * len(rows) + 0.9)
        ax = fig.add_subplot()
        labels = [r[0] for r in rows][::-1]
        vals = [r[1] for r in rows][::-1]
        flagged = [bool(r[2]) if len(r) > 2 else False for r in rows][::-1]
        known = [v for v in vals if v is not None]
        hi = max(max(known) * 1.15, 1.3)
        for i, v in enumerate(vals):
            if v is None:
                ax.text(hi * 0.03, i, missing, va="center", fontsize=8, color=FAIL)
                continue
            if flagged[i]:
                color = FLAGGED
            else:
                color = PASS if v >= 1.0 else (WARN if v >= min(guides, default=0.5) else FAIL)
            ax.barh(i, v, color=color, height=0.65, gid=f"bar-{len(vals) - 1 - i}" + ("-flagged" if flagged[i] else ""))
            ax.text(v + hi * 0.01, i, f"{v:.2f}x", va="center", fontsize=8, color=DIM if flagged[i] else INK)
        ax.axvline(1.0, color=INK, linewidth=1.2, gid="parity")
        for g in guides:
            ax.axvline(g, color=DIM, linewidth=0.8, linestyle="--")
        ax.set_yticks(range(len(vals)), labels)
        ax.set_xlim(0, hi)
        ax.set_xlabel(xlabel)
        _style(ax)
        return _svg(fig, "speedup")


@dataclass(frozen=True)
class RooflinePoint:
    label: str
    intensity: float  # FLOP per byte moved
    tflops: float  # achieved
    kind: str  # "tilelang" | "vendor"
    # Drawn next to the point instead of `label`: op names at similar intensities overprint
    # one another, numbers stay short and the report's table under the chart names them.
    number: int | None = None


def _plain(v: float) -> str:
    """A number without scientific notation (roof legends: 989 TFLOP/s, 4,800 GB/s)."""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _place_labels(fig: Figure, ax, items: Sequence[tuple[float, float, str, str, str]]) -> list:
    """Annotate each (x, y, text, side, gid) point without overprinting.

    Labels of TileLang points go to the right of the marker and PyTorch's to the left, so
    the two points of one op (same intensity) are both readable; a label that would cover
    another label, a marker or the legend tries the next offset (higher, lower, further),
    and one moved away from its point gets a thin leader line. Works in display units
    after the layout is fixed, so what is checked is what is drawn.
    """
    fig.draw_without_rendering()  # fixes the constrained layout, so transData is final
    renderer = fig._get_renderer()
    taken = []
    for coll in ax.collections:  # the markers themselves
        for xy in coll.get_offsets():
            px, py = ax.transData.transform(xy)
            taken.append(matplotlib.transforms.Bbox.from_extents(px - 4, py - 4, px + 4, py + 4))
    legend = ax.get_legend()
    if legend is not None:
        taken.append(legend.get_window_extent(renderer))
    axes_box = ax.get_window_extent(renderer)
    # Offsets in points, nearest first: beside the marker, then up or down, then further out.
    steps = sorted(
        ((dx, dy) for dx in (0, 12, 24, 36) for dy in range(-56, 57, 7)), key=lambda d: (d[0] ** 2 + d[1] ** 2, -d[1])
    )
    out = []
    for x, y, text, side, gid in sorted(items, key=lambda it: (it[1], it[0])):
        sign = 1 if side == "right" else -1
        best = None
        for dx, dy in steps:
            offset = (sign * (5 + dx), dy)
            ann = ax.annotate(
                text,
                (x, y),
                xytext=offset,
                textcoords="offset points",
                fontsize=7,
                color=INK,
                ha="left" if sign > 0 else "right",
                va="center",
                annotation_clip=False,
            )
            ann.set_in_layout(False)  # labels must not shrink the axes after placement
            box = ann.get_window_extent(renderer).expanded(1.08, 1.15)
            clash = (
                any(box.overlaps(b) for b in taken)
                or not axes_box.contains(*box.min)
                or not axes_box.contains(*box.max)
            )
            if not clash:
                best = (ann, box, offset)
                break
            ann.remove()
        if best is None:  # crowded beyond every offset: keep the plain position, still numbered
            offset = (sign * 5, 0)
            ann = ax.annotate(
                text,
                (x, y),
                xytext=offset,
                textcoords="offset points",
                fontsize=7,
                color=INK,
                ha="left" if sign > 0 else "right",
                va="center",
                annotation_clip=False,
            )
            ann.set_in_layout(False)
            best = (ann, ann.get_window_extent(renderer), offset)
        ann, box, offset = best
        ann.set_gid(gid)  # "pt-tilelang-3": which point a label belongs to, in the SVG
        if offset[1] != 0 or abs(offset[0]) > 5:
            ax.annotate(
                "",
                (x, y),
                xytext=(offset[0] - sign * 1, offset[1]),
                textcoords="offset points",
                arrowprops={"arrowstyle": "-", "color": "#a0aec0", "linewidth": 0.5, "shrinkA": 0, "shrinkB": 3},
            ).set_in_layout(False)
        taken.append(box)
        out.append(ann)
    return out


def _roofline_figure(
    points: Sequence[RooflinePoint],
    *,
    peak_tflops: float | None,
    peak_gbps: float | None,
    xlabel: str,
    ylabel: str,
    tilelang: str,
    vendor: str,
    roof: str,
):
    """The roofline figure and its point labels (tests check the labels do not overlap)."""
    pts = [
        p for p in points if p.intensity > 0 and p.tflops > 0 and math.isfinite(p.intensity) and math.isfinite(p.tflops)
    ]
    if not pts:
        return None, []
    fig = _figure(3.6)
    ax = fig.add_subplot()
    xs = [p.intensity for p in pts]
    ys = [p.tflops for p in pts]
    x_lo, x_hi = min(xs) / 3, max(xs) * 3
    y_lo, y_hi = min(ys) / 4, max(ys) * 4
    if peak_tflops and peak_gbps:
        ridge = peak_tflops * 1000 / peak_gbps  # intensity where bandwidth meets compute
        x_lo, x_hi = min(x_lo, ridge / 10), max(x_hi, ridge * 10)
        grid = [x_lo * (x_hi / x_lo) ** (i / 200) for i in range(201)]
        ax.plot(
            grid,
            [min(peak_tflops, x * peak_gbps / 1000) for x in grid],
            color=INK,
            linewidth=1.2,
            label=f"{roof} ({_plain(peak_tflops)} TFLOP/s, {_plain(peak_gbps)} GB/s)",
        )
        y_hi = max(y_hi, peak_tflops * 3)
    elif peak_tflops:
        ax.axhline(peak_tflops, color=INK, linewidth=1.2, label=f"{roof} ({_plain(peak_tflops)} TFLOP/s)")
        y_hi = max(y_hi, peak_tflops * 3)
    for kind, color, marker, name in (("vendor", VENDOR, "s", vendor), ("tilelang", TILELANG, "o", tilelang)):
        sel = [p for p in pts if p.kind == kind]
        if sel:
            ax.scatter(
                [p.intensity for p in sel],
                [p.tflops for p in sel],
                color=color,
                marker=marker,
                s=28,
                label=name,
                zorder=3,
                edgecolors="white",
                linewidths=0.5,
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    # The default log formatter writes mathtext, which is off here: plain numbers instead.
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", color=GRID, linewidth=0.6)
    # Above the roof (upper left) nothing can be plotted, so the legend hides nothing there.
    ax.legend(frameon=False, fontsize=8, loc="upper left")
    labels = _place_labels(
        fig,
        ax,
        [
            (
                p.intensity,
                p.tflops,
                str(p.number) if p.number is not None else p.label,
                "right" if p.kind == "tilelang" else "left",
                f"pt-{p.kind}-{p.number if p.number is not None else i}",
            )
            for i, p in enumerate(pts)
        ],
    )
    return fig, labels


def roofline(
    points: Sequence[RooflinePoint],
    *,
    peak_tflops: float | None = None,
    peak_gbps: float | None = None,
    xlabel: str = "arithmetic intensity (FLOP/byte)",
    ylabel: str = "achieved TFLOP/s",
    tilelang: str = "TileLang",
    vendor: str = "vendor library",
    roof: str = "roofline",
) -> str | None:
    """Achieved TFLOP/s against arithmetic intensity on log axes, under the device's roof
    (min(peak compute, intensity x peak bandwidth)) when its peaks are known. Every point,
    TileLang's and the vendor library's, carries its number (or label)."""
    with matplotlib.rc_context(_rc()):
        fig, _ = _roofline_figure(
            points,
            peak_tflops=peak_tflops,
            peak_gbps=peak_gbps,
            xlabel=xlabel,
            ylabel=ylabel,
            tilelang=tilelang,
            vendor=vendor,
            roof=roof,
        )
        return None if fig is None else _svg(fig, "roofline")


def soak(
    window_ms: Sequence[float],
    *,
    seconds: float | None = None,
    xlabel: str = "time into the soak (s)",
    ylabel: str = "median latency per window (ms)",
    band_pct: float | None = 5.0,
) -> str | None:
    """Latency per soak window, with a band of +-band_pct around the first window."""
    vals = [v for v in window_ms if v is not None and math.isfinite(v)]
    if not vals:
        return None
    with matplotlib.rc_context(_rc()):
        fig = _figure(2.4)
        ax = fig.add_subplot()
        n = len(vals)
        step = (seconds / n) if seconds else 1.0
        xs = [(i + 0.5) * step for i in range(n)]
        if band_pct:
            first = vals[0]
            ax.axhspan(
                first * (1 - band_pct / 100),
                first * (1 + band_pct / 100),
                color=GRID,
                alpha=0.7,
                label=f"±{band_pct:g}%",
            )
        ax.plot(xs, vals, color=TILELANG, marker="o", markersize=3, linewidth=1.2)
        lo, hi = min(vals), max(vals)
        pad = max((hi - lo) * 0.5, hi * 0.08)
        ax.set_ylim(max(0, lo - pad), hi + pad)
        ax.set_xlabel(xlabel if seconds else xlabel.replace("(s)", "").strip())
        ax.set_ylabel(ylabel)
        ax.grid(True, color=GRID, linewidth=0.6)
        if band_pct:
            ax.legend(frameon=False, fontsize=8, loc="upper right")
        return _svg(fig, "soak")


def weekly_commits(
    counts: Sequence[float],
    *,
    labels: Sequence[str] | None = None,
    xlabel: str = "week",
    ylabel: str = "commits per week",
    guide: float | None = 1.0,
) -> str | None:
    """Bars of upstream commits per week, oldest first; `guide` draws the checklist's floor."""
    vals = [float(c) for c in counts if c is not None]
    if not vals:
        return None
    with matplotlib.rc_context(_rc()):
        fig = _figure(2.2)
        ax = fig.add_subplot()
        ax.bar(range(len(vals)), vals, color=TILELANG, width=0.8)
        if guide is not None:
            ax.axhline(guide, color=WARN, linewidth=1, linestyle="--")
        if labels and len(labels) == len(vals):
            step = max(1, math.ceil(len(vals) / 6))  # about six dates fit under the bars
            ticks = list(range(0, len(vals), step))
            ax.set_xticks(ticks, [labels[i] for i in ticks], fontsize=7)
        else:
            ax.set_xticks([0, len(vals) - 1], [f"-{len(vals) - 1}", "0"])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, axis="y", color=GRID, linewidth=0.6)
        ax.set_axisbelow(True)
        return _svg(fig, "commits")


def releases(
    items: Sequence[tuple[date, str]],
    *,
    as_of: date | None = None,
    today_label: str = "as of",
    xlabel: str = "release date",
) -> str | None:
    """Release tags on a time line, newest last, with the evaluation date marked."""
    items = sorted(((d, t) for d, t in items if isinstance(d, date)), key=lambda x: x[0])
    if not items:
        return None
    items = items[-12:]  # older releases say little about current health and crowd the labels
    with matplotlib.rc_context(_rc()):
        fig = _figure(1.7)
        ax = fig.add_subplot()
        xs = [d for d, _ in items]
        ax.plot(xs, [0] * len(xs), color=VENDOR, linewidth=1, zorder=1)
        ax.scatter(xs, [0] * len(xs), color=TILELANG, s=30, zorder=2)
        for i, (d, tag) in enumerate(items):
            ax.annotate(
                tag,
                (d, 0),
                textcoords="offset points",
                xytext=(0, 8 if i % 2 == 0 else -14),
                ha="center",
                fontsize=7,
                color=INK,
            )
        if as_of is not None:
            ax.axvline(as_of, color=WARN, linewidth=1, linestyle="--")
            ax.annotate(
                f"{today_label} {as_of.isoformat()}",
                (as_of, 0),
                textcoords="offset points",
                xytext=(-4, 18),
                ha="right",
                fontsize=7,
                color=WARN,
            )
        ax.set_yticks([])
        ax.spines["left"].set_visible(False)
        ax.set_ylim(-1, 1)
        ax.set_xlabel(xlabel)
        fig.autofmt_xdate(rotation=0, ha="center")
        return _svg(fig, "releases")


def trend(
    series: Mapping[str, Sequence[tuple[str, float]]],
    *,
    ylabel: str = "median time (ms)",
    xlabel: str = "baseline version",
    max_series: int = 8,
) -> str | None:
    """One line per measurement across baseline versions (x in first-seen order)."""
    series = {k: [(v, y) for v, y in pts if y is not None and math.isfinite(y)] for k, pts in series.items()}
    series = {k: pts for k, pts in series.items() if pts}
    if not series:
        return None
    versions: list[str] = []
    for pts in series.values():
        for v, _ in pts:
            if v not in versions:
                versions.append(v)
    if len(versions) < 2:
        return None  # one point per line is not a trend
    keys = list(series)[:max_series]
    with matplotlib.rc_context(_rc()):
        fig = _figure(2.8)
        ax = fig.add_subplot()
        for k in keys:
            pts = series[k]
            ax.plot(
                [versions.index(v) for v, _ in pts],
                [y for _, y in pts],
                marker="o",
                markersize=3,
                linewidth=1.2,
                label=k,
            )
        ax.set_xticks(range(len(versions)), versions, fontsize=7)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, color=GRID, linewidth=0.6)
        ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig, "trend")
