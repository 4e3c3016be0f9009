"""The versioned baseline store, and comparisons between runs.

In: finished `RunResult`s, a store path (a git repository; default `reports/baselines/`,
possibly a clone of a shared remote) and baseline ids `<model>/<platform>/<version>`.
Out: one folder, one commit and one annotated tag per recorded run (manifest.json,
result.json and CSV tables), `RunResult`s loaded back from the store alone, `Comparison`s
between two runs (per op and end to end, with noise-aware thresholds and the environment
changes that probably explain them), trend points across baselines, and the cache of tuned
kernel configs keyed by toolchain. The only repository this module touches is the store.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import datetime as dt
import fcntl
import hashlib
import json
import math
import os
import re
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, Union

import git

from . import __version__
from .errors import BaselineError
from .results import (
    SCHEMA_VERSION, BaselineRef, Change, Comparison, RunResult, Timing, TrendPoint,
    from_dict, shape_str, to_dict,
)

__all__ = [
    "DEFAULT_STORE", "Store", "open_store", "record", "list_baselines", "load", "previous",
    "compare", "diff", "trend", "tuning_cache_lookup", "tuning_cache_save",
    "tuning_cache_changes", "show_rows", "comparison_rows", "environment_rows",
    "COMPARISON_COLUMNS", "model_slug", "baseline_id", "E2E_TILELANG", "E2E_TORCH",
]

DEFAULT_STORE = Path("reports") / "baselines"
MARKER = ".evaluator-store"  # tells a store apart from any other git repository
LOCK_NAME = ".evaluator.lock"
TMP_PREFIX = ".tmp-"
TUNING_DIR = "_tuning"
LOCK_TIMEOUT_S = 120.0
VERSION_RE = re.compile(r"^(\d{4})Q([1-4])-([1-9]\d*)$")
TABLES = ("hot_ops.csv", "op_bench.csv", "tuning.csv", "verify.csv", "e2e.csv", "soak.csv",
          "upstream.csv", "checklist.csv")
E2E_TILELANG = "end-to-end tilelang"  # the model with the TileLang kernels swapped in
E2E_TORCH = "end-to-end torch"  # the unmodified model: separates driver/torch drift from kernel drift
COMPARISON_COLUMNS = ("kind", "key", "reference ms", "candidate ms", "ratio", "threshold", "status")
# Settings that differ on every run by construction; listing them as "changes" would be noise.
IGNORED_SETTINGS = frozenset({"out", "out_dir", "output", "run_dir", "store", "resume", "run_id"})
# z-distance between p10 and p90 of a normal distribution (2 x 1.2816): turns the p10-p90
# span into a standard-deviation estimate that one slow outlier cannot inflate, unlike cv.
_P10_P90_SIGMAS = 2.5631

# schema_version n -> function upgrading a result.json dict from n to n + 1. Empty while
# SCHEMA_VERSION is 1; a schema bump adds its step here so old stores stay readable.
_MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}

# Variables that point git at another repository (exported inside git hooks, for one).
_GIT_LOCATION_VARS = frozenset({"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                                "GIT_COMMON_DIR", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_PREFIX"})

_GITIGNORE = f"/{LOCK_NAME}\n/{TMP_PREFIX}*\n"
_README = """# Baseline store

