"""The conventions every record shares, and the round trip to JSON.

In: any record of this package (a frozen dataclass), or the plain dict one became. Out:
`to_dict`, a JSON-ready dict (tuples as lists, NaN and Inf as None); `from_dict`, the
record rebuilt and validated by pydantic; `to_json`; and the shape text form
("256x512x128") that tables, reports and the command line use (`shape_str`,
`parse_shape`). `Shape`, `KernelConfig` and `SCHEMA_VERSION` live here so that every
module of the package can import them without importing one another.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, TypeVar

from pydantic import TypeAdapter

T = TypeVar("T")

# Written into every RunResult and baseline manifest: baseline/schema.py migrates an older
# result.json up to it and refuses a newer one, rather than half-read either.
SCHEMA_VERSION = 1

Shape = tuple[int, ...]
KernelConfig = dict[str, Any]


def _clean(value: Any) -> Any:
    """JSON has no NaN/Inf: store them as None so files stay standard JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def to_dict(obj: Any) -> dict[str, Any]:
    """A dataclass as a JSON-ready dict (tuples become lists, NaN becomes None)."""
    return _clean(dataclasses.asdict(obj))


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild (and validate) a dataclass from `to_dict` output."""
    # pydantic resolves each record's string annotations (`from __future__ import
    # annotations`) in the module that defines it: every module of this package therefore
    # imports, at run time, the records its fields name.
    return TypeAdapter(cls).validate_python(data)


def to_json(obj: Any) -> str:
    return json.dumps(to_dict(obj), indent=2, sort_keys=False)


def shape_str(shape: Shape) -> str:
    return "x".join(str(int(s)) for s in shape)


def parse_shape(text: str) -> Shape:
    return tuple(int(p) for p in text.lower().replace(",", "x").split("x") if p.strip())
