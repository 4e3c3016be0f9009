"""What a model calls eagerly and what it calls while a CUDA graph is being captured.

In: a model spec as `evaluate --model` takes it (hf:BertModel, timm:..., a zoo name), its
batch and sequence length, a dtype. Out: per side (eager; captured with the capture seen by
the model; captured with it hidden, as the timer captures, with the call that was running
where that capture fails; eager with torch.compiler.is_compiling() True, what Dynamo's
trace sees), every torch function
the forward pass calls with its input dtypes, counted; for each scaled_dot_product_attention
call its mask (type, dtype, shape), is_causal and the backend PyTorch's dispatcher picks for
it (`torch._fused_sdp_choice`); then the difference between the sides and the kernels of
one captured replay by time. `--json` writes it all.

Why: on the H200 (2026-12-02, reports/examples/benchmarks/h200-2026-12-02/) transformers'
BertModel replayed 413 kernels and 1773 µs as a graph where its eager forward's kernels
summed to 810 µs, with 24 fp32 GEMMs and no cuDNN attention kernel under capture.
transformers counts a capturing stream as tracing (`is_tracing`), so a model may take
another path while the timer captures it; this says which calls differ, rather than
guessing from kernel names.

    python3 benchmarks/capture_path.py hf:BertModel --batch-size 8 --seq-len 128 [--json OUT.json]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from evaluator import models  # noqa: E402
from evaluator.measuring.compile_path import Recorder, believed_compiling, differing_calls  # noqa: E402
from evaluator.measuring.timing import captured, graph_kernel_events, unobserved_capture  # noqa: E402


def record(fn, capture: bool, hidden: bool = False) -> Recorder:
    """One pass under the recorder: eagerly, or captured in a CUDA graph with the capture
    seen by the model or (`hidden`) hidden from it as the timer hides it. A capture that
    fails leaves `error` and `failed_at` (the torch call running when it failed) on the
    recorder: transformers' GPT-2 on the H200 (2026-12-02) did not capture hidden."""
    rec = Recorder()
    rec.error = rec.failed_at = ""
    if not capture:
        with rec:
            fn()
        torch.cuda.synchronize()
        return rec
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()  # warm up on the side stream, as torch.cuda.graphs asks
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g), unobserved_capture() if hidden else contextlib.nullcontext():
            with rec:
                fn()
    except Exception as exc:
        rec.error, rec.failed_at = (
            f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
            rec.last,
        )
        with contextlib.suppress(Exception):
            torch.cuda.synchronize()
        return rec
    g.replay()
    torch.cuda.synchronize()
    return rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--json")
    args = ap.parse_args()
    loaded = models.load_model(
        args.model, batch_size=args.batch_size, seq_len=args.seq_len, dtype=args.dtype, device="cuda", seed=0
    )
    module, inputs = loaded.module, loaded.inputs

    def fn():
        return module(*inputs)

    out: dict = {"model": args.model, "torch": torch.__version__}
    with torch.inference_mode():
        sides = {"eager": record(fn, False), "capturing": record(fn, True), "hidden": record(fn, True, hidden=True)}
        with believed_compiling():  # what Dynamo's trace sees (paths.compile_path_note)
            sides["compiling"] = record(fn, False)
        replay = captured(lambda: graph_kernel_events(fn, 3))[0][-1]  # hidden, else the model's own path
    for side, rec in sides.items():
        out[side] = {"calls": dict(rec.calls), "sdpa": rec.sdpa, "error": rec.error, "failed_at": rec.failed_at}
        if rec.error:
            print(f"{side}: capture failed ({rec.error}) during {rec.failed_at or 'the first call'}")
        backends = collections.Counter(c["backend"] for c in rec.sdpa)
        masks = collections.Counter(str(c["mask"]) for c in rec.sdpa)
        print(
            f"{side}: {sum(rec.calls.values())} torch calls; SDPA {len(rec.sdpa)} calls, backends {dict(backends)}, "
            f"masks {dict(masks)}"
        )
    for other in ("capturing", "compiling"):
        diff = differing_calls(sides["eager"].calls, sides[other].calls)
        out["differ" if other == "capturing" else f"differ_{other}"] = diff
        print(f"calls that differ (eager, {other}): {len(diff)}")
        for k, (a, b) in list(diff.items())[:40]:
            print(f"  {a:5d} {b:5d}  {k}")
    by = collections.defaultdict(lambda: [0, 0.0])
    for ev in replay:
        by[ev["name"][:90]][0] += 1
        by[ev["name"][:90]][1] += ev["dur"]
    out["captured_kernels"] = {k: v for k, v in sorted(by.items(), key=lambda kv: -kv[1][1])}
    print(f"one captured replay: {len(replay)} kernels, {sum(ev['dur'] for ev in replay):.1f} us")
    for k, (n, us) in list(out["captured_kernels"].items())[:15]:
        print(f"  {n:4d} {us:8.1f} us  {k}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
