"""Results with the torch.compile side filled in, for the report, baseline and CLI tests
(tests/test_compiled.py). Built on samples.sample_result, which stays without it: that is
what a results.json written before the comparison looks like.

In: nothing. Out: `compiled_result()`, a RunResult whose gemm op and end-to-end run were
timed against torch.compile (TileLang 0.93x of it end to end, compiled in 29 s) and whose
softmax op could not be compiled (a recorded reason, not a number); `failed_e2e()`, the
same with the whole model's compile failing.
"""

from __future__ import annotations

import dataclasses

from evaluator.results import Compiled, Ratio, RunResult
from samples import sample_result, timing

INDUCTOR_ERROR = "InductorError: InvalidCxxCompiler: No working C++ compiler found in torch._inductor.config.cpp.cxx"


def compiled(ms: float, ratio: float, compile_s: float, mode: str = "default", note: str = "") -> Compiled:
    return Compiled(
        mode,
        "default" if mode == "default" else "max-autotune-no-cudagraphs",
        timing(ms),
        Ratio(ratio, ratio * 0.97, ratio * 1.03, 20),
        compile_s,
        "",
        note,
    )


def compiled_result() -> RunResult:
    r = sample_result()
    gemm, softmax = r.op_bench
    ops = (
        dataclasses.replace(gemm, compiled=compiled(0.6, 1.32, 3.4, note="unstable (spread 17%)")),
        dataclasses.replace(softmax, compiled=Compiled("default", "default", error=INDUCTOR_ERROR)),
    )
    e2e = dataclasses.replace(r.e2e, compiled=compiled(10.23, 0.93, 29.3))
    return dataclasses.replace(r, op_bench=ops, e2e=e2e, settings={**r.settings, "compile_mode": "default"})


def failed_e2e() -> RunResult:
    r = compiled_result()
    why = "Unsupported: Failed to trace builtin operator Explanation: Dynamo does not know how to trace `print`"
    return dataclasses.replace(r, e2e=dataclasses.replace(r.e2e, compiled=Compiled("default", "default", error=why)))
