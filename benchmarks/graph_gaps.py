"""Where a model's end-to-end time goes inside one CUDA-graph replay: kernel time and the
device time between kernels, for the model as is and with a run's tuned TileLang kernels
routed in.

In: a finished run's results.json (its model, batch, dtype and tuned configs). Out: a
table per side (kernels, kernel time, time between kernels, overlapped starts, i.e.
kernels that began before the previous one ended, as a programmatic dependent launch
lets them) and, for the routed side, the same split for the TileLang kernels alone;
`--json` writes it with the 30 largest gaps and the kernels they precede.

Why: the end-to-end view replays a CUDA graph, which counts the device's idle time
between kernels, while the op benchmarks replay one kernel many times. When the two
disagree (llama on the H200: per-op 0.80-1.04x, kernel sum 0.914x, graph 0.879x) this
says whether the difference is kernel time or gaps, and before which kernels.

Both sides are also timed on graph replay, interleaved, as the end-to-end view times them.
Programmatic dependent launch (every kernel of ours waiting on the previous grid and
letting the next launch early) was tried against these gaps at commit f46c94c
(`--ab` there) and made llama slower: 4.585 against 4.438 ms.

With `--compiled MODE` (default: Inductor's default mode) the model compiled by
torch.compile is a third side, so its kernels can be read beside the routed ones: which
of the model's work Inductor does in less time, and how many kernels it needs.

    python3 benchmarks/graph_gaps.py RUN/results.json [--replays 20] [--compiled MODE] [--top N] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from evaluator import kernels, models
from evaluator.routing import router as swap  # noqa: E402
from evaluator.measuring.compiled import INDUCTOR_MODES  # noqa: E402
from evaluator.measuring.timing import TimingPolicy, GraphSampler, graph_kernel_events  # noqa: E402


def router_from(results: dict, target: str, module: torch.nn.Module) -> swap.Router:
    """The run's tuned kernels, built in parallel (each build is mostly nvcc: ResNet-50's
    43 kernels one after another took minutes), in one router over `module`, so norms
    the model writes out (LlamaRMSNorm) are routed as the run routed them."""
    dtype = results["settings"]["dtype"]
    table = swap.KernelTable(dtype, target, build=lambda f, s, c: kernels.get(f).build(s, dtype, c, target))
    tuned = [t for t in results["tuned"] if t["config"] is not None]

    def build(t: dict):
        return kernels.get(t["family"]).build(tuple(t["shape"]), t["dtype"], t["config"], target)

    with ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 1)) as pool:
        built = list(pool.map(build, tuned))
    for t, kernel in zip(tuned, built):
        table.add(t["family"], tuple(t["shape"]), t["config"], kernel)
    return swap.Router([kernels.get(f) for f in sorted({t["family"] for t in tuned})], table, model=module)


def short(name: str) -> str:
    """A kernel name cut to what tells kernels apart: templates and arguments dropped."""
    name = name.replace("void ", "")
    for sep in ("<", "("):
        name = name.split(sep)[0]
    return name[:60]


def by_name(replay: list[dict]) -> dict[str, dict]:
    """Per kernel (short name): calls, kernel µs, gap µs before it, starts overlapping
    the previous kernel."""
    out: dict[str, dict] = {}
    for prev, e in zip([None] + replay[:-1], replay):
        row = out.setdefault(short(e["name"]), {"calls": 0, "kernel_us": 0.0, "gap_before_us": 0.0, "overlapped": 0})
        row["calls"] += 1
        row["kernel_us"] += e["dur"]
        if prev is not None:
            g = e["ts"] - (prev["ts"] + prev["dur"])
            row["gap_before_us"] += max(g, 0.0)
            row["overlapped"] += g < 0
    return out


def split(replay: list[dict], ours: set[str] | None = None) -> dict:
    span = replay[-1]["ts"] + replay[-1]["dur"] - replay[0]["ts"]
    ksum = sum(e["dur"] for e in replay)
    gaps, overlapped, mine_gap, mine_k, mine_n = [], 0, 0.0, 0.0, 0
    for prev, e in zip(replay, replay[1:]):
        g = e["ts"] - (prev["ts"] + prev["dur"])
        overlapped += g < 0
        gaps.append((g, e["name"]))
        if ours is not None and e["name"] in ours:
            mine_gap += max(g, 0.0)
    if ours is not None:
        mine = [e for e in replay if e["name"] in ours]
        mine_k, mine_n = sum(e["dur"] for e in mine), len(mine)
    return {
        "kernels": len(replay),
        "span_us": span,
        "kernel_us": ksum,
        "between_us": sum(max(g, 0.0) for g, _ in gaps),
        "overlapped_starts": overlapped,
        "tilelang_kernels": mine_n,
        "tilelang_kernel_us": mine_k,
        "gap_before_tilelang_us": mine_gap,
        "largest_gaps": sorted(gaps, reverse=True)[:30],
    }


def median_split(replays: list[list[dict]], ours: set[str] | None = None) -> dict:
    rows = [split(r, ours) for r in replays if r]
    n = statistics.median_low(sorted(r["kernels"] for r in rows))
    rows = [r for r in rows if r["kernels"] == n]  # whole forwards only
    keys = ("span_us", "kernel_us", "between_us", "overlapped_starts", "tilelang_kernel_us", "gap_before_tilelang_us")
    out = {k: statistics.median(r[k] for r in rows) for k in keys}
    out.update(
        kernels=n,
        tilelang_kernels=rows[0]["tilelang_kernels"],
        replays=len(rows),
        largest_gaps=rows[len(rows) // 2]["largest_gaps"],
        by_name=by_name(replays[len(replays) // 2]),
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--no-time", dest="time", action="store_false", help="skip the interleaved graph-replay times")
    ap.add_argument(
        "--compiled",
        default="default",
        choices=[*INDUCTOR_MODES, "none"],
        help="also replay the model under torch.compile in this mode (none: skip)",
    )
    ap.add_argument("--top", type=int, default=20, help="kernels listed per side")
    ap.add_argument("--json")
    args = ap.parse_args()
    with open(args.results) as f:
        results = json.load(f)
    s = results["settings"]
    m = results["model"]
    loaded = models.load_model(
        m.get("origin") or m["name"],
        batch_size=m["batch_size"],
        seq_len=m["seq_len"],
        dtype=s["dtype"],
        device="cuda",
        seed=s["seed"],
        layout=s.get("layout") or m.get("layout") or "as-given",
    )
    module, inputs = loaded.module, loaded.inputs
    sides = {"routed": router_from(results, "cuda", module)}

    def ref():
        return module(*inputs)

    compiled = {}
    if args.compiled != "none":
        # Inductor's program is the alternative a team weighs; its kernels beside ours
        # say which of the model's work it does in less time.
        # The run's own mode mapping: max-autotune without Inductor's CUDA graphs, which
        # cannot run inside the capture this script replays.
        opt = torch.compile(module, mode=INDUCTOR_MODES[args.compiled], dynamic=False)
        compiled = {"compiled": lambda: opt(*inputs)}

    def routed(router):
        def fn():
            with router:
                return module(*inputs)

        return fn

    fns = {"reference": ref, **{k: routed(r) for k, r in sides.items()}, **compiled}
    with torch.inference_mode():
        events = {k: graph_kernel_events(f, args.replays) for k, f in fns.items()}
        ref_names = {e["name"] for r in events["reference"] for e in r}
        ours = {e["name"] for r in events["routed"] for e in r} - ref_names
        out = {"model": m["name"], "tilelang_kernel_names": sorted(ours)}
        for k, ev in events.items():
            out[k] = median_split(ev, ours if k == "routed" else None)
        if args.time:  # graph replay, interleaved, reversed every other round
            samplers = {k: GraphSampler([f], TimingPolicy()) for k, f in fns.items()}
            times = {k: [] for k in fns}
            for r in range(15):
                order = list(samplers) if r % 2 == 0 else list(samplers)[::-1]
                for k in order:
                    times[k].append(samplers[k].sample())
            out["graph_replay_ms"] = {k: statistics.median(v) for k, v in times.items()}
    print(f"{'side':16s} {'kernels':>8s} {'span us':>9s} {'kernel us':>10s} {'between us':>11s} {'overlapped':>10s}")
    names = list(fns)
    for side in names:
        r = out[side]
        print(
            f"{side:16s} {r['kernels']:8d} {r['span_us']:9.1f} {r['kernel_us']:10.1f} {r['between_us']:11.1f} "
            f"{r['overlapped_starts']:10.0f}"
        )
    if "graph_replay_ms" in out:
        g = out["graph_replay_ms"]
        print(
            "graph replay, interleaved: "
            + ", ".join(f"{k} {v:.3f} ms ({g['reference'] / v:.3f}x)" for k, v in g.items())
        )
        if "compiled" in g:
            print(f"routed against compiled: {g['compiled'] / g['routed']:.3f}x")
    r = out["routed"]
    print(
        f"TileLang kernels: {r['tilelang_kernels']}, {r['tilelang_kernel_us']:.1f} us, "
        f"{r['gap_before_tilelang_us']:.1f} us of gaps before them"
    )
    for side in names:
        print(f"{side}: per kernel (calls, kernel us, gap before us, overlapped starts), by kernel time")
        rows = sorted(out[side]["by_name"].items(), key=lambda kv: -kv[1]["kernel_us"])
        for name, r in rows[: args.top]:
            print(f"  {name:60s} {r['calls']:5d} {r['kernel_us']:9.1f} {r['gap_before_us']:8.1f} {r['overlapped']:5d}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
