"""Loaders for models people already have: Hugging Face transformers, timm, torchvision.

In: a spec string, `hf:<ArchitectureClass>[,key=value...]`, `hf:<local directory>`,
`timm:<name>[,key=value...]` or `torchvision:<name>[,key=value...]`, with the batch size,
sequence length and seed. Out: a `HubModel` — the module (random weights, or a local
directory's own weights), example inputs as a tuple of tensors for `model(*inputs)`, the
sizes actually used and the source ("hf", "timm", "torchvision").

Nothing is downloaded: an architecture is built from its default config plus the
overrides, a directory is read with local_files_only. Each library is an optional extra;
a missing one, an unknown name or a bad override is a one-line `ModelLoadError` that says
what to do. Inputs are NCHW / token ids exactly as the library's users pass them.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import ModelLoadError

PREFIXES = ("hf", "timm", "torchvision")
DEFAULT_BATCH = 8
DEFAULT_SEQ = 128
DEFAULT_IMAGE = 224

# What to tell a user whose library is missing: the project's extra, or the plain package.
_INSTALL = {
    "transformers": "pip install -e '.[hf]' (or pip install transformers)",
    "timm": "pip install -e '.[timm]' (or pip install timm)",
    "torchvision": "pip install -e '.[torchvision]' (or pip install torchvision built for your torch)",
}
# Files whose presence means a Hugging Face directory carries weights, not just a config.
_HF_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
               "pytorch_model.bin.index.json")


@dataclass(frozen=True)
class HubModel:
    module: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]
    batch_size: int
    seq_len: int | None  # token models only; images take their size from the model
    source: str


def is_hub_spec(name: str) -> bool:
    # These prefixes win over `pkg.module:factory`: "timm:resnet18" names a timm model,
    # not a function resnet18 in a module timm.
    prefix, sep, _ = name.partition(":")
    return bool(sep) and prefix in PREFIXES


def load(name: str, *, batch_size: int | None, seq_len: int | None, seed: int) -> HubModel:
    prefix, _, rest = name.partition(":")
    target, options = _split(name, rest)
    batch_size = batch_size or DEFAULT_BATCH
    if prefix == "hf":
        return _load_hf(name, target, options, batch_size, seq_len, seed)
    if seq_len is not None:
        # An image side is part of the architecture here (position embeddings, pretrained
        # cfg), so it is set where the model is built, never silently ignored.
        key = "img_size" if prefix == "timm" else "image_size"
        raise ModelLoadError(f"--seq-len does not apply to the image model '{name}'; "
                             f"set the image size in the spec, e.g. {prefix}:{target},{key}=...")
    if prefix == "timm":
        return _load_timm(name, target, options, batch_size, seed)
    return _load_torchvision(name, target, options, batch_size, seed)


# ---------------------------------------------------------------- spec parsing


def _split(spec: str, rest: str) -> tuple[str, dict[str, Any]]:
    """'BertModel,num_hidden_layers=2,x=1.5' -> ('BertModel', {'num_hidden_layers': 2, 'x': 1.5})."""
    parts = [p.strip() for p in rest.split(",")]
    target, options = parts[0], {}
    if not target:
        raise ModelLoadError(f"model spec '{spec}' names nothing after the colon; "
                             "e.g. hf:BertModel, timm:resnet18 or torchvision:resnet18")
    for item in parts[1:]:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ModelLoadError(f"option '{item}' in '{spec}' is not key=value (e.g. num_hidden_layers=2)")
        options[key.strip()] = _parse_value(value.strip())
    return target, options


def _parse_value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text  # e.g. hidden_act=gelu_new


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def _import(lib: str):
    """The library, or a one-line error that says what to install. A library that is
    present but fails to import (timm without a working torchvision, a torchvision built
    for another torch) gets the reason, since reinstalling is then the fix."""
    try:
        return importlib.import_module(lib)
    except ModuleNotFoundError as exc:
        if exc.name == lib or exc.name is None:
            raise ModelLoadError(f"{lib} is not installed; {_INSTALL[lib]}") from exc
        raise ModelLoadError(f"{lib} is installed but cannot be imported ({_one_line(exc)}); "
                             f"{_INSTALL[lib]}") from exc
    except Exception as exc:  # e.g. torchvision's C++ ops not matching torch's build
        raise ModelLoadError(f"{lib} is installed but cannot be imported ({_one_line(exc)}); "
                             f"{_INSTALL[lib]}") from exc


def _close(word: str, names, n: int = 3) -> str:
    """' (did you mean A, B?)' from a case-insensitive fuzzy match, or ''."""
    by_lower: dict[str, str] = {}
    for s in names:
        by_lower.setdefault(s.lower(), s)
    hits = difflib.get_close_matches(word.lower(), list(by_lower), n=n, cutoff=0.6)
    return f" (did you mean {', '.join(by_lower[h] for h in hits)}?)" if hits else ""


def _nchw(batch: int, channels: int, h: int, w: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, channels, h, w, generator=g),)


def _side(value: Any) -> tuple[int, int]:
    if isinstance(value, (list, tuple)):
        return int(value[-2]), int(value[-1])
    return int(value), int(value)


# ---------------------------------------------------------------- Hugging Face transformers


def _is_model_class(obj: Any, transformers) -> bool:
    # A concrete architecture: abstract bases (PreTrainedModel, BertPreTrainedModel) have
    # no config to build from, or nothing to run.
    return (inspect.isclass(obj) and issubclass(obj, transformers.PreTrainedModel)
            and getattr(obj, "config_class", None) is not None and not obj.__name__.endswith("PreTrainedModel"))


_MODEL_NAME = re.compile(r"[A-Z]\w*(Model|For[A-Z]\w*)$")
_NOT_MODEL = re.compile(r"(Config|Tokenizer\w*|(Image|Video)?Processor\w*|FeatureExtractor|PreTrainedModel)$")


def _model_names(transformers) -> list[str]:
    # Model classes are the public names ending in Model or in a task ("ForMaskedLM").
    names = getattr(transformers, "__all__", None) or dir(transformers)
    return [n for n in names if _MODEL_NAME.fullmatch(n) and not n.endswith("PreTrainedModel")]


def _suggest_model(transformers, target: str) -> str:
    """Close model class names; for BertConfig or BertTokenizer, the Bert models."""
    names = _model_names(transformers)
    stem = _NOT_MODEL.sub("", target)
    if stem and stem != target:
        same = sorted((n for n in names if n.startswith(stem) and n[len(stem):][:1].isupper()), key=len)[:3]
        if same:
            return f" (did you mean {', '.join(same)}?)"
    return _close(target, names)


def _hf_class(transformers, target: str, spec: str):
    obj = None
    try:
        obj = getattr(transformers, target, None)
    except Exception as exc:  # a lazily imported model whose own extra dependency is missing
        raise ModelLoadError(f"transformers cannot build '{target}' ({_one_line(exc)})") from exc
    if obj is None or not _is_model_class(obj, transformers):
        what = "is not a model class" if obj is not None else "is not a transformers architecture"
        raise ModelLoadError(f"'{target}' {what}{_suggest_model(transformers, target)}; "
                             f"give a model class such as hf:BertModel, or hf:<directory with config.json>")
    return obj


def _check_overrides(config, options: dict[str, Any], spec: str) -> None:
    """Configs accept any keyword silently; a misspelt size would build the default
    (often a multi-GB model), so every key must be one the config knows."""
    known = set(config.to_dict()) | set(getattr(config, "attribute_map", {}))
    for key in options:
        if key not in known and not hasattr(config, key):
            raise ModelLoadError(f"'{key}' in '{spec}' is not a field of {type(config).__name__}"
                                 f"{_close(key, known)}")


def _hf_defaults(config, options: dict[str, Any]) -> dict[str, Any]:
    out = dict(options)
    # A single forward pass, not generation: no KV-cache object in the outputs (it is
    # not a tensor, so outputs could not be compared) and no memory spent on it.
    if hasattr(config, "use_cache"):
        out.setdefault("use_cache", False)
    return out


def _build_hf(cls, config, weights_dir: Path | None, options: dict[str, Any], spec: str):
    sdpa = bool(getattr(cls, "_supports_sdpa", False))
    kwargs = {"attn_implementation": "sdpa"} if sdpa else {}
    try:
        if weights_dir is not None:
            return cls.from_pretrained(str(weights_dir), local_files_only=True, **kwargs, **options)
        return cls._from_config(config, **kwargs)
    except ModelLoadError:
        raise
    except Exception as exc:
        raise ModelLoadError(f"transformers could not build '{spec}': {_one_line(exc)}") from exc


def _load_hf(spec: str, target: str, options: dict[str, Any], batch: int, seq_len: int | None,
             seed: int) -> HubModel:
    transformers = _import("transformers")
    path = Path(target).expanduser()
    looks_like_path = path.is_dir() or "/" in target or "\\" in target or target.startswith((".", "~"))
    if looks_like_path:
        if not path.is_dir():
            raise ModelLoadError(f"'{target}' is not a local directory and nothing is downloaded; use "
                                 "hf:<ArchitectureClass> for random weights, or fetch the model yourself "
                                 "(huggingface-cli download ID --local-dir DIR) and give hf:DIR")
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"'{target}' has no config.json; give a directory saved with save_pretrained")
        try:
            config = transformers.AutoConfig.from_pretrained(str(path), local_files_only=True)
        except Exception as exc:
            raise ModelLoadError(f"could not read {path / 'config.json'}: {_one_line(exc)}") from exc
        archs = getattr(config, "architectures", None) or []
        cls = _hf_class(transformers, archs[0], spec) if archs else None
        if cls is None:
            try:
                cls = transformers.AutoModel._model_mapping[type(config)]
            except Exception as exc:
                raise ModelLoadError(f"{path / 'config.json'} names no architecture and model_type "
                                     f"'{config.model_type}' has no AutoModel class") from exc
        _check_overrides(config, options, spec)
        _check_seq_len(cls, seq_len, spec)
        options = _hf_defaults(config, options)
        if any((path / f).is_file() for f in _HF_WEIGHTS):
            model = _build_hf(cls, None, path, options, spec)
        else:
            try:  # the overrides go through the config's constructor, as from_pretrained does
                config = transformers.AutoConfig.from_pretrained(str(path), local_files_only=True, **options)
            except Exception as exc:
                raise ModelLoadError(f"bad config for '{spec}': {_one_line(exc)}") from exc
            model = _build_hf(cls, config, None, {}, spec)
    else:
        cls = _hf_class(transformers, target, spec)
        try:
            default = cls.config_class()
        except Exception as exc:
            raise ModelLoadError(f"{cls.config_class.__name__}() failed for '{spec}': {_one_line(exc)}") from exc
        _check_overrides(default, options, spec)
        _check_seq_len(cls, seq_len, spec)
        config = _hf_config(cls.config_class, _hf_defaults(default, options), spec)
        model = _build_hf(cls, config, None, {}, spec)
    inputs, seq = _hf_inputs(model, spec, batch, seq_len, seed)
    return HubModel(model, inputs, batch, seq, "hf")


def _check_seq_len(cls, seq_len: int | None, spec: str) -> None:
    # Before building: a default-size vision model takes seconds to initialise.
    if seq_len is not None and getattr(cls, "main_input_name", "input_ids") == "pixel_values":
        raise ModelLoadError(f"--seq-len does not apply to the image model '{spec}'; "
                             "set image_size=... in the spec instead")


def _hf_config(config_cls, values: dict[str, Any], spec: str):
    try:
        # Through the constructor, not setattr: configs derive fields (head_dim...) there.
        return config_cls(**values)
    except Exception as exc:
        raise ModelLoadError(f"bad config for '{spec}': {_one_line(exc)}") from exc


def _hf_inputs(model, spec: str, batch: int, seq_len: int | None,
               seed: int) -> tuple[tuple[torch.Tensor, ...], int | None]:
    """Positional inputs for model(*inputs), in the order forward() declares them."""
    config = model.config
    main = getattr(model, "main_input_name", "input_ids")
    g = torch.Generator().manual_seed(seed)
    seq = None
    if main == "input_ids":
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        vocab = getattr(text, "vocab_size", None)
        if not vocab:
            raise ModelLoadError(f"{type(config).__name__} has no vocab_size; write a factory for '{spec}'")
        max_pos = getattr(text, "max_position_embeddings", None)
        if seq_len is None:
            seq = min(DEFAULT_SEQ, max_pos) if isinstance(max_pos, int) and max_pos > 0 else DEFAULT_SEQ
        else:
            if isinstance(max_pos, int) and 0 < max_pos < seq_len:
                raise ModelLoadError(f"sequence length {seq_len} exceeds max_position_embeddings={max_pos} "
                                     f"of '{spec}'; lower --seq-len or add max_position_embeddings={seq_len}")
            seq = seq_len
        main_tensor = torch.randint(0, int(vocab), (batch, seq), generator=g)
    elif main == "pixel_values":
        vision = getattr(config, "vision_config", None) or config
        h, w = _side(getattr(vision, "image_size", DEFAULT_IMAGE) or DEFAULT_IMAGE)
        main_tensor = _nchw(batch, int(getattr(vision, "num_channels", 3) or 3), h, w, seed)[0]
    else:
        raise ModelLoadError(f"no example inputs for a model whose main input is '{main}' ({spec}); "
                             "write a factory that returns (model, inputs), see README")
    fill = {main: main_tensor}
    if getattr(config, "is_encoder_decoder", False) and main == "input_ids":
        fill["decoder_input_ids"] = main_tensor.clone()
    params = [p.name for p in inspect.signature(model.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    missing = [n for n in fill if n not in params]
    if missing:
        raise ModelLoadError(f"{type(model).__name__}.forward takes no positional '{missing[0]}'; "
                             f"write a factory for '{spec}'")
    last = max(params.index(n) for n in fill)
    inputs = []
    for name in params[:last + 1]:
        if name in fill:
            inputs.append(fill[name])
        elif name in ("attention_mask", "decoder_attention_mask"):
            # A gap before decoder_input_ids: an all-ones mask is what no mask means.
            inputs.append(torch.ones(batch, main_tensor.shape[1], dtype=torch.long))
        else:
            raise ModelLoadError(f"cannot make the positional input '{name}' of {type(model).__name__}; "
                                 f"write a factory for '{spec}'")
    return tuple(inputs), seq


# ---------------------------------------------------------------- timm


def _load_timm(spec: str, target: str, options: dict[str, Any], batch: int, seed: int) -> HubModel:
    timm = _import("timm")
    if not timm.is_model(target):
        raise ModelLoadError(f"'{target}' is not a timm model{_close(target, timm.list_models())}; "
                             "timm.list_models() lists them")
    try:
        model = timm.create_model(target, pretrained=False, **options)
    except Exception as exc:
        raise ModelLoadError(f"timm could not build '{spec}': {_one_line(exc)}") from exc
    cfg = getattr(model, "pretrained_cfg", None) or getattr(model, "default_cfg", None) or {}
    c, h, w = (tuple(cfg.get("input_size", ())) or (3, DEFAULT_IMAGE, DEFAULT_IMAGE))[-3:]
    # The pretrained cfg describes the checkpoint, not the kwargs the model was built with.
    if options.get("img_size") is not None:
        h, w = _side(options["img_size"])
    if options.get("in_chans") is not None:
        c = options["in_chans"]
    return HubModel(model, _nchw(batch, int(c), int(h), int(w), seed), batch, None, "timm")


# ---------------------------------------------------------------- torchvision


def _load_torchvision(spec: str, target: str, options: dict[str, Any], batch: int, seed: int) -> HubModel:
    torchvision = _import("torchvision")
    names = torchvision.models.list_models()
    if target not in names:
        raise ModelLoadError(f"'{target}' is not a torchvision model{_close(target, names)}; "
                             "torchvision.models.list_models() lists them")
    try:
        model = torchvision.models.get_model(target, weights=None, **options)
    except Exception as exc:
        raise ModelLoadError(f"torchvision could not build '{spec}': {_one_line(exc)}") from exc
    h, w = _side(options.get("image_size") or DEFAULT_IMAGE)  # ViTs take image_size; CNNs any
    return HubModel(model, _nchw(batch, 3, h, w, seed), batch, None, "torchvision")
