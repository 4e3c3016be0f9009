"""What each swap-in mechanism costs the host, per forward pass, before any kernel runs.

The operator router has to see calls such as F.linear, torch.addmm and SDPA wherever a
model makes them. Three ways to intercept, each timed here as a pass-through (every
call goes to PyTorch) on a transformers BertModel, eager, interleaved rounds:
- TorchFunctionMode (what evaluator.routing.router uses): sees every torch function call with its
  Python-level arguments (eps, scale, is_causal);
- TorchDispatchMode: sees every aten op below autograd, already decomposed;
- patching the few functions on their modules: cheapest, but misses call sites that
  imported the function by name before the patch;
and evaluator's own `Router` with no kernels (`Router.passthrough`: every call of the
routed families parsed, looked up and sent back to PyTorch), which is the bare function
mode plus the routing itself. On the H200 (2026-12-02) the router added 10.25 ms to
transformers GPT-2's 10.28 ms eager forward at b4 s512 inside an evaluate run; `--model
gpt2` times that model's structure
(reports/examples/benchmarks/h200-2026-12-02/router_overhead_gpt2.log).

    python3 benchmarks/router_overhead.py [--device cpu|cuda] [--layers 12] [--model bert|gpt2] [--width 768]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class FunctionPass(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class DispatchPass(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class PatchPass:
    names = [(F, "linear"), (F, "layer_norm"), (F, "scaled_dot_product_attention"), (torch, "addmm")]

    def __enter__(self):
        self.saved = [(mod, n, getattr(mod, n)) for mod, n in self.names]
        for mod, n, fn in self.saved:
            setattr(mod, n, (lambda f: lambda *a, **k: f(*a, **k))(fn))

    def __exit__(self, *exc):
        for mod, n, fn in self.saved:
            setattr(mod, n, fn)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--model", choices=("bert", "gpt2"), default="bert")
    ap.add_argument("--width", type=int, default=768, help="hidden size; small widths leave only host time on a CPU")
    args = ap.parse_args()
    import transformers

    from evaluator import kernels
    from evaluator.measuring import compile_path as paths
    from evaluator.routing import router as swap

    dtype = torch.float16 if args.device == "cuda" else torch.float32
    heads = max(1, args.width // 64)
    if args.model == "bert":
        cfg = transformers.BertConfig(
            num_hidden_layers=args.layers,
            hidden_size=args.width,
            num_attention_heads=heads,
            intermediate_size=4 * args.width,
            attn_implementation="sdpa",
        )
        model, names = (
            transformers.BertModel(cfg),
            ("gemm", "gemm_gelu", "attention", "layernorm", "layernorm_residual"),
        )
    else:
        cfg = transformers.GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=heads, attn_implementation="sdpa")
        model, names = transformers.GPT2Model(cfg), ("gemm", "gemm_gelu_tanh", "attention", "layernorm")
    model = model.to(args.device, dtype).eval()
    table = swap.KernelTable(str(dtype).removeprefix("torch."), "cuda" if args.device == "cuda" else "c")
    router = swap.Router([kernels.get(n) for n in names], table).passthrough()
    seq = 128 if args.device == "cuda" else 32
    ids = torch.randint(0, 1000, (8 if args.device == "cuda" else 1, seq), device=args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    modes = {
        "plain": None,
        "TorchFunctionMode": FunctionPass,
        "TorchDispatchMode": DispatchPass,
        "patching": PatchPass,
        "evaluator Router": lambda: router,
    }
    with torch.inference_mode():
        n_calls = sum(paths.record(lambda: model(ids)).calls.values())

    def once(mode) -> float:
        sync()
        t0 = time.perf_counter()
        with torch.inference_mode():
            if mode is None:
                model(ids)
            else:
                with mode():
                    model(ids)
        sync()
        return (time.perf_counter() - t0) * 1e3

    for mode in modes.values():
        for _ in range(3):
            once(mode)
    samples = {k: [] for k in modes}
    for _ in range(args.rounds):
        for name, mode in modes.items():
            samples[name].append(once(mode))
    base, floor = statistics.median(samples["plain"]), min(samples["plain"])
    print(
        f"transformers {type(model).__name__}, {args.layers} layers, width {args.width}, {args.device}, eager, "
        f"{n_calls} torch calls a forward, median of {args.rounds} interleaved rounds (and the fastest round, "
        "which a busy shared host moves least)"
    )
    for name, xs in samples.items():
        m, low = statistics.median(xs), min(xs)
        print(
            f"  {name:18s} {m:8.2f} ms per forward  (+{m - base:6.2f} ms, {1e3 * (m - base) / n_calls:5.1f} us a call)"
            f"  fastest +{low - floor:6.2f} ms"
        )


if __name__ == "__main__":
    main()
