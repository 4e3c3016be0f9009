"""Model loading: the built-in zoo, models people already have, and user factories.

In: a model spec string and overrides (batch size, sequence length, per-sequence
lengths for padded batches, dtype, device, seed). The spec is a zoo name, `hf:<ArchitectureClass>[,key=value...]` or
`hf:<local directory>` (transformers), `timm:<name>[,key=value...]`,
`torchvision:<name>[,key=value...]` (see hub.py), `pkg.module:factory` or
`path/file.py:factory`, and a layout ("as-given", "channels-last" or "auto"). Out: a
`LoadedModel` — the module in eval mode on the device, its example inputs (a tuple for
`model(*inputs)`, in the layout the model's users pass, NCHW for images, unless the layout
says channels-last), and a serialisable `ModelSpec` whose `source` is "zoo", "hf", "timm",
"torchvision", "module" or "file", with a hash of the architecture so baselines of
different models are never compared.

Factory contract (documented in README): `factory(**kwargs)` returns `(model, inputs)`,
where inputs is a tensor or a tuple of tensors; keyword arguments `batch_size`,
`seq_len`, `dtype`, `device` and `lengths` ((lo, hi): pad each sequence to a length drawn
in that range) are passed only if the factory's signature names them; `--lengths` with a
factory that takes no `lengths` is an error, not padding silently left out.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import ModelLoadError
from ..kernels.base import DTYPE_ALIASES, torch_dtype
from ..results import LAYOUTS, ModelSpec
from . import hub
from .zoo import ZOO, check_zoo_inputs, example_inputs

__all__ = ["LoadedModel", "choose_layout", "load_model", "ZOO"]


@dataclass(frozen=True)
class LoadedModel:
    spec: ModelSpec
    module: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]
    device: str


def _arch_hash(name: str, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], layout: str) -> str:
    h = hashlib.sha256(name.encode())
    if layout != "as-given":  # another layout is another comparison; as-given adds nothing to the hash
        h.update(f"layout:{layout};".encode())
    for pname, p in module.named_parameters():
        h.update(f"{pname}:{tuple(p.shape)}:{p.dtype};".encode())
    for t in inputs:
        h.update(f"in:{tuple(t.shape)}:{t.dtype};".encode())
    return h.hexdigest()[:16]


def _call_factory(spec: str, factory, kwargs: dict):
    try:
        params = inspect.signature(factory).parameters
        accepts_all = any(p.kind is p.VAR_KEYWORD for p in params.values())
    except Exception as exc:  # a callable without a signature
        raise ModelLoadError(f"model factory '{spec}' has no signature to call: {type(exc).__name__}: {exc}") from exc
    if kwargs.get("lengths") is not None and not accepts_all and "lengths" not in params:
        raise ModelLoadError(
            f"--lengths needs a factory that pads its own inputs: '{spec}' takes no `lengths` "
            "argument ((lo, hi), each sequence's length)"
        )
    passed = {k: v for k, v in kwargs.items() if v is not None and (accepts_all or k in params)}
    try:
        out = factory(**passed)
    except Exception as exc:  # the user's code: any failure is a load error, not our crash
        raise ModelLoadError(f"model factory '{spec}' raised {type(exc).__name__}: {exc}") from exc
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], torch.nn.Module)):
        raise ModelLoadError(f"model factory '{spec}' must return (torch.nn.Module, inputs); got {type(out).__name__}")
    model, inputs = out
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not (isinstance(inputs, (tuple, list)) and inputs and all(isinstance(t, torch.Tensor) for t in inputs)):
        raise ModelLoadError(f"model factory '{spec}' must return example inputs as a tensor or a tuple of tensors")
    return model, tuple(inputs)


def _resolve_factory(spec: str):
    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        known = ", ".join(ZOO)
        raise ModelLoadError(
            f"unknown model '{spec}'; use one of {known}, or hf:Class, timm:name, torchvision:name, "
            "pkg.module:factory, or path/file.py:factory"
        )
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise ModelLoadError(f"model file '{target}' does not exist; give path/to/file.py:factory")
        mod_name = f"_evaluator_user_model_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]}"
        try:
            mspec = importlib.util.spec_from_file_location(mod_name, path)
            module = importlib.util.module_from_spec(mspec)
            sys.modules[mod_name] = module
            mspec.loader.exec_module(module)
        except Exception as exc:
            raise ModelLoadError(f"could not import '{target}': {type(exc).__name__}: {exc}") from exc
        source = "file"
    else:
        try:
            module = importlib.import_module(target)
        except Exception as exc:
            raise ModelLoadError(
                f"could not import module '{target}' ({type(exc).__name__}: {exc}); "
                "check the name and that it is on PYTHONPATH"
            ) from exc
        source = "module"
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ModelLoadError(f"'{target}' has no callable '{attr}'; the factory must return (model, inputs)")
    return factory, source


def choose_layout(layout: str, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], device: str) -> str:
    """ "auto" -> "channels-last" for a convolutional net on a GPU, else "as-given".

    A convolutional net here: at least two nn.Conv2d, all of one group, fed a 4-D floating
    input. On a GPU its convolutions run fastest channels_last (cuDNN transposes NCHW
    internally; the implicit GEMMs read channels contiguously), and torch.compile's layout
    optimisation converts such a graph the same way; so the comparison is made in the
    layout each side would deploy, and the same one for all three. A net with depthwise or
    grouped convolutions keeps the layout it was given: those run memory-bound `direct`
    tiles or a GEMM per group, where the layout is not what limits them, and the choice is
    left to --layout. On a CPU the layout stays as written.
    """
    if layout != "auto":
        return layout
    if device != "cuda" or not any(t.dim() == 4 and t.is_floating_point() for t in inputs):
        return "as-given"
    convs = [m for m in module.modules() if isinstance(m, torch.nn.Conv2d)]
    return "channels-last" if len(convs) >= 2 and all(m.groups == 1 for m in convs) else "as-given"


def _to_layout(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], layout: str):
    if layout != "channels-last":
        return model, inputs
    cl = torch.channels_last
    model = model.to(memory_format=cl)
    return model, tuple(t.contiguous(memory_format=cl) if t.dim() == 4 and t.is_floating_point() else t for t in inputs)


def load_model(
    name: str,
    *,
    batch_size: int | None = None,
    seq_len: int | None = None,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
    lengths: tuple[int, int] | None = None,
    layout: str = "as-given",
) -> LoadedModel:
    """`lengths` (lo, hi): each sequence's own length drawn in [lo, hi], padded to seq_len
    behind an attention mask; for models whose forward takes one. `layout`: one of LAYOUTS
    (see choose_layout); the spec records the one chosen."""
    if layout not in LAYOUTS:
        raise ModelLoadError(f"unknown layout '{layout}'; use {', '.join(LAYOUTS)}")
    dtype = DTYPE_ALIASES.get(dtype, dtype)
    if dtype not in ("float32", "float16", "bfloat16"):
        raise ModelLoadError(f"unsupported dtype '{dtype}'; use fp32, fp16 or bf16")
    tdtype = torch_dtype(dtype)
    torch.manual_seed(seed)
    if name in ZOO:
        entry = ZOO[name]
        batch_size = batch_size or entry.batch_size
        seq_len = seq_len or entry.seq_len
        check_zoo_inputs(name, entry, seq_len, lengths)
        model = entry.build()
        inputs = example_inputs(entry, batch_size, seq_len, seed)
        source = "zoo"
    elif hub.is_hub_spec(name):
        loaded = hub.load(name, batch_size=batch_size, seq_len=seq_len, seed=seed, lengths=lengths)
        model, inputs, source = loaded.module, loaded.inputs, loaded.source
        batch_size, seq_len = loaded.batch_size, loaded.seq_len
    else:
        factory, source = _resolve_factory(name)
        model, inputs = _call_factory(
            name,
            factory,
            {"batch_size": batch_size, "seq_len": seq_len, "dtype": tdtype, "device": device, "lengths": lengths},
        )
        batch_size = batch_size or (int(inputs[0].shape[0]) if inputs[0].dim() else 1)
    try:
        # Inputs keep the layout they were made in (NCHW for images) unless the layout
        # says channels-last: either way every comparison sees the same layout.
        model = model.to(device=device, dtype=tdtype).eval()
        inputs = tuple(t.to(device=device, dtype=tdtype) if t.is_floating_point() else t.to(device) for t in inputs)
        layout = choose_layout(layout, model, inputs, device)
        model, inputs = _to_layout(model, inputs, layout)
    except Exception as exc:
        raise ModelLoadError(f"could not move model '{name}' to {device} as {dtype}: {exc}") from exc
    spec = ModelSpec(
        name=name,
        source=source,
        batch_size=int(batch_size),
        seq_len=seq_len,
        dtype=dtype,
        parameters=sum(p.numel() for p in model.parameters()),
        spec_hash=_arch_hash(name, model, inputs, layout),
        layout=layout,
    )
    return LoadedModel(spec=spec, module=model, inputs=inputs, device=device)
