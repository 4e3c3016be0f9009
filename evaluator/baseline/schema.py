"""Schema versions of stored results: what a baseline's manifest.json says it was written
with, and how its result.json is brought up to the version this evaluator reads.

In: a baseline's manifest and result.json as dicts (read from the store's committed tree)
and its id. Out: the `RunResult`, after the migration steps from its schema_version up to
SCHEMA_VERSION; or a one-line BaselineError naming the evaluator version that can read it
(a newer schema, a missing migration step, a result that does not match its schema). A
schema bump adds its step to MIGRATIONS, so that old stores stay readable. No git.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import __version__
from ..errors import BaselineError
from ..results import SCHEMA_VERSION, RunResult, from_dict

# schema_version n -> function upgrading a result.json dict from n to n + 1. Empty while
# SCHEMA_VERSION is 1.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__


def check_manifest(manifest: dict[str, Any], bid: str) -> tuple[int, str]:
    """(schema_version, the evaluator that wrote it) of a manifest this evaluator can read."""
    version = manifest.get("schema_version")
    writer = str(manifest.get("written_by") or manifest.get("evaluator") or "unknown")
    if not isinstance(version, int) or isinstance(version, bool):
        raise BaselineError(
            f"manifest of baseline {bid} has no integer schema_version; "
            "restore it with git checkout or remove that baseline"
        )
    if version > SCHEMA_VERSION:
        raise BaselineError(
            f"baseline {bid} uses schema_version {version}, newer than this evaluator "
            f"({__version__}) reads ({SCHEMA_VERSION}); upgrade to evaluator {writer} "
            "or newer to read it"
        )
    return version, writer


def _migrate(data: dict[str, Any], version: int, bid: str, writer: str) -> dict[str, Any]:
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise BaselineError(
                f"baseline {bid} uses schema_version {version}, which this evaluator "
                f"({__version__}) cannot migrate to {SCHEMA_VERSION}; read it with evaluator "
                f"{writer}"
            )
        data = step(dict(data))
        version += 1
        data["schema_version"] = version
    return data


def result_from(data: dict[str, Any], version: int, writer: str, bid: str) -> RunResult:
    """The RunResult of a result.json written at schema `version` by evaluator `writer`."""
    data = _migrate(data, version, bid, writer)
    try:
        return from_dict(RunResult, data)
    except Exception as e:  # pydantic's ValidationError: report its first line only
        raise BaselineError(
            f"result.json of baseline {bid} does not match schema_version "
            f"{SCHEMA_VERSION}: {_first_line(e)}; restore it with git checkout"
        ) from None
