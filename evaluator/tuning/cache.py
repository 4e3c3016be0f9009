"""The cache of tuned kernel configs, kept in the baseline store beside the baselines.

In: a store path and a key from `tuning.cache_key` (family, shape, dtype, device, driver,
CUDA, TileLang version, target). Out: `lookup` returns the config tuned for exactly that
key, or None; `save` writes one under `<store>/_tuning/<family>/<hash>.json`, where the
next recorded baseline commits it (so the cache travels with a shared store); `changes`
says which key fields differ from the closest cached entry, so the tuning stage can say
why it re-tunes (e.g. tilelang 0.1.15 -> 0.1.16). A changed toolchain is a miss, never a
stale hit. The store itself (creating it, its layout) comes from evaluator/baseline/store.py
and its lock from evaluator/baseline/lock.py; this module runs no git command of its own.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

from .. import __version__
from ..baseline import local, store
from ..baseline.ids import slug
from ..baseline.lock import LOCK_TIMEOUT_S, locked
from ..baseline.tables import cell, write_json
from ..errors import BaselineError


def _canonical(key: dict[str, Any]) -> str:
    if not isinstance(key, dict) or not key:
        raise BaselineError("a tuning cache key must be a non-empty dict; build it with tuning.cache_key(...)")
    return json.dumps(key, sort_keys=True, separators=(",", ":"), default=list)


def _path(root: Path, key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(_canonical(key).encode()).hexdigest()[:20]
    return root / local.TUNING_DIR / (slug(str(key.get("family", ""))) or "misc") / f"{digest}.json"


def lookup(store_path: local.StoreLike, key: dict[str, Any]) -> dict[str, Any] | None:
    """The config tuned for exactly this key, or None (never tuned, or any toolchain field changed)."""
    root = store.existing(store_path)
    if root is None:
        return None
    path = _path(root, key)
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    # The file name is a hash prefix; the stored key is the truth.
    if not isinstance(entry, dict) or _canonical(entry.get("key") or {"": None}) != _canonical(key):
        return None
    config = entry.get("config")
    return dict(config) if isinstance(config, dict) else None


def save(
    store_path: local.StoreLike, key: dict[str, Any], config: dict[str, Any], *, lock_timeout: float = LOCK_TIMEOUT_S
) -> None:
    """Store a tuned config under `_tuning/`; committed with the next recorded baseline."""
    path_for = _canonical(key)  # validate before touching the store
    root = store.open_store(store_path, create=True).path
    target = _path(root, key)
    entry = {
        "key": json.loads(path_for),
        "config": config,
        "saved": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "evaluator": __version__,
    }
    with locked(root, lock_timeout):
        # Written aside and renamed: a reader never sees half a file, a crash leaves a temp
        # file that the next recorded baseline's recovery removes.
        tmp = root / f"{local.TMP_PREFIX}{uuid.uuid4().hex}.json"
        try:
            write_json(tmp, entry)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, target)
        except (OSError, TypeError, ValueError) as e:
            tmp.unlink(missing_ok=True)
            raise BaselineError(
                f"could not save the tuned config to {target}: {e}; configs must be flat JSON (str -> int/str/bool)"
            ) from None


def changes(store_path: local.StoreLike, key: dict[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """Why a lookup missed: (field, cached value, now) against the closest cached entry of the
    same family, shape and dtype, so the tuning stage can say what changed before re-tuning."""
    root = store.existing(store_path)
    if root is None or not key:
        return ()
    folder = _path(root, key).parent
    same = ("family", "shape", "dtype")
    best: tuple[tuple[str, str, str], ...] | None = None
    for path in sorted(folder.glob("*.json")):
        with contextlib.suppress(OSError, ValueError):
            old = json.loads(path.read_text(encoding="utf-8")).get("key") or {}
            if any(_canonical({k: old.get(k)}) != _canonical({k: key.get(k)}) for k in same):
                continue
            fields = sorted(set(old) | set(key), key=str)
            diffs = tuple(
                (f, cell(old.get(f)), cell(key.get(f)))
                for f in fields
                if _canonical({f: old.get(f)}) != _canonical({f: key.get(f)})
            )
            if diffs and (best is None or len(diffs) < len(best)):
                best = diffs
    return best or ()
