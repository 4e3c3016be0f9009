"""A checklist file: read the YAML, validate it, and say exactly where it is wrong.

In: a path to a checklist (YAML; see checklists/default.yaml). Out: a frozen `Checklist`
validated with pydantic, or a one-line `ChecklistError` naming the file, the line, the
item (number and id) and what is allowed: a misspelt field with the closest right one, an
unknown metric with the closest name in the catalogue, a bad comparator or severity with
the allowed words.
"""

from __future__ import annotations

import difflib
import math
import re
from datetime import date
from pathlib import Path
from typing import Any, Callable, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import ChecklistError
from ..resources import DEFAULT_CHECKLIST
from .catalogue import METRICS

COMPARATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda v, t: v >= t or math.isclose(v, t, rel_tol=1e-9, abs_tol=1e-12),
    "<=": lambda v, t: v <= t or math.isclose(v, t, rel_tol=1e-9, abs_tol=1e-12),
    ">": lambda v, t: v > t,
    "<": lambda v, t: v < t,
    # 1/0 metrics arrive as floats; exact float equality would be a trap for thresholds
    # written as 0.95 in YAML.
    "==": lambda v, t: math.isclose(v, t, rel_tol=1e-9, abs_tol=1e-12),
    "!=": lambda v, t: not math.isclose(v, t, rel_tol=1e-9, abs_tol=1e-12),
}
SEVERITIES = ("blocker", "major", "minor")
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class Waiver(BaseModel):
    """A signed-off exception to one item. After `expires` it no longer applies."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str = Field(min_length=1)
    who: str = Field(min_length=1)
    expires: date


class Item(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    title: str = Field(min_length=1)
    metric: str
    comparator: str
    threshold: float
    severity: str
    rationale: str = Field(min_length=1)
    # False: the item only applies when its metric exists (a vendor fork, a previous
    # baseline); when not measured it is still listed but does not hold back a GO.
    required: bool = True
    waiver: Waiver | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _ID_RE.match(v):
            raise ValueError("id must be lower-case letters, digits, '.', '_' or '-', starting with a letter or digit")
        return v

    @field_validator("metric")
    @classmethod
    def _metric(cls, v: str) -> str:
        if v not in METRICS:
            close = difflib.get_close_matches(v, METRICS, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ValueError(f"unknown metric '{v}'; {hint}list them with `evaluate checklist metrics`")
        return v

    @field_validator("comparator")
    @classmethod
    def _comparator(cls, v: str) -> str:
        if v not in COMPARATORS:
            raise ValueError(f"comparator '{v}' is not allowed; use one of {', '.join(COMPARATORS)}")
        return v

    @field_validator("severity")
    @classmethod
    def _severity(cls, v: str) -> str:
        if v not in SEVERITIES:
            raise ValueError(f"severity '{v}' is not allowed; use one of {', '.join(SEVERITIES)}")
        return v


class Checklist(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    description: str = ""
    # "fail": a required item that was not measured counts as failed (a production gate
    # wants evidence for everything); "conditional": it only prevents a plain GO.
    on_not_evaluated: Literal["conditional", "fail"] = "conditional"
    items: tuple[Item, ...] = Field(min_length=1)
    source: str = ""  # the file it came from; set by load()


_ITEM_FIELDS = list(Item.model_fields)
_TOP_FIELDS = [f for f in Checklist.model_fields if f != "source"]


def _lines(node: yaml.Node | None) -> dict[tuple, int]:
    """Line numbers (1-based) of every mapping key and sequence entry, by path."""
    out: dict[tuple, int] = {}

    def walk(n: yaml.Node, path: tuple) -> None:
        out.setdefault(path, n.start_mark.line + 1)
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
                out[path + (key,)] = k.start_mark.line + 1
                walk(v, path + (key,))
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                out[path + (i,)] = v.start_mark.line + 1
                walk(v, path + (i,))

    if node is not None:
        walk(node, ())
    return out


def _describe(err: dict[str, Any], raw: Any) -> str:
    """One pydantic error in words: what is wrong and what is allowed."""
    loc = err["loc"]
    kind = err["type"]
    leaf = str(loc[-1]) if loc else ""
    in_item = len(loc) >= 2 and loc[0] == "items" and isinstance(loc[1], int)
    in_waiver = in_item and len(loc) >= 3 and loc[2] == "waiver"
    allowed = (list(Waiver.model_fields) if in_waiver else _ITEM_FIELDS if in_item else _TOP_FIELDS)
    if kind == "missing":
        return f"missing required field '{leaf}' (an item needs: {', '.join(f for f in _ITEM_FIELDS if Item.model_fields[f].is_required())})" \
            if in_item and not in_waiver else f"missing required field '{leaf}'"
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(leaf, allowed, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return f"unknown field '{leaf}'; {hint}allowed fields: {', '.join(allowed)}"
    if kind == "value_error":
        return str(err["ctx"]["error"]) if "ctx" in err else err["msg"]
    if leaf == "threshold":
        return f"threshold must be a number, got {err.get('input')!r}"
    if leaf == "expires":
        return f"waiver expiry must be a date written YYYY-MM-DD, got {err.get('input')!r}"
    if leaf == "items" and kind == "too_short":
        return "the checklist has no items; add at least one under 'items:'"
    if leaf == "on_not_evaluated":
        return f"on_not_evaluated must be 'conditional' or 'fail', got {err.get('input')!r}"
    if kind in ("tuple_type", "model_type", "dict_type"):
        want = "a list of items" if leaf == "items" else "a mapping of field: value"
        return f"'{leaf or 'item'}' must be {want}"
    return f"'{leaf}': {err['msg']}"


def _where(path: Path, loc: tuple, lines: dict[tuple, int], raw: Any) -> str:
    """"file:line: item N (id 'x')" for the deepest location yaml gave a line for."""
    line = None
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            line = lines[loc[:n]]
            break
    where = f"{path}:{line}" if line else str(path)
    if len(loc) >= 2 and loc[0] == "items" and isinstance(loc[1], int):
        idx = loc[1]
        item = raw["items"][idx] if isinstance(raw, dict) and isinstance(raw.get("items"), list) \
            and idx < len(raw["items"]) else None
        ident = item.get("id") if isinstance(item, dict) else None
        where += f": item {idx + 1}" + (f" (id '{ident}')" if ident else "")
    return where


def load(path: str | Path) -> Checklist:
    """Read and validate a checklist; any problem raises ChecklistError naming the spot."""
    path = Path(path)
    if not path.is_file():
        raise ChecklistError(f"checklist file not found: {path}; pass a YAML checklist such as {DEFAULT_CHECKLIST}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ChecklistError(f"cannot read checklist {path}: {exc}; it must be a UTF-8 text file") from exc
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ChecklistError(f"{where}: not valid YAML ({problem}); check the indentation and quoting there") from exc
    if not isinstance(raw, dict):
        raise ChecklistError(f"{path}: a checklist is a mapping with 'name' and 'items' at the top level, "
                             f"got {type(raw).__name__}")
    if "source" in raw:
        raise ChecklistError(f"{path}: 'source' is set by the loader; remove it from the file")
    lines = _lines(node)
    try:
        checklist = Checklist.model_validate({**raw, "source": str(path)})
    except ValidationError as exc:
        errors = exc.errors()
        # pydantic also reports an empty tuple when an item fails; that is noise.
        real = [e for e in errors if e["loc"] != ("items",) or e["type"] != "too_short"]
        errors = real or errors
        # A misspelt field also makes the real one "missing": the typo is the useful message.
        rank = {"extra_forbidden": 0, "value_error": 1, "missing": 3}
        errors.sort(key=lambda e: rank.get(e["type"], 2))
        first = errors[0]
        more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
        raise ChecklistError(f"{_where(path, tuple(first['loc']), lines, raw)}: {_describe(first, raw)}{more}") from None
    seen: dict[str, int] = {}
    for i, item in enumerate(checklist.items):
        if item.id in seen:
            where = _where(path, ("items", i, "id"), lines, raw)
            raise ChecklistError(f"{where}: duplicate id '{item.id}' (first used by item {seen[item.id] + 1}); "
                                 "every item needs its own id")
        seen[item.id] = i
    return checklist


def validate(path: str | Path) -> Checklist:
    """`evaluate checklist validate FILE`: the same checks as load()."""
    return load(path)
