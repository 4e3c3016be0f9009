"""The report's words and numbers: i18n strings in, formatted text out.

In: a language ("en" or "zh"), the shipped templates/i18n/<lang>.yaml and a team's own
i18n/<lang>.yaml files (resources.template_dirs(), merged key by key on top), and the
numbers a section shows. Out: `Strings`, a callable that returns a key's text with its
{placeholders} filled and its plural form picked by the count (English words where the
language lacks a key), and `Fmt`, which formats numbers, times, ratios, intervals and
units in that language, every missing value as "not measured". `_ct` picks chart text
matplotlib can draw. Nothing here knows about sections or templates.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml

from . import charts
from .. import resources
from ..errors import ReportError
from ..results import Ratio

TEMPLATES = resources.SHIPPED_TEMPLATES  # the shipped folder; a team's folders come first, see html._loader()
LANGS = ("en", "zh")


# ---------------------------------------------------------------- strings


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, key by key, so a team's file needs only the keys it rewords."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def is_plural(node: Any) -> bool:
    return isinstance(node, dict) and "other" in node and set(node) <= {"zero", "one", "other"}


def plural_form(node: Any, n: float | None) -> Any:
    """The plural form of a {zero, one, other} string for count n (Chinese needs only other)."""
    if not is_plural(node):
        return node
    if n is not None and n == 0 and "zero" in node:
        return node["zero"]
    if n is not None and n == 1 and "one" in node:
        return node["one"]
    return node["other"]


class Strings:
    """One language's strings, falling back to English for a key it lacks.

    A string may be a mapping {zero, one, other}: the form is picked by the count passed
    as `n` (or `count`), so "1 check failed", "2 checks failed" and "nobody" read as prose.
    """

    def __init__(self, lang: str):
        if lang not in LANGS:
            raise ReportError(f"unknown report language '{lang}'; use one of: {', '.join(LANGS)}")
        self.lang = lang
        self._en = _load_strings("en")
        self._own = _load_strings(lang) if lang != "en" else self._en

    def _get(self, path: list[str]) -> Any:
        for table in (self._own, self._en):
            node: Any = table
            for part in path:
                if not isinstance(node, dict) or part not in node:
                    node = None
                    break
                node = node[part]
            if node is not None:
                return node
        raise ReportError(f"report string '{'.'.join(path)}' missing from templates/i18n/en.yaml; add it there")

    def __call__(self, key: str, /, count: float | None = None, **kw: Any) -> str:
        n = count if count is not None else kw.get("n") if isinstance(kw.get("n"), (int, float)) else None
        text = plural_form(self._get(key.split(".")), n)
        if count is not None:  # the count picks the plural form and may be quoted too ("all {count} blockers")
            kw = {"count": num(count) or count, **kw}
        return str(text).format_map(_Keep(kw)) if kw else str(text)

    def raw(self, key: str) -> Any:
        return self._get(key.split("."))

    def has(self, key: str) -> bool:
        try:
            self._get(key.split("."))
            return True
        except ReportError:
            return False

    def get(self, key: str, default: str) -> str:
        """For values that come from data (a severity, a status): unknown ones show as is."""
        return self(key) if self.has(key) else default

    def _metric_node(self, name: str, field: str) -> Any:
        """The metric's own words, else (one per target) the shared words of
        `portability.<target>.kernels_ok`, else ReportError."""
        try:
            return self._get(["metrics", name, field])
        except ReportError:
            key = metric_strings_key(name)
            if key == name:
                raise
            return self._get(["metrics", key, field])

    def raw_metric(self, name: str, field: str) -> Any:
        try:
            return self._metric_node(name, field)
        except ReportError:
            return ""

    def metric(self, name: str, field: str, /, count: float | None = None, **kw: Any) -> str:
        # Metric names contain dots, so they cannot go through the dotted lookup. A baseline
        # written by another version may name a metric this one has no words for.
        try:
            text = str(plural_form(self._metric_node(name, field), count))
        except ReportError:
            fallback = {
                "label": name,
                "fail": "next.unknown_fail",
                "next": "next.unknown_next",
                "missing": "next.unknown_missing",
            }[field]
            text = fallback if field == "label" else str(self._get(fallback.split(".")))
        return text.format_map(_Keep({"metric": name, "target": _target_name(name), **kw}))


PER_TARGET = re.compile(r"^portability\.([a-z0-9_]+)\.kernels_ok$")


def metric_strings_key(name: str) -> str:
    """Where a metric's words live in i18n/<lang>.yaml: its own name, except the one
    metric per portability target, which share `portability.<target>.kernels_ok`."""
    return "portability.<target>.kernels_ok" if PER_TARGET.match(name) else name


def _target_name(metric: str) -> str:
    """The accelerator a per-target metric names ("NVIDIA H100"), or ""."""
    m = PER_TARGET.match(metric)
    if not m:
        return ""
    from ..device import targets  # noqa: PLC0415 - only for the per-target metrics

    spec = targets.TARGETS.get(m.group(1))
    return spec.name if spec else m.group(1)


class _Keep(dict):
    """format_map mapping that leaves unknown {placeholders} as they are."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _read_strings(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ReportError(f"cannot read report strings {path}: {exc}; fix or restore it") from exc
    if not isinstance(data, dict):
        raise ReportError(f"report strings {path} must be a YAML mapping; fix or restore it")
    return data


