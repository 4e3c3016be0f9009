"""What each swap-in mechanism costs the host, per forward pass, before any kernel runs.

The operator router has to see calls such as F.linear, torch.addmm and SDPA wherever a
model makes them. Three ways to intercept, each timed here as a pass-through (every
call goes to PyTorch) on a transformers BertModel, eager, interleaved rounds:
- TorchFunctionMode (what evaluator.swap uses): sees every torch function call with its
  Python-level arguments (eps, scale, is_causal);
- TorchDispatchMode: sees every aten op below autograd, already decomposed;
- patching the few functions on their modules: cheapest, but misses call sites that
  imported the function by name before the patch.

    python3 benchmarks/router_overhead.py [--device cpu|cuda] [--layers 12]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode


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
    args = ap.parse_args()
    from transformers import BertConfig, BertModel

    dtype = torch.float16 if args.device == "cuda" else torch.float32
    model = BertModel(BertConfig(num_hidden_layers=args.layers, attn_implementation="sdpa")).to(args.device, dtype).eval()
    seq = 128 if args.device == "cuda" else 32
    ids = torch.randint(0, 1000, (8 if args.device == "cuda" else 1, seq), device=args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    modes = {"plain": None, "TorchFunctionMode": FunctionPass, "TorchDispatchMode": DispatchPass, "patching": PatchPass}

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
    base = statistics.median(samples["plain"])
    print(f"transformers BertModel, {args.layers} layers, {args.device}, eager, median of {args.rounds} interleaved rounds")
    for name, xs in samples.items():
        m = statistics.median(xs)
        print(f"  {name:18s} {m:8.2f} ms per forward  (+{m - base:6.2f} ms)")


if __name__ == "__main__":
    main()