Written by `evaluate` (package `evaluator`). One folder, commit and annotated tag per run:
`<model>/<platform>/<version>/` with manifest.json, result.json and CSV tables; tuned
kernel configs live under `_tuning/`, keyed by toolchain. Push to a shared remote to
collect baselines from several machines; `evaluate baseline list --store PATH` lists them.
"""

StoreLike = Union[str, os.PathLike, "Store"]


# ---------------------------------------------------------------- ids


def _slug(text: str) -> str:
    """Lower-case, path- and ref-safe; idempotent so a slug can be passed where a name is."""
    s = re.sub(r"[^a-z0-9._-]+", "-", str(text).strip().lower())
    s = re.sub(r"\.{2,}", ".", s)
    s = re.sub(r"-{2,}", "-", s).strip("-._")
    if s.endswith(".lock"):  # git refuses ref components ending in .lock
        s = s[:-5] + "-lock"
    if len(s) > 80:
        s = s[:67].rstrip("-._") + "-" + hashlib.sha256(s.encode()).hexdigest()[:12]
    return s


def model_slug(name: str) -> str:
    """"bert-tiny" -> "bert-tiny"; "pkg.mod:factory" -> "pkg.mod-factory"."""
    s = _slug(name)
    if not s:
        raise BaselineError(f"model name {name!r} has no letters or digits to name a baseline after; "
                            "give the model a name")
    return s


def baseline_id(model: str, platform: str, version: str) -> str:
    return f"{model_slug(model)}/{_platform_slug(platform)}/{version}"


def _platform_slug(platform: str) -> str:
    s = _slug(platform)
    if not s:
        raise BaselineError(f"platform {platform!r} is empty; the hardware stage must set "
                            "Hardware.platform (e.g. 'h200', 'cpu-x86_64')")
    return s


def _parse_id(baseline_id: str) -> tuple[str, str, str]:
    parts = str(baseline_id).strip().strip("/").split("/")
    if len(parts) != 3 or not VERSION_RE.match(parts[2]) or any(_slug(p) != p for p in parts[:2]):
        raise BaselineError(f"baseline id {baseline_id!r} is not <model>/<platform>/<YYYY>Q<n>-<k> "
                            "(e.g. bert-tiny/h200/2026Q4-1); `evaluate baseline list` shows the ids")
    return parts[0], parts[1], parts[2]


def _version_key(version: str) -> tuple[int, int, int]:
    m = VERSION_RE.match(version)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (0, 0, 0)


def _parse_time(text: str) -> dt.datetime:
    when = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    # Naive timestamps are taken as UTC so runs from different machines still sort together.
    return when.astimezone(dt.timezone.utc) if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def _quarter(created: str) -> str:
    try:
        when = _parse_time(created)
    except (TypeError, ValueError):
        raise BaselineError(f"RunResult.created {created!r} is not an ISO timestamp; "
                            "set it with datetime.now(timezone.utc).isoformat()") from None
    return f"{when.year}Q{(when.month - 1) // 3 + 1}"


# ---------------------------------------------------------------- the store on disk


class Store:
    """An opened store: a git work tree holding the store marker. Usable wherever a path is."""

    def __init__(self, path: Path):
        self.path = path

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"


def _state(p: Path) -> str:
    if not p.exists():
        return "missing"
    if not p.is_dir():
        return "file"
    names = {c.name for c in p.iterdir() if c.name != LOCK_NAME and not c.name.startswith(TMP_PREFIX)}
    if (p / ".git").exists():
        if (p / MARKER).is_file():
            return "store"
        if names == {".git"}:
            # `git init`, or a clone of a fresh shared remote: ours to initialise.
            with contextlib.suppress(Exception), git.Repo(p) as repo:
                if not repo.head.is_valid():
                    return "empty-repo"
        return "foreign-repo"
    if not names:
        return "empty"
    if (p / "HEAD").is_file() and (p / "objects").is_dir():
        return "bare"
    return "foreign"


def _refusal(p: Path, state: str) -> str:
    return {
        "file": f"baseline store {p} is a file; pass --store with a folder (new or an existing store)",
        "foreign-repo": f"{p} is a git repository but not a baseline store (no {MARKER}); "
                        "pass --store with a new folder or an existing store",
        "bare": f"{p} is a bare git repository; clone it (git clone {p} DIR) and pass the clone "
                "with --store",
        "foreign": f"{p} exists and is not a baseline store; pass --store with a new or empty folder "
                   "or an existing store",
        "missing": f"there is no baseline store at {p}; record a run first or pass --store with "
                   "the store's path",
    }[state]


def open_store(path: StoreLike, *, create: bool = True) -> Store:
    """The store at `path`, initialised (git repo, marker, first commit) when missing or empty."""
    if isinstance(path, Store):
        return path
    p = Path(os.fspath(path)).expanduser().absolute()
    state = _state(p)
    if state == "store":
        return Store(p)
    if state in ("empty", "empty-repo", "missing") and create:
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BaselineError(f"cannot create baseline store {p}: {e.strerror}; "
                                "pass --store with a writable folder") from None
        # Two first runs can race to initialise the same folder; the lock makes one do it.
        with _locked(p, LOCK_TIMEOUT_S):
            state = _state(p)
            if state in ("empty", "empty-repo"):
                _initialise(p)
            elif state != "store":
                raise BaselineError(_refusal(p, state))
        return Store(p)
    if state in ("empty", "empty-repo"):
        raise BaselineError(f"{p} is not initialised as a baseline store yet; record a run into it first")
    raise BaselineError(_refusal(p, state))


def _initialise(p: Path) -> None:
    fresh = not (p / ".git").exists()
    try:
        _init_repo(p)
    except BaseException:
        # Half an initialisation would pass for a store (the marker) without a first commit.
        for name in (MARKER, ".gitignore", "README.md"):
            (p / name).unlink(missing_ok=True)
        if fresh:
            shutil.rmtree(p / ".git", ignore_errors=True)
        raise


def _init_repo(p: Path) -> None:
    if not (p / ".git").exists():
        # Not git.Repo.init: an inherited GIT_DIR would make `git init` initialise that one.
        env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARS}
        try:
            done = subprocess.run(["git", "init", "-q", str(p)], env=env, capture_output=True, text=True)
        except OSError as e:
            raise BaselineError(f"cannot run git to create the baseline store at {p} ({e.strerror}); "
                                "install git") from None
        if done.returncode != 0:
            why = (done.stderr.strip() or "git init failed").splitlines()[0]
            raise BaselineError(f"cannot create a git repository at {p} ({why}); check that the folder is writable")
    try:
        repo = git.Repo(p)
    except git.GitError as e:
        raise BaselineError(f"cannot open the new git repository at {p} ({_first_line(e)}); "
                            "check that git is installed and the folder is writable") from None
    with repo:
        _prepare(repo)
        (p / ".gitignore").write_text(_GITIGNORE)
        (p / "README.md").write_text(_README)
        (p / MARKER).write_text(json.dumps({"kind": "evaluator-baseline-store", "created_by": __version__,
                                            "schema_version": SCHEMA_VERSION}, indent=2) + "\n")
        _git(repo, "add", "--", ".gitignore", "README.md", MARKER)
        _git(repo, "commit", "-q", "--no-verify", "-m", "Create baseline store")


@contextlib.contextmanager
def _locked(root: Path, timeout: float) -> Iterator[None]:
    """Exclusive flock on the store's lock file; released by the kernel if the holder dies."""
    lock_path = root / LOCK_NAME
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o664)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except (BlockingIOError, PermissionError):
                if time.monotonic() >= deadline:
                    holder = lock_path.read_text(errors="replace").strip() or "another process"
                    raise BaselineError(f"baseline store {root} stayed locked by {holder} for {timeout:.0f} s; "
                                        "wait for that run to finish and retry") from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _repo(root: Path) -> Iterator[git.Repo]:
    try:
        repo = git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise BaselineError(f"{root} is not a git repository; pass --store with a baseline store") from None
    try:
        _prepare(repo)
        yield repo
    finally:
        repo.close()


def _prepare(repo: git.Repo) -> None:
    env = {
        # A caller running inside another repository's hook may export these; pin them so
        # every command below acts on the store and nothing else.
        "GIT_DIR": str(repo.git_dir), "GIT_WORK_TREE": str(repo.working_tree_dir),
        "GIT_INDEX_FILE": str(Path(repo.git_dir) / "index"),
    }
    common = Path(repo.common_dir)
    pinned = {"GIT_OBJECT_DIRECTORY": str(common / "objects"), "GIT_COMMON_DIR": str(common)}
    env.update({k: pinned.get(k, "") for k in _GIT_LOCATION_VARS if k in os.environ and k not in env})
    repo.git.update_environment(**env)
    try:
        repo.git.var("GIT_COMMITTER_IDENT")
    except git.GitCommandError:
        # Locked-down GPU boxes often have no git identity; a baseline must still be recorded.
        who = {"GIT_AUTHOR_NAME": "evaluator", "GIT_COMMITTER_NAME": "evaluator",
               "GIT_AUTHOR_EMAIL": f"evaluator@{socket.gethostname() or 'localhost'}"}
        who["GIT_COMMITTER_EMAIL"] = who["GIT_AUTHOR_EMAIL"]
        repo.git.update_environment(**who)