def _load_strings(lang: str) -> dict[str, Any]:
    """The shipped strings with a team's i18n/<lang>.yaml files merged on top."""
    shipped = TEMPLATES / "i18n" / f"{lang}.yaml"
    if not shipped.is_file():
        raise ReportError(f"report strings {shipped} are missing; reinstall the package or restore templates/")
    data = _read_strings(shipped)
    for folder in reversed(resources.template_dirs()):  # least specific first, so the team's wins
        path = folder / "i18n" / f"{lang}.yaml"
        if folder != TEMPLATES and path.is_file():
            data = _merge(data, _read_strings(path))
    return data


# ---------------------------------------------------------------- formatting


def _strip(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text


def num(v: float | None, digits: int = 3, plain: bool = False) -> str | None:
    """Plain numbers for people: 120, 7,460, 12.5, 1.25, 0.048. Scientific notation only
    below 0.001 (errors such as 1.2e-06) and not with `plain` (rates such as 0.00098
    TFLOP/s), never for days, times or counts."""
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100 or float(v).is_integer():
        return f"{v:.0f}"
    if a >= 10:
        return _strip(f"{v:.1f}")
    if a >= 1:
        return _strip(f"{v:.2f}")
    if a >= 0.001:
        return _strip(f"{v:.{max(digits, 2)}g}")  # g keeps plain notation down to 1e-4
    if plain:
        return _strip(f"{v:.{digits - 1 - math.floor(math.log10(a))}f}") if a > 0 else "0"
    return f"{v:.{max(digits - 1, 1)}e}"


class Fmt:
    """Formatting bound to one language: every None becomes "not measured"."""

    def __init__(self, t: Strings):
        self.t = t
        self.na = t("not_measured")

    def num(self, v: float | None, digits: int = 3) -> str:
        return num(v, digits) or self.na

    def ms(self, v: float | None) -> str:
        if v is None or not math.isfinite(v):
            return self.na
        return f"{v:.3f}" if v < 100 else (f"{v:.1f}" if v < 10000 else f"{v:,.0f}")

    def x(self, v: float | None) -> str:
        return self.na if v is None or not math.isfinite(v) else f"{v:.2f}×"

    def pct(self, v: float | None, digits: int = 1) -> str:
        return self.na if v is None or not math.isfinite(v) else f"{v * 100:.{digits}f}%"

    def tol(self, v: float | None) -> str:
        """A tolerance in two significant digits: 1.4e-05, 0.0057, 0.005, 2e-05."""
        return self.na if not finite(v) else f"{v:.2g}"

    def yn(self, v: bool | None) -> str:
        return self.na if v is None else self.t("bool_yes" if v else "bool_no")

    def us(self, v: float | None) -> str:
        return self.na if v is None or not math.isfinite(v) else f"{num(v)} µs"

    def secs(self, v: float | None) -> str:
        """Seconds as people say them: "29 s", "3.2 s", "0.8 s"."""
        if v is None or not math.isfinite(v):
            return self.na
        return f"{v:.0f} s" if v >= 10 else f"{_strip(f'{v:.1f}')} s"

    def mb(self, v: float | None) -> str:
        return self.na if v is None or not math.isfinite(v) else f"{num(v)} MB"

    def interval(self, r: Ratio | None) -> str:
        """ "1.05–1.12×": the 95% interval of a paired ratio, or "" when there is none."""
        if r is None or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in (r.low, r.high)):
            return ""
        return f"{r.low:.2f}–{r.high:.2f}×"

    def x_ci(self, v: float | None, r: Ratio | None) -> str:
        """A speedup with its interval: "1.09× (1.05–1.12×)"."""
        ci = self.interval(r)
        return f"{self.x(v)} ({ci})" if ci and v is not None else self.x(v)

    def unit(self, v: float | None, unit: str) -> str:
        if v is None:
            return self.na
        if unit == "1/0":
            return self.yn(bool(v))
        if unit == "fraction":
            return self.pct(v, 0)
        if unit == "x":
            text = f"{v:.2f}"
        elif unit == "%":
            text = f"{v:.1f}"
        else:
            text = num(v) or self.na
        if not unit:
            return text
        # Units the strings do not know (a metric added later) still show, untranslated.
        if not self.t.has(f"units.{unit}"):
            return f"{text} {unit}"
        return str(plural_form(self.t.raw(f"units.{unit}"), 1 if text == "1" else v)).format(v=text)

    def config(self, cfg: dict[str, Any] | None) -> str:
        return ", ".join(f"{k}={v}" for k, v in cfg.items()) if cfg else self.na


def day(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).date().isoformat()
    except (TypeError, ValueError):
        return iso or ""


def as_date(value: Any) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).date()
        except ValueError:
            return None
    return None


def finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def ct(key: str, t: Strings) -> str:
    """Chart text: translated where matplotlib has the glyphs, English otherwise, so a
    Chinese report on a machine without a CJK font gets readable charts and no warnings."""
    text = t(key)
    if text.isascii() or charts.cjk_font():
        return text
    return Strings("en")(key)
