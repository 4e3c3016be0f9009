"""The versioned baseline store, and comparisons between runs.

In: finished `RunResult`s, a store spec (a git repository; default `reports/baselines/`;
or a shared remote's git URL or bare repository, worked on through a local clone) and
baseline ids `<model>/<platform>/<version>`. Out: one folder, one commit and one annotated
tag per recorded run, `RunResult`s loaded back from the store alone (baselines pulled from
other hosts included), `Comparison`s between two runs, trend points across baselines, the
rows the CLI prints, and `Sync`s saying what a pull or push moved. The modules:

  ids.py      baseline ids and the slugs they are made of; the id scheme across hosts
  local.py    a local store folder: what it is, opening and creating one, the names of its files
  store.py    the git store: check, lock, record, recover, roll back, list, load, trend, diff
  plumbing.py git in a store: commands, refs, committed files, the writer id
  remote.py   a shared remote: pull, push (fetch, rebase, retry; never forced)
  clone.py    a shared remote's spec and its local clone; git talking to the remote
  rebase.py   a clone brought onto its remote's branch, every local baseline kept
  lock.py     the store's cross-process lock
  tables.py   the files of one baseline folder (CSV tables via pandas, result.json, manifest)
  schema.py   reading a stored result back: schema checks and migrations
  compare.py  the comparison: thresholds from noise, regressions, environment changes, causes
  rows.py     the rows `baseline show/diff` and `compare` print
  (tuned configs are kept in the store too, by evaluator/tuning/cache.py)

A shared remote: `open_store(spec)` takes a folder, as before, or a shared remote (a git
URL, or the path of a bare repository), which it clones once into
`~/.cache/evaluator/stores/<slug>` (`$EVALUATOR_STORE_CACHE`, or `clone=`) and returns as a
`Store` whose `.path` is the clone and `.remote` the URL; `record` and every reader accept
that `Store`, the URL or a clone's folder alike. `pull(store)` and `push(store)` sync the
clone (fetch, rebase, push, retried when another host pushed first; never forced) and
return a `Sync` naming the baselines that moved; `record_and_push` is `evaluate --push`. Ids recorded in a clone
carry a writer
suffix, so hosts recording at once never collide (the scheme is in ids.py).

This package re-exports the names its callers use, so `baseline.record(...)` and
`from evaluator.baseline import plausible_cause` work; code inside the package imports from
the module that owns a name. Only compare, rows and ids are
imported eagerly: the store, its git modules and the tables (pandas) load on first use, so a caller
that only compares or prints never needs git (`python -c "import evaluator.baseline.compare"`
works on a machine without it).

`compare` is both a submodule and the function it defines; the package attribute is the
function. Import the module's other names with
`from evaluator.baseline.compare import ...`.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..results import SCHEMA_VERSION  # noqa: F401  (re-exported: callers read it from the package)
from .compare import E2E_TILELANG, E2E_TORCH, IGNORED_SETTINGS, compare, plausible_cause  # noqa: F401
from .ids import VERSION_RE, baseline_id, model_slug  # noqa: F401
from .rows import COMPARISON_COLUMNS, comparison_rows, environment_rows, show_rows

__all__ = [
    "DEFAULT_STORE",
    "Store",
    "open_store",
    "record",
    "list_baselines",
    "load",
    "previous",
    "pull",
    "push",
    "record_and_push",
    "PushError",
    "Sync",
    "compare",
    "diff",
    "trend",
    "show_rows",
    "comparison_rows",
    "environment_rows",
    "COMPARISON_COLUMNS",
    "model_slug",
    "baseline_id",
    "E2E_TILELANG",
    "E2E_TORCH",
]

# name here -> (module, name there), imported on first use (PEP 562).
_LAZY: dict[str, tuple[str, str]] = {
    **{
        name: ("evaluator.baseline.store", name)
        for name in (
            "DEFAULT_STORE",
            "open_store",
            "record",
            "list_baselines",
            "load",
            "previous",
            "trend",
            "diff",
            "check_health",
        )
    },
    **{
        name: ("evaluator.baseline.local", name)
        for name in ("MARKER", "TMP_PREFIX", "TUNING_DIR", "Store", "StoreLike")
    },
    **{name: ("evaluator.baseline.remote", name) for name in ("pull", "push", "record_and_push", "PushError", "Sync")},
    **{
        name: ("evaluator.baseline.clone", name)
        for name in ("is_remote", "remote_of", "clone_path", "DEFAULT_CLONE_CACHE")
    },
    "LOCK_NAME": ("evaluator.baseline.lock", "LOCK_NAME"),
    "LOCK_TIMEOUT_S": ("evaluator.baseline.lock", "LOCK_TIMEOUT_S"),
    "TABLES": ("evaluator.baseline.tables", "TABLES"),
}


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # later lookups (and monkeypatch.setattr) see a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