def _first_line(e: BaseException) -> str:
    if isinstance(e, git.GitCommandError):
        text = (e.stderr or e.stdout or "").strip().replace("stderr: ", "").strip("' \n")
        text = text or str(e)
    else:
        text = str(e)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__


def _git(repo: git.Repo, *args: str) -> str:
    try:
        return repo.git.execute(["git", *args])
    except git.GitCommandError as e:
        raise BaselineError(f"git {args[0]} failed in baseline store {repo.working_tree_dir}: {_first_line(e)}; "
                            f"check it with `git -C {repo.working_tree_dir} status`") from None


def _existing(store_path: StoreLike) -> Path | None:
    """The root of an existing store, None when nothing was ever recorded there."""
    if isinstance(store_path, Store):
        return store_path.path
    p = Path(os.fspath(store_path)).expanduser().absolute()
    state = _state(p)
    if state == "store":
        return p
    if state in ("missing", "empty", "empty-repo"):
        return None
    raise BaselineError(_refusal(p, state))


def _head_valid(repo: git.Repo) -> bool:
    try:
        return repo.head.is_valid()
    except Exception:
        return False


def _head_baselines(repo: git.Repo) -> list[str]:
    """Folders `<model>/<platform>/<version>` that HEAD holds a manifest for."""
    if not _head_valid(repo):
        return []
    out = []
    for line in _git(repo, "ls-tree", "-r", "--name-only", "-z", "HEAD").split("\0"):
        parts = line.split("/")
        if (len(parts) == 4 and parts[3] == "manifest.json" and parts[0][:1] not in "._"
                and VERSION_RE.match(parts[2])):
            out.append("/".join(parts[:3]))
    return out


def _tags(repo: git.Repo) -> dict[str, str]:
    """tag name -> the commit it points at."""
    out = {}
    text = _git(repo, "for-each-ref", "--format=%(refname)%00%(objectname)%00%(*objectname)", "refs/tags")
    for line in text.splitlines():
        name, obj, peeled = (line.split("\0") + ["", ""])[:3]
        out[name[len("refs/tags/"):]] = peeled or obj
    return out


def _read_blob(repo: git.Repo, path: str) -> bytes | None:
    try:
        return (repo.head.commit.tree / path).data_stream.read()
    except (KeyError, ValueError):
        return None


def _read_json(repo: git.Repo, path: str, what: str) -> dict[str, Any] | None:
    raw = _read_blob(repo, path)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise BaselineError(f"{what} {path} in store {repo.working_tree_dir} is not valid JSON ({e}); "
                            "restore it with git checkout or remove that baseline") from None
    if not isinstance(data, dict):
        raise BaselineError(f"{what} {path} in store {repo.working_tree_dir} is not a JSON object; "
                            "restore it with git checkout or remove that baseline")
    return data


def _commit_of(repo: git.Repo, bid: str, tags: dict[str, str]) -> str:
    if bid in tags:
        return tags[bid]
    return _git(repo, "log", "-1", "--format=%H", "--", f"{bid}/manifest.json")


def _rmtree_and_prune(root: Path, folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    parent = folder.parent
    while parent != root and root in parent.parents:
        try:
            parent.rmdir()  # only succeeds when empty: never removes a sibling baseline
        except OSError:
            break
        parent = parent.parent


def _recover(repo: git.Repo, root: Path) -> None:
    """Undo what a writer killed mid-record (SIGKILL, power loss) left behind; runs under the lock."""
    for leftover in root.glob(TMP_PREFIX + "*"):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)
    if _git(repo, "diff", "--cached", "--name-only"):
        _git(repo, "reset", "-q")
    committed = set(_head_baselines(repo))
    stale = set()
    for path in _git(repo, "ls-files", "--others", "--exclude-standard", "-z").split("\0"):
        parts = path.split("/")
        if len(parts) >= 4 and parts[0][:1] not in "._" and VERSION_RE.match(parts[2]):
            folder = "/".join(parts[:3])
            # Renamed into place but never committed: the rename is atomic, the commit is not.
            if folder not in committed and (root / folder / "manifest.json").is_file():
                stale.add(folder)
    for folder in sorted(stale):
        _rmtree_and_prune(root, root / folder)
    tags = _tags(repo)
    for bid in sorted(committed - set(tags)):
        # Committed but killed before tagging: the baseline is whole, so finish the job.
        commit = _git(repo, "log", "-1", "--format=%H", "--diff-filter=A", "--", f"{bid}/manifest.json")
        if commit:
            _git(repo, "tag", "-a", "-m", f"baseline {bid} (tag restored)", bid, commit)


