"""Rehearse a TileLang upgrade: the model's kernels under the current TileLang and under
another interpreter's (`evaluate upgrade --toolchain PYTHON`), side by side.

In: a `Config` and a candidate interpreter. Out: `rehearse` (rehearsal.py) and its
`UpgradeOutcome`; `check_interpreter` and `probe` (toolchain.py) for the command line.
The modules: toolchain.py starts a toolchain's worker process (tuning/isolation.py's
protocol), side.py is what runs inside it, compare.py puts one kernel through both,
verdict.py decides, rehearsal.py orders the whole.
"""
