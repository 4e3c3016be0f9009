"""A fleet sweep: a plan of models x settings x platforms, one evaluation per Ray task.

In: a plan file (YAML, below), optionally the address of an existing Ray cluster, and a
`Reporter` for progress. Out: a `FleetResult` with one `Cell` per model x platform (ok or
failed, verdict, end-to-end speedup, baseline id, run folder, report, one-line error),
each run's baseline recorded in the plan's shared store, and `summary()`'s `fleet.html`
(the verdict matrix, each cell linking that run's report) and `fleet.json`.

    name: nightly                 # names the sweep folder <reports>/<name>-<timestamp>/
    reports: reports/fleet        # output folder (default: reports)
    store: baselines              # the shared baseline store (default: <reports>/baselines)
    defaults: {budget: 2, soak_seconds: 0, pdf: false}   # any `evaluate` option, CLI names
    models:
      - bert-tiny                 # a spec as --model takes it
      - {model: hf:BertModel, batch_size: 8, name: hf-bert}   # spec, overrides, --name
    platforms:                    # default: one platform "this machine", device auto
      - {name: cpu, device: cpu, resources: {num_cpus: 1}}
      - {name: h200, device: cuda, resources: {num_gpus: 1}, options: {dtype: bf16}}

Relative paths in a plan (reports, store, a `file.py:factory` model, `hf:DIR`, a checklist
file) are relative to the plan file's folder, so a plan runs the same from any folder.
A cell's options are the defaults, then its platform's `options`, then its model's
overrides. Everything that can be checked before a minute is spent is checked by
`load_plan` (the schema, option names and types, and `config.build` on every cell), each
mistake one line naming the file and the field. Each cell runs `config.build` and
`pipeline.run` in a fresh Ray worker process (`max_calls=1`: no TileLang, torch or CUDA
state leaks from one model into the next) holding its platform's resources: `num_gpus=1`
places one run per GPU, `num_cpus=1` one per core on a machine without a GPU. Whatever
goes wrong inside a task, or with the task itself (a crashed worker, a platform no node
of the cluster can host), becomes a red cell with its error; the sweep always finishes.
On a cluster the reports folder, the store and model files must be on a filesystem every
node and the driver mount (the summary reads each run's files from the driver). A CPU
run computes with as many threads as its platform's num_cpus (Ray sets OMP_NUM_THREADS).

Ray is an optional extra (`pip install -e '.[fleet]'`); without it, `run_plan` and
`require_ray` raise one `ConfigError` line saying what to install.

The modules:
  plan.py     the plan file read, checked and resolved into a `Plan` (`load_plan`)
  sweep.py    the plan run on Ray, one task per cell (`run_plan`), and `exit_code`
  task.py     the body of one task: one model on one platform, always a `Cell`
  records.py  `Cell` and `FleetResult`, and the one-line error text they carry
  page.py     fleet.html and fleet.json (`summary`), read back by `load_summary`
Callers use the names re-exported here (`from evaluator import fleet`).
"""

from __future__ import annotations

from .page import load_summary, summary
from .plan import DEFAULT_PLATFORM, ModelEntry, Plan, Platform, load_plan  # noqa: F401
from .records import SCHEMA_VERSION, Cell, FleetResult  # noqa: F401
from .sweep import FAIL_ON, RAY_MISSING, check_fail_on, exit_code, require_ray, run_plan
from .task import run_cell  # noqa: F401  (the body of a Ray task, callable in-process)

__all__ = [
    "Plan",
    "ModelEntry",
    "Platform",
    "Cell",
    "FleetResult",
    "load_plan",
    "run_plan",
    "summary",
    "load_summary",
    "require_ray",
    "check_fail_on",
    "exit_code",
    "RAY_MISSING",
    "FAIL_ON",
]
