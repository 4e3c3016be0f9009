"""A checklist file: read the YAML, validate it, and say exactly where it is wrong.

In: a path to a checklist (YAML; see checklists/default.yaml). Out: a frozen `Checklist`
validated with pydantic, or `ChecklistProblems` holding every problem found, each one line
naming the file, the line, the item (number and id) and what is allowed: a misspelt field
with the closest right one, an unknown metric with the closest name in the catalogue, a
bad comparator or severity with the allowed words, a duplicate id. Its message (what a run
prints) is the most useful problem and, when there are more, the command that lists them
all: `evaluate checklist validate FILE`.
"""

from __future__ import annotations

import difflib
import math
import re
import shlex
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


def _allowed(loc: tuple) -> list[str]:
    """The fields allowed where `loc` points: a waiver's, an item's or the checklist's own."""
    in_item = len(loc) >= 2 and loc[0] == "items" and isinstance(loc[1], int)
    in_waiver = in_item and len(loc) >= 3 and loc[2] == "waiver"
    return list(Waiver.model_fields) if in_waiver else _ITEM_FIELDS if in_item else _TOP_FIELDS


def _describe(err: dict[str, Any], raw: Any) -> str:
    """One pydantic error in words: what is wrong and what is allowed."""
    loc = err["loc"]
    kind = err["type"]
    leaf = str(loc[-1]) if loc else ""
    in_item = len(loc) >= 2 and loc[0] == "items" and isinstance(loc[1], int)
    in_waiver = in_item and len(loc) >= 3 and loc[2] == "waiver"
    allowed = _allowed(tuple(loc))
    if kind == "missing":
        return (
            f"missing required field '{leaf}' (an item needs: "
            f"{', '.join(f for f in _ITEM_FIELDS if Item.model_fields[f].is_required())})"
            if in_item and not in_waiver
            else f"missing required field '{leaf}'"
        )
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


def _line_of(loc: tuple, lines: dict[tuple, int]) -> int:
    """The line of the deepest part of `loc` yaml gave a line for (0: none)."""
    return next((lines[loc[:n]] for n in range(len(loc), -1, -1) if loc[:n] in lines), 0)


def _where(path: Path, loc: tuple, lines: dict[tuple, int], raw: Any) -> str:
    """ "file:line: item N (id 'x')" for the deepest location yaml gave a line for."""
    line = _line_of(loc, lines)
    where = f"{path}:{line}" if line else str(path)
    if len(loc) >= 2 and loc[0] == "items" and isinstance(loc[1], int):
        idx = loc[1]
        item = (
            raw["items"][idx]
            if isinstance(raw, dict) and isinstance(raw.get("items"), list) and idx < len(raw["items"])
            else None
        )
        ident = item.get("id") if isinstance(item, dict) else None
        where += f": item {idx + 1}" + (f" (id '{ident}')" if ident else "")
    return where


class ChecklistProblems(ChecklistError):
    """A checklist that does not validate. `problems` holds every problem found, each one
    line naming the file, the line and the item, in file order; the message is the most
    useful of them and, when there are more, the command that lists them all."""

    def __init__(self, path: Path, problems: list[str], headline: str | None = None):
        self.problems = tuple(problems)
        message = headline or problems[0]
        more = len(problems) - 1
        if more:
            message += (
                f" (and {more} more problem{'s' if more > 1 else ''}; "
                f"`evaluate checklist validate {shlex.quote(str(path))}` lists them all)"
            )
        super().__init__(message)

    @classmethod
    def one(cls, path: Path, problem: str) -> ChecklistProblems:
        """A file that cannot be read as a checklist at all: one problem, nothing else checked."""
        return cls(path, [problem])


def _read(path: Path) -> tuple[Any, dict[tuple, int]]:
    """The file's YAML and the line of every key; a file that cannot be read as a YAML
    mapping is one problem, and nothing else can be checked."""
    if not path.is_file():
        raise ChecklistProblems.one(
            path, f"checklist file not found: {path}; pass a YAML checklist such as {DEFAULT_CHECKLIST}"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ChecklistProblems.one(path, f"cannot read checklist {path}: {exc}; it must be a UTF-8 text file") from exc
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ChecklistProblems.one(
            path, f"{where}: not valid YAML ({problem}); check the indentation and quoting there"
        ) from exc
    except ValueError as exc:  # a scalar that reads as a date and is none (2027-13-45)
        raise ChecklistProblems.one(
            path, f"{path}: a value reads as a date but is none ({exc}); write dates as YYYY-MM-DD"
        ) from None
    if not isinstance(raw, dict):
        raise ChecklistProblems.one(
            path, f"{path}: a checklist is a mapping with 'name' and 'items' at the top level, got {type(raw).__name__}"
        )
    return raw, _lines(node)


def load(path: str | Path) -> Checklist:
    """Read and validate a checklist. Every problem is collected: `ChecklistProblems` says
    the most useful one (and how many more), and carries them all for `checklist validate`."""
    path = Path(path)
    raw, lines = _read(path)
    found: list[tuple[int, int, str]] = []  # (rank: the most useful first, line, problem)
    if "source" in raw:
        line = lines[("source",)]
        found.append((0, line, f"{path}:{line}: 'source' is set by the loader; remove it from the file"))
    checklist = None
    try:
        checklist = Checklist.model_validate({**{k: v for k, v in raw.items() if k != "source"}, "source": str(path)})
    except ValidationError as exc:
        errors = exc.errors()
        # pydantic also reports an empty tuple when an item fails; that is noise.
        errors = [e for e in errors if e["loc"] != ("items",) or e["type"] != "too_short"] or errors
        # A misspelt field also makes the real one "missing": the typo, with its suggestion, says it.
        suggested = {
            tuple(e["loc"][:-1]) + (close[0],)
            for e in errors
            if e["type"] == "extra_forbidden"
            and (close := difflib.get_close_matches(str(e["loc"][-1]), _allowed(tuple(e["loc"])), n=1))
        }
        rank = {"extra_forbidden": 0, "value_error": 1, "missing": 3}
        for e in errors:
            loc = tuple(e["loc"])
            if e["type"] == "missing" and loc in suggested:
                continue
            found.append(
                (rank.get(e["type"], 2), _line_of(loc, lines), f"{_where(path, loc, lines, raw)}: {_describe(e, raw)}")
            )
    items = raw.get("items")
    first: dict[str, int] = {}
    for i, item in enumerate(items if isinstance(items, list) else []):
        ident = item.get("id") if isinstance(item, dict) else None
        if not isinstance(ident, str):
            continue
        if ident in first:
            loc = ("items", i, "id")
            text = (
                f"{_where(path, loc, lines, raw)}: duplicate id '{ident}' (first used by item "
                f"{first[ident] + 1}); every item needs its own id"
            )
            found.append((4, _line_of(loc, lines), text))
        else:
            first[ident] = i
    if found:
        headline = min(found, key=lambda f: f[0])[2]
        raise ChecklistProblems(path, [text for _, _, text in sorted(found, key=lambda f: f[1])], headline)
    assert checklist is not None
    return checklist


def validate(path: str | Path) -> Checklist:
    """`evaluate checklist validate FILE`: the same checks as load(); its error's `problems`
    are printed one per line."""
    return load(path)