# ---------------------------------------------------------------- writing


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def _write_csv(path: Path, columns: list[str], rows: list[list[Any]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(columns)
        w.writerows([[_cell(v) for v in row] for row in rows])
        f.flush()
        os.fsync(f.fileno())


def _write_json(path: Path, data: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


_TIMING_FIELDS = ("median_ms", "p10_ms", "p90_ms", "mean_ms", "cv", "reps", "timer")


def _timing_cols(prefix: str) -> list[str]:
    return [f"{prefix}_{f}" for f in _TIMING_FIELDS]


def _timing_vals(t: Timing | None) -> list[Any]:
    return [getattr(t, f) if t else None for f in _TIMING_FIELDS]


def _tables(r: RunResult) -> dict[str, tuple[list[str], list[list[Any]]]]:
    """CSV name -> (columns, rows), only for the stages that produced data."""
    out: dict[str, tuple[list[str], list[list[Any]]]] = {}
    if r.hot_ops and r.hot_ops.ops:
        out["hot_ops.csv"] = (
            ["family", "time_ms", "share", "calls", "shapes", "aten_ops", "has_kernel", "selected"],
            [[o.family, o.time_ms, o.share, o.calls, ";".join(o.shapes), ";".join(o.aten_ops), o.has_kernel,
              o.family in r.hot_ops.selected] for o in r.hot_ops.ops])
    if r.op_bench:
        out["op_bench.csv"] = (
            ["family", "shape", "dtype", "source", *_timing_cols("tilelang"), *_timing_cols("torch"), "speedup",
             "flops", "bytes", "tilelang_tflops", "tilelang_gbps", "torch_tflops", "torch_gbps", "config", "error"],
            [[b.family, shape_str(b.shape), b.dtype, b.source, *_timing_vals(b.tilelang), *_timing_vals(b.torch),
              b.speedup, b.flops, b.bytes, b.tilelang_tflops, b.tilelang_gbps, b.torch_tflops, b.torch_gbps,
              b.config, b.error] for b in r.op_bench])
        out["op_ratios.csv"] = (
            ["family", "shape", "dtype", "verified", "ratio", "ratio_low", "ratio_high", "rounds",
             "tilelang_kernel_ms", "torch_kernel_ms", "flags", "timer_note"],
            [[b.family, shape_str(b.shape), b.dtype, b.verified, *(
                (b.ratio.value, b.ratio.low, b.ratio.high, b.ratio.rounds) if b.ratio else (None,) * 4),
              b.tilelang_kernel_ms, b.torch_kernel_ms, ";".join(b.flags), b.timer_note] for b in r.op_bench])
    tuning_rows = [[k.family, shape_str(k.shape), k.dtype, k.target, c.config == k.config and c.status == "ok",
                    k.cached, c.config, c.status, c.latency_ms, c.compile_s, c.error, c.phase]
                   for k in r.tuned for c in k.candidates]
    if tuning_rows:
        out["tuning.csv"] = (["family", "shape", "dtype", "target", "chosen", "cached", "config", "status",
                              "latency_ms", "compile_s", "error", "phase"], tuning_rows)
    verify_rows = [[c.family, shape_str(c.shape), c.dtype, c.seed, c.max_abs_err, c.max_rel_err, c.atol, c.rtol,
                    c.passed, c.reason] for v in r.verify for c in v.cases]
    if verify_rows:
        out["verify.csv"] = (["family", "shape", "dtype", "seed", "max_abs_err", "max_rel_err", "atol", "rtol",
                              "passed", "reason"], verify_rows)
    if r.e2e:
        e = r.e2e
        out["e2e.csv"] = (
            ["families", *_timing_cols("reference"), *_timing_cols("swapped"), "speedup", "samples_per_s_reference",
             "samples_per_s_swapped", "max_abs_err", "outputs_match", "replaced_modules", "coverage",
             "amdahl_speedup", "error"],
            [[";".join(e.families), *_timing_vals(e.reference), *_timing_vals(e.swapped), e.speedup,
              e.samples_per_s_reference, e.samples_per_s_swapped, e.max_abs_err, e.outputs_match,
              e.replaced_modules, e.coverage, e.amdahl_speedup, e.error]])
        if e.views:
            out["e2e_views.csv"] = (
                ["method", *_timing_cols("reference"), *_timing_cols("swapped"), "ratio", "ratio_low", "ratio_high",
                 "note"],
                [[v.method, *_timing_vals(v.reference), *_timing_vals(v.swapped),
                  *((v.ratio.value, v.ratio.low, v.ratio.high) if v.ratio else (None,) * 3), v.note]
                 for v in e.views])
        if e.calls:
            out["calls.csv"] = (
                ["family", "shape", "tilelang_calls", "fallback_calls", "fallback_reasons", "profiled_ms", "notes"],
                [[c.family, c.shape, c.tilelang, sum(c.fallback.values()),
                  ";".join(f"{k}={v}" for k, v in sorted(c.fallback.items())), c.profiled_ms,
                  ";".join(f"{k}={v}" for k, v in sorted(c.notes.items()))] for c in e.calls])
    if r.soak and r.soak.window_ms:
        out["soak.csv"] = (["window", "median_ms"], [[i, ms] for i, ms in enumerate(r.soak.window_ms)])
    if r.upstream:
        fields = [f.name for f in dataclasses.fields(r.upstream) if f.name != "details"]
        out["upstream.csv"] = (["metric", "value"], [[name, getattr(r.upstream, name)] for name in fields])
    if r.verdict and r.verdict.outcomes:
        out["checklist.csv"] = (
            ["id", "title", "severity", "metric", "comparator", "threshold", "value", "unit", "status", "rationale",
             "evidence"],
            [[o.id, o.title, o.severity, o.metric, o.comparator, o.threshold, o.value, o.unit, o.status,
              o.rationale, o.evidence] for o in r.verdict.outcomes])
    return out


def _manifest(r: RunResult, data: dict[str, Any], bid: str, tables: list[str]) -> dict[str, Any]:
    model, platform, version = bid.split("/")
    env = data["environment"]
    return {
        "schema_version": SCHEMA_VERSION,
        "id": bid, "model_slug": model, "platform": platform, "version": version,
        "created": r.created,
        "recorded": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "run_id": r.run_id,
        "written_by": __version__,  # the evaluator that wrote this layout: named when a reader is too old
        **{k: env[k] for k in ("evaluator", "python", "os", "cpu", "torch", "tilelang")},
        "hardware": env["hardware"],
        "model": data["model"],
        "settings": data["settings"],
        "verdict": r.verdict.decision if r.verdict else None,
        "summary": {
            "families": list(r.families),
            "e2e_speedup": r.e2e.speedup if r.e2e and r.e2e.speedup is not None
            and math.isfinite(r.e2e.speedup) else None,
            "op_speedups": {_op_key(b): b.speedup for b in r.op_bench
                            if b.speedup is not None and math.isfinite(b.speedup)},
            "verify_passed": all(v.passed for v in r.verify) if r.verify else None,
            "soak_drift": r.soak.drift if r.soak and math.isfinite(r.soak.drift) else None,
        },
        "stage_errors": data["stage_errors"],
        "tables": tables,
    }


def _write_folder(folder: Path, r: RunResult, bid: str) -> None:
    # The ref's commit does not exist yet; `load` fills `baseline` in from git instead.
    data = to_dict(dataclasses.replace(r, baseline=None))
    tables = _tables(r)
    for name, (columns, rows) in tables.items():
        _write_csv(folder / name, columns, rows)
    _write_json(folder / "result.json", data)
    # The manifest goes last, so a folder with a manifest is a finished one.
    _write_json(folder / "manifest.json", _manifest(r, data, bid, list(tables)))


def _next_version(repo: git.Repo, model: str, platform: str, quarter: str) -> str:
    prefix = f"{model}/{platform}/{quarter}-"
    # Tags count too: a tag fetched from the shared remote reserves its number.
    taken = [int(name[len(prefix):]) for name in [*_head_baselines(repo), *_tags(repo)]
             if name.startswith(prefix) and name[len(prefix):].isdigit()]
    return f"{quarter}-{max(taken, default=0) + 1}"


def _messages(r: RunResult, bid: str) -> str:
    hw = r.environment.hardware
    decision = r.verdict.decision if r.verdict else "no verdict"
    speed = f", e2e {r.e2e.speedup:.2f}x" if r.e2e and r.e2e.speedup else ""
    return (f"baseline {bid}: {decision}{speed}\n\n"
            f"run {r.run_id}, created {r.created}\n"
            f"device {hw.name} (driver {hw.driver or '-'}, CUDA {hw.cuda or '-'}, target {hw.target})\n"
            f"torch {r.environment.torch}, tilelang {r.environment.tilelang}, "
            f"evaluator {r.environment.evaluator}, python {r.environment.python}\n")


def _tag(repo: git.Repo, bid: str, commit: str, message: str) -> None:
    _git(repo, "tag", "-a", "-m", message, bid, commit)


def record(store_path: StoreLike, result: RunResult, *, lock_timeout: float = LOCK_TIMEOUT_S) -> BaselineRef:
    """Write `result` as the next baseline of its model/platform/quarter: folder, commit, tag.

    All or nothing: the folder is written in a temp folder inside the store, renamed into
    place, committed and tagged under an exclusive lock; any failure (or Ctrl-C) undoes
    every step, and a writer killed outright is cleaned up by the next one.
    """
    model = model_slug(result.model.name)
    platform = _platform_slug(result.environment.hardware.platform)
    quarter = _quarter(result.created)
    store = open_store(store_path, create=True)
    root = store.path
    with _locked(root, lock_timeout), _repo(root) as repo:
        _recover(repo, root)
        version = _next_version(repo, model, platform, quarter)
        bid = f"{model}/{platform}/{version}"
        folder = root / bid
        tmp = root / f"{TMP_PREFIX}{uuid.uuid4().hex}"
        prev_head = _git(repo, "rev-parse", "HEAD")
        try:
            tmp.mkdir()
            _write_folder(tmp, result, bid)
            if folder.exists():
                raise BaselineError(f"{folder} exists but is not a committed baseline; move it out of "
                                    "the store and rerun")
            folder.parent.mkdir(parents=True, exist_ok=True)
            os.rename(tmp, folder)
            # Tuning configs saved by this (or an interrupted earlier) run ride in the same commit.
            paths = [bid] + ([TUNING_DIR] if (root / TUNING_DIR).is_dir() else [])
            _git(repo, "add", "--", *paths)
            message = _messages(result, bid)
            _git(repo, "commit", "-q", "--no-verify", "-m", message, "--", *paths)
            commit = _git(repo, "rev-parse", "HEAD")
            _tag(repo, bid, commit, message)
        except BaseException as exc:
            _rollback(repo, root, bid, prev_head, tmp)
            if isinstance(exc, OSError):
                raise BaselineError(f"could not write baseline {bid} to {root}: {exc.strerror or exc}; "
                                    "nothing was recorded, fix that and rerun") from exc
            raise
    return BaselineRef(store=str(root), model=model, platform=platform, version=version, path=bid,
                       commit=commit, tag=bid)


def _rollback(repo: git.Repo, root: Path, bid: str, prev_head: str, tmp: Path) -> None:
    """Best effort, each step on its own: one failing must not stop the others."""
    def attempt(*args: str) -> None:
        with contextlib.suppress(Exception):
            repo.git.execute(["git", *args])

    with contextlib.suppress(Exception):
        if repo.git.execute(["git", "tag", "--list", bid]).strip() == bid:
            attempt("tag", "-d", bid)
    with contextlib.suppress(Exception):
        if repo.git.execute(["git", "rev-parse", "HEAD"]).strip() != prev_head:
            attempt("reset", "-q", "--soft", prev_head)
    attempt("reset", "-q", "--", bid)
    attempt("reset", "-q", "--", TUNING_DIR)  # unstaged only: the saved configs stay valid
    _rmtree_and_prune(root, root / bid)
    shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- reading


def _scan(repo: git.Repo, root: Path, model: str | None, platform: str | None) -> list[tuple[BaselineRef, str]]:
    tags = _tags(repo)
    found = []
    for bid in _head_baselines(repo):
        m, p, v = bid.split("/")
        if (model and m != model) or (platform and p != platform):
            continue
        manifest = _read_json(repo, f"{bid}/manifest.json", "manifest") or {}
        ref = BaselineRef(store=str(root), model=m, platform=p, version=v, path=bid,
                          commit=_commit_of(repo, bid, tags), tag=bid if bid in tags else "")
        found.append((ref, str(manifest.get("created", ""))))

    def order(item: tuple[BaselineRef, str]) -> tuple:
        try:
            when = _parse_time(item[1])
        except (TypeError, ValueError):
            when = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
        return (when, _version_key(item[0].version), item[0].path)

    return sorted(found, key=order)


def list_baselines(store_path: StoreLike, model: str | None = None,
                   platform: str | None = None) -> list[BaselineRef]:
    """Baselines in the store (optionally of one model and/or platform), oldest first by run time."""
    root = _existing(store_path)
    if root is None:
        p = Path(os.fspath(store_path)).expanduser().absolute()
        if not p.exists():
            raise BaselineError(_refusal(p, "missing"))
        return []
    with _repo(root) as repo:
        return [ref for ref, _ in _scan(repo, root, model and model_slug(model),
                                        platform and _platform_slug(platform))]


def _migrate(data: dict[str, Any], version: int, bid: str, writer: str) -> dict[str, Any]:
    while version < SCHEMA_VERSION:
        step = _MIGRATIONS.get(version)
        if step is None:
            raise BaselineError(f"baseline {bid} uses schema_version {version}, which this evaluator "
                                f"({__version__}) cannot migrate to {SCHEMA_VERSION}; read it with evaluator "
                                f"{writer}")
        data = step(dict(data))
        version += 1
        data["schema_version"] = version
    return data


def _load(repo: git.Repo, root: Path, bid: str, tags: dict[str, str]) -> RunResult:
    manifest = _read_json(repo, f"{bid}/manifest.json", "manifest")
    if manifest is None:
        raise BaselineError(f"no baseline {bid} in store {root}; `evaluate baseline list` shows the ids")
    version = manifest.get("schema_version")
    writer = str(manifest.get("written_by") or manifest.get("evaluator") or "unknown")
    if not isinstance(version, int) or isinstance(version, bool):
        raise BaselineError(f"manifest of baseline {bid} has no integer schema_version; "
                            "restore it with git checkout or remove that baseline")
    if version > SCHEMA_VERSION:
        raise BaselineError(f"baseline {bid} uses schema_version {version}, newer than this evaluator "
                            f"({__version__}) reads ({SCHEMA_VERSION}); upgrade to evaluator {writer} "
                            "or newer to read it")
    data = _read_json(repo, f"{bid}/result.json", "result")
    if data is None:
        raise BaselineError(f"baseline {bid} has no result.json; restore it with git checkout")
    data = _migrate(data, version, bid, writer)
    try:
        result = from_dict(RunResult, data)
    except Exception as e:  # pydantic's ValidationError: report its first line only
        raise BaselineError(f"result.json of baseline {bid} does not match schema_version "
                            f"{SCHEMA_VERSION}: {_first_line(e)}; restore it with git checkout") from None
    m, p, v = bid.split("/")
    ref = BaselineRef(store=str(root), model=m, platform=p, version=v, path=bid,
                      commit=_commit_of(repo, bid, tags), tag=bid if bid in tags else "")
    return dataclasses.replace(result, baseline=ref)


def load(store_path: StoreLike, baseline_id: str) -> RunResult:
    """The full RunResult of one baseline, read from the committed tree (migrated if older)."""
    bid = "/".join(_parse_id(baseline_id))
    root = _existing(store_path)
    if root is None:
        raise BaselineError(f"no baseline {bid}: there is no baseline store at {store_path}; "
                            "pass --store with the store's path")
    with _repo(root) as repo:
        return _load(repo, root, bid, _tags(repo))


def previous(store_path: StoreLike, model: str, platform: str) -> RunResult | None:
    """The newest baseline of this model and platform, or None (no store, or none yet)."""
    root = _existing(store_path)
    if root is None:
        return None
    with _repo(root) as repo:
        found = _scan(repo, root, model_slug(model), _platform_slug(platform))
        return _load(repo, root, found[-1][0].path, _tags(repo)) if found else None


def trend(store_path: StoreLike, model: str, platform: str) -> tuple[TrendPoint, ...]:
    """Per op and end-to-end medians across every baseline of a model and platform, oldest first."""
    root = _existing(store_path)
    if root is None:
        return ()
    points = []
    with _repo(root) as repo:
        tags = _tags(repo)
        for ref, _ in _scan(repo, root, model_slug(model), _platform_slug(platform)):
            r = _load(repo, root, ref.path, tags)
            points += [TrendPoint(ref.version, r.created, key, t.median_ms) for key, t in _timings(r).items()]
    return tuple(points)


# ---------------------------------------------------------------- comparing


def _op_key(b: Any) -> str:
    return f"{b.family} {shape_str(b.shape)} {b.dtype}"


def _valid(t: Timing | None) -> bool:
    return t is not None and t.median_ms is not None and math.isfinite(t.median_ms) and t.median_ms > 0


def _timings(r: RunResult) -> dict[str, Timing]:
    """Comparison key -> the timing compared: TileLang medians per op, then both end-to-end variants."""
    out: dict[str, Timing] = {}
    for b in r.op_bench:
        if _valid(b.tilelang):
            out.setdefault(_op_key(b), b.tilelang)
    if r.e2e:
        if _valid(r.e2e.swapped):
            out[E2E_TILELANG] = r.e2e.swapped
        if _valid(r.e2e.reference):
            out[E2E_TORCH] = r.e2e.reference
    return out


def _rel_spread(t: Timing) -> float:
    """Relative standard deviation of one measurement, from p10/p90 when it has them."""
    m, lo, hi = t.median_ms, t.p10_ms, t.p90_ms
    if all(x is not None and math.isfinite(x) for x in (lo, hi)) and hi > lo:
        return (hi - lo) / (_P10_P90_SIGMAS * m)
    return t.cv if t.cv is not None and math.isfinite(t.cv) and t.cv > 0 else 0.0


def _flatten(value: Any, prefix: str) -> dict[str, str]:
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for k in sorted(value, key=str):
            if prefix == "settings" and k in IGNORED_SETTINGS:
                continue
            out.update(_flatten(value[k], f"{prefix}.{k}"))
        return out
    return {prefix: value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)}


def _environment(r: RunResult) -> dict[str, str]:
    env, hw = r.environment, r.environment.hardware
    fields = {"driver": hw.driver, "cuda": hw.cuda, "torch": env.torch, "tilelang": env.tilelang,
              "evaluator": env.evaluator, "python": env.python, "device": hw.name, "os": env.os,
              "target": hw.target, "model": f"{r.model.name} ({r.model.spec_hash})" if r.model.spec_hash
              else r.model.name}
    fields.update(_flatten(r.settings or {}, "settings"))
    return fields


def _label(r: RunResult, given: str) -> str:
    if given:
        return given
    return r.baseline.tag or r.baseline.path if r.baseline else r.run_id


# Environment and settings fields whose change can plausibly explain a slower time; a
# change of anything else (the upstream repository, the checklist, a threshold) is
# never named as a cause.
_CAUSE_FIELDS = frozenset({"driver", "cuda", "torch", "tilelang", "evaluator", "device", "target", "model",
                           "clocks", "gpu_clocks", "power_limit"})
_CAUSE_SETTINGS = frozenset({"device", "dtype", "batch_size", "seq_len", "ops", "families", "max_shapes",
                             "tune_budget_s", "fine_rounds", "isolate", "timing", "clocks"})


def plausible_cause(field: str) -> bool:
    """Can a change of this environment field explain a regression? """
    if field in _CAUSE_FIELDS or field.startswith(("clock", "gpu_clock")):
        return True
    if field.startswith("settings."):
        return field.split(".")[1] in _CAUSE_SETTINGS
    return False


def compare(reference: RunResult, candidate: RunResult, *, threshold: float = 0.05, noise_k: float = 3.0,
            reference_id: str = "", candidate_id: str = "") -> Comparison:
    """Candidate against reference, per op and end to end; ratio = candidate / reference time.

    A change counts only beyond max(threshold, noise_k x combined relative spread) of the two
    timings, so a noisy op needs a bigger change to be called a regression. The same function
    serves cross-platform comparison (candidate on one platform, reference on another).
    """
    if threshold < 0 or noise_k < 0:
        raise BaselineError(f"regression threshold {threshold} and noise multiple {noise_k} must be >= 0; "
                            "pass e.g. --threshold 0.05")
    ref_t, cand_t = _timings(reference), _timings(candidate)
    changes = []
    for key in [*ref_t, *(k for k in cand_t if k not in ref_t)]:
        kind = "e2e" if key in (E2E_TILELANG, E2E_TORCH) else "op"
        a, b = ref_t.get(key), cand_t.get(key)
        if a is None or b is None:
            changes.append(Change(kind, key, a.median_ms if a else None, b.median_ms if b else None, None,
                                  threshold, "gone" if b is None else "new"))
            continue
        limit = max(threshold, noise_k * math.hypot(_rel_spread(a), _rel_spread(b)))
        ratio = b.median_ms / a.median_ms
        status = "regression" if ratio - 1 > limit else "improvement" if ratio - 1 < -limit else "unchanged"
        changes.append(Change(kind, key, a.median_ms, b.median_ms, ratio, limit, status))

    env_a, env_b = _environment(reference), _environment(candidate)
    env_changes = tuple((k, env_a.get(k, ""), env_b.get(k, "")) for k in [*env_a, *(k for k in env_b
                        if k not in env_a)] if env_a.get(k, "") != env_b.get(k, ""))

    pol_a, pol_b = (reference.settings or {}).get("timing"), (candidate.settings or {}).get("timing")
    comparable = pol_a == pol_b
    notes = []
    plat_a, plat_b = reference.environment.hardware.platform, candidate.environment.hardware.platform
    if plat_a != plat_b:
        notes.append(f"cross-platform: candidate on {plat_b} ({candidate.environment.hardware.name}) vs "
                     f"reference on {plat_a} ({reference.environment.hardware.name})")
    if not comparable:
        notes.append(f"NOT COMPARABLE: timing policies differ (reference {json.dumps(pol_a, sort_keys=True)}, "
                     f"candidate {json.dumps(pol_b, sort_keys=True)}); ratios are for information only, "
                     "rerun both with the same timing settings")
    counts = {s: sum(c.status == s for c in changes) for s in ("regression", "improvement", "unchanged", "new",
                                                               "gone")}
    notes.append(", ".join(f"{n} {s}" for s, n in counts.items() if n) or "nothing to compare")
    notes.append(f"a change counts beyond max({threshold:.0%}, {noise_k:g} x combined spread)")
    if counts["regression"]:
        plausible = [(f, a, b) for f, a, b in env_changes if plausible_cause(f)]
        if plausible:
            notes.append("likely causes: " + ", ".join(f"{f} {a or '-'} -> {b or '-'}" for f, a, b in plausible[:6]))
        else:
            notes.append("unexplained: no change of driver, toolchain, device or settings that affects speed")
    return Comparison(reference=_label(reference, reference_id), candidate=_label(candidate, candidate_id),
                      comparable=comparable, note="; ".join(notes), changes=tuple(changes),
                      environment_changes=env_changes)


def diff(store_path: StoreLike, a_id: str, b_id: str, *, threshold: float = 0.05,
         noise_k: float = 3.0) -> Comparison:
    """Baseline `b_id` (candidate) against `a_id` (reference), both read from the store."""
    a_bid, b_bid = "/".join(_parse_id(a_id)), "/".join(_parse_id(b_id))
    root = _existing(store_path)
    if root is None:
        raise BaselineError(f"there is no baseline store at {store_path}; pass --store with the store's path")
    with _repo(root) as repo:
        tags = _tags(repo)
        a, b = _load(repo, root, a_bid, tags), _load(repo, root, b_bid, tags)
    return compare(a, b, threshold=threshold, noise_k=noise_k, reference_id=a_bid, candidate_id=b_bid)


# ---------------------------------------------------------------- tuning cache


def _canonical(key: dict[str, Any]) -> str:
    if not isinstance(key, dict) or not key:
        raise BaselineError("a tuning cache key must be a non-empty dict; build it with tuning.cache_key(...)")
    return json.dumps(key, sort_keys=True, separators=(",", ":"), default=list)


def _tuning_path(root: Path, key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(_canonical(key).encode()).hexdigest()[:20]
    return root / TUNING_DIR / (_slug(str(key.get("family", ""))) or "misc") / f"{digest}.json"


def tuning_cache_lookup(store_path: StoreLike, key: dict[str, Any]) -> dict[str, Any] | None:
    """The config tuned for exactly this key, or None (never tuned, or any toolchain field changed)."""
    root = _existing(store_path)
    if root is None:
        return None
    path = _tuning_path(root, key)
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    # The file name is a hash prefix; the stored key is the truth.
    if not isinstance(entry, dict) or _canonical(entry.get("key") or {"": None}) != _canonical(key):
        return None
    config = entry.get("config")
    return dict(config) if isinstance(config, dict) else None


def tuning_cache_save(store_path: StoreLike, key: dict[str, Any], config: dict[str, Any], *,
                      lock_timeout: float = LOCK_TIMEOUT_S) -> None:
    """Store a tuned config under `_tuning/`; committed with the next recorded baseline."""
    path_for = _canonical(key)  # validate before touching the store
    store = open_store(store_path, create=True)
    root = store.path
    target = _tuning_path(root, key)
    entry = {"key": json.loads(path_for), "config": config, "saved": dt.datetime.now(dt.timezone.utc)
             .isoformat(timespec="seconds"), "evaluator": __version__}
    with _locked(root, lock_timeout):
        tmp = root / f"{TMP_PREFIX}{uuid.uuid4().hex}.json"
        try:
            _write_json(tmp, entry)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, target)
        except (OSError, TypeError, ValueError) as e:
            tmp.unlink(missing_ok=True)
            raise BaselineError(f"could not save the tuned config to {target}: {e}; "
                                "configs must be flat JSON (str -> int/str/bool)") from None


def tuning_cache_changes(store_path: StoreLike, key: dict[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """Why a lookup missed: (field, cached value, now) against the closest cached entry of the
    same family, shape and dtype, so the tuning stage can say what changed before re-tuning."""
    root = _existing(store_path)
    if root is None or not key:
        return ()
    folder = _tuning_path(root, key).parent
    same = ("family", "shape", "dtype")
    best: tuple[tuple[str, str, str], ...] | None = None
    for path in sorted(folder.glob("*.json")):
        with contextlib.suppress(OSError, ValueError):
            old = json.loads(path.read_text(encoding="utf-8")).get("key") or {}
            if any(_canonical({k: old.get(k)}) != _canonical({k: key.get(k)}) for k in same):
                continue
            fields = sorted(set(old) | set(key), key=str)
            changes = tuple((f, _cell(old.get(f)), _cell(key.get(f))) for f in fields
                            if _canonical({f: old.get(f)}) != _canonical({f: key.get(f)}))
            if changes and (best is None or len(changes) < len(best)):
                best = changes
    return best or ()


# ---------------------------------------------------------------- printing


def _fmt(value: float | None, spec: str = ".4g") -> str:
    return "-" if value is None or not math.isfinite(value) else format(value, spec)


def show_rows(result: RunResult) -> list[tuple[str, str]]:
    """Key/value pairs describing one baseline, for `evaluate baseline show`."""
    env, hw, m = result.environment, result.environment.hardware, result.model
    rows: list[tuple[str, str]] = []
    if result.baseline:
        rows += [("id", result.baseline.path), ("commit", result.baseline.commit[:12]),
                 ("tag", result.baseline.tag or "(missing)")]
    rows += [
        ("run", result.run_id), ("created", result.created), ("schema", str(result.schema_version)),
        ("model", f"{m.name} ({m.source}, batch {m.batch_size}, seq {m.seq_len or '-'}, {m.dtype})"),
        ("model hash", m.spec_hash or "-"), ("platform", hw.platform),
        ("device", f"{hw.name} ({hw.device}, target {hw.target})"),
        ("driver", hw.driver or "-"), ("cuda", hw.cuda or "-"), ("torch", env.torch),
        ("tilelang", env.tilelang), ("evaluator", env.evaluator), ("python", env.python), ("os", env.os),
        ("cpu", env.cpu),
        ("timing", json.dumps((result.settings or {}).get("timing"), sort_keys=True)),
        ("verdict", result.verdict.decision if result.verdict else "-"),
        ("families", ", ".join(result.families) or "-"),
    ]
    for b in result.op_bench:
        tl = b.tilelang.median_ms if b.tilelang else None
        rows.append((f"op {_op_key(b)}", f"TileLang {_fmt(tl)} ms, torch {_fmt(b.torch.median_ms)} ms, "
                                         f"speedup {_fmt(b.speedup, '.2f')}x" + (f" ({b.error})" if b.error else "")))
    if result.e2e:
        e = result.e2e
        rows.append(("end-to-end", f"torch {_fmt(e.reference.median_ms)} ms, TileLang "
                                   f"{_fmt(e.swapped.median_ms if e.swapped else None)} ms, speedup "
                                   f"{_fmt(e.speedup, '.2f')}x, outputs match: {e.outputs_match}"))
    if result.soak:
        rows.append(("soak", f"{result.soak.seconds:g} s, drift {result.soak.drift:+.1%}, "
                             f"memory growth {result.soak.memory_growth_mb:g} MB"))
    if result.upstream:
        u = result.upstream
        rows.append(("upstream", f"{u.repo} @ {u.head[:12]}, score {_fmt(u.maintenance_score, '.1f')}"
                     if u.measured else f"not measured ({u.note})"))
    rows += [(f"error {stage}", msg) for stage, msg in result.stage_errors.items()]
    return rows


def comparison_rows(c: Comparison) -> list[tuple[str, str, str, str, str, str, str]]:
    """One row per change, columns as COMPARISON_COLUMNS, for `baseline diff` and `compare`."""
    return [(ch.kind, ch.key, _fmt(ch.reference_ms), _fmt(ch.candidate_ms), _fmt(ch.ratio, ".3f"),
             f"±{ch.threshold:.1%}", ch.status if c.comparable or ch.status in ("new", "gone")
             else f"{ch.status} (not comparable)") for ch in c.changes]


def environment_rows(c: Comparison) -> list[tuple[str, str, str]]:
    """(field, reference, candidate) for every environment field that differs."""
    return [(f, a or "-", b or "-") for f, a, b in c.environment_changes]
