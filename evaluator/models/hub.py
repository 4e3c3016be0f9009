"""Loaders for models people already have: Hugging Face transformers, timm, torchvision.

In: a spec string, `hf:<ArchitectureClass>[,key=value...]`, `hf:<local directory>`,
`timm:<name>[,key=value...]` or `torchvision:<name>[,key=value...]` (values are JSON where
they parse: depths=[2,2], rope_parameters={...}), with the batch size, sequence length,
per-sequence lengths for a padded batch, and seed. Out: a `HubModel` — the module (random
weights, or a local directory's own weights), example inputs as a tuple of tensors for
`module(*inputs)`, the sizes actually used and the source ("hf", "timm", "torchvision").

Nothing is downloaded. An hf: config is built by its own constructor from the defaults (or
the directory's config.json) and the overrides, as transformers builds it; a key the built
config does not hold, or that only sets something the model never reads (Swin's
num_hidden_layers: its layers are `depths`), is an error rather than a default-size model.
Classes are found in transformers' namespace or in their model's modeling module
(WhisperEncoder). Inputs come from the model's forward signature and config: token ids,
NCHW pixels, Whisper's log-mel features, raw audio; decoder ids for an encoder-decoder; and
under --lengths an attention mask over each row's padded length. Where forward
does not take them as its leading positional parameters, a `KeywordCall` passes them by
name. Each library is an optional extra; a missing one, an unknown name, a bad override or
a sequence past the position table is a one-line `ModelLoadError` that says what to do.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import inspect
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import ModelLoadError

PREFIXES = ("hf", "timm", "torchvision")
DEFAULT_BATCH = 8
DEFAULT_SEQ = 128
DEFAULT_IMAGE = 224
DEFAULT_AUDIO = 16000  # raw audio samples: one second at the 16 kHz wav2vec2 models take

# What to tell a user whose library is missing: the project's extra, or the plain package.
_INSTALL = {
    "transformers": "pip install -e '.[hf]' (or pip install transformers)",
    "timm": "pip install -e '.[timm]' (or pip install timm)",
    "torchvision": "pip install -e '.[torchvision]' (or pip install torchvision built for your torch)",
}
# Files whose presence means a Hugging Face directory carries weights, not just a config.
_HF_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


@dataclass(frozen=True)
class HubModel:
    module: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]
    batch_size: int
    seq_len: int | None  # tokens (decoder tokens for Whisper), audio samples; None for images
    source: str


def is_hub_spec(name: str) -> bool:
    # These prefixes win over `pkg.module:factory`: "timm:resnet18" names a timm model,
    # not a function resnet18 in a module timm.
    prefix, sep, _ = name.partition(":")
    return bool(sep) and prefix in PREFIXES


def load(
    name: str, *, batch_size: int | None, seq_len: int | None, seed: int, lengths: tuple[int, int] | None = None
) -> HubModel:
    prefix, _, rest = name.partition(":")
    target, options = _split(name, rest)
    batch_size = batch_size or DEFAULT_BATCH
    if prefix == "hf":
        return _load_hf(name, target, options, batch_size, seq_len, lengths, seed)
    if lengths is not None:
        raise ModelLoadError(
            f"--lengths pads token sequences behind an attention_mask; the image model '{name}' has none to pad"
        )
    if seq_len is not None:
        # An image side is part of the architecture here (position embeddings, pretrained
        # cfg), so it is set where the model is built, never silently ignored.
        key = "img_size" if prefix == "timm" else "image_size"
        raise ModelLoadError(
            f"--seq-len does not apply to the image model '{name}'; "
            f"set the image size in the spec, e.g. {prefix}:{target},{key}=..."
        )
    if prefix == "timm":
        return _load_timm(name, target, options, batch_size, seed)
    return _load_torchvision(name, target, options, batch_size, seed)


# ---------------------------------------------------------------- spec parsing


def _split(spec: str, rest: str) -> tuple[str, dict[str, Any]]:
    """'SwinModel,depths=[2,2],x=1.5' -> ('SwinModel', {'depths': [2, 2], 'x': 1.5}).

    Commas inside brackets, braces or quotes belong to the value, so lists and dicts can be
    given as JSON."""
    parts = [p.strip() for p in _top_level_commas(rest)]
    target, options = parts[0], {}
    if not target:
        raise ModelLoadError(
            f"model spec '{spec}' names nothing after the colon; "
            "e.g. hf:BertModel, timm:resnet18 or torchvision:resnet18"
        )
    for item in parts[1:]:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ModelLoadError(
                f"option '{item}' in '{spec}' is not key=value (e.g. num_hidden_layers=2, depths=[2,2])"
            )
        options[key.strip()] = _parse_value(value.strip())
    return target, options


def _top_level_commas(text: str) -> list[str]:
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _parse_value(text: str) -> Any:
    """JSON where it parses (numbers, lists, dicts, true/false/null, "quoted strings"), the
    Python spellings True/False/None and numbers too, else the text itself (hidden_act=gelu_new)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for kind in (int, float):  # what JSON refuses but Python reads: .5, 1., +2
        try:
            return kind(text)
        except ValueError:
            pass
    return text


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
        raise ModelLoadError(f"{lib} is installed but cannot be imported ({_one_line(exc)}); {_INSTALL[lib]}") from exc
    except Exception as exc:  # e.g. torchvision's C++ ops not matching torch's build
        raise ModelLoadError(f"{lib} is installed but cannot be imported ({_one_line(exc)}); {_INSTALL[lib]}") from exc


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
    return (
        inspect.isclass(obj)
        and issubclass(obj, transformers.PreTrainedModel)
        and getattr(obj, "config_class", None) is not None
        and not obj.__name__.endswith("PreTrainedModel")
    )


_MODEL_NAME = re.compile(r"[A-Z]\w*(Model|For[A-Z]\w*)$")
_NOT_MODEL = re.compile(r"(Config|Tokenizer\w*|(Image|Video)?Processor\w*|FeatureExtractor|PreTrainedModel)$")


def _model_names(transformers) -> list[str]:
    # Model classes are the public names ending in Model or in a task ("ForMaskedLM").
    names = getattr(transformers, "__all__", None) or dir(transformers)
    return [n for n in names if _MODEL_NAME.fullmatch(n) and not n.endswith("PreTrainedModel")]


def _suggest_model(transformers, target: str, extra: list[str] | tuple = ()) -> str:
    """Close model class names; for BertConfig or BertTokenizer, the Bert models."""
    names = _model_names(transformers) + [n for n in extra if n not in _model_names(transformers)]
    stem = _NOT_MODEL.sub("", target)
    if stem and stem != target:
        same = sorted((n for n in names if n.startswith(stem) and n[len(stem) :][:1].isupper()), key=len)[:3]
        if same:
            return f" (did you mean {', '.join(same)}?)"
    return _close(target, names)


def _model_modules(target: str) -> list:
    """The modeling modules of the model types whose config name starts `target`, longest
    name first ('WhisperEncoder' -> transformers.models.whisper.modeling_whisper): encoders,
    decoders and stacks live there without being exported at the top level."""
    try:
        from transformers.models.auto.configuration_auto import (
            CONFIG_MAPPING_NAMES,
            model_type_to_module_name,
        )
    except ImportError:
        return []
    stems = sorted(
        ((cfg[: -len("Config")], mt) for mt, cfg in CONFIG_MAPPING_NAMES.items() if cfg.endswith("Config")),
        key=lambda s: -len(s[0]),
    )
    out, seen = [], set()
    for stem, model_type in stems:
        folder = model_type_to_module_name(model_type)
        if not stem or not target.startswith(stem) or folder in seen:
            continue
        seen.add(folder)
        try:
            out.append(importlib.import_module(f"transformers.models.{folder}.modeling_{folder}"))
        except Exception:  # no modeling file by that name, or one whose own extra is missing
            continue
    return out


def _hf_class(transformers, target: str, spec: str):
    obj = None
    try:
        obj = getattr(transformers, target, None)
    except Exception as exc:  # a lazily imported model whose own extra dependency is missing
        raise ModelLoadError(f"transformers cannot build '{target}' ({_one_line(exc)})") from exc
    modules = []
    if obj is None:
        modules = _model_modules(target)
        obj = next((getattr(m, target) for m in modules if inspect.isclass(getattr(m, target, None))), None)
    if obj is None or not _is_model_class(obj, transformers):
        what = "is not a model class" if obj is not None else "is not a transformers architecture"
        inner = [n for m in modules for n, v in vars(m).items() if _is_model_class(v, transformers)]
        raise ModelLoadError(
            f"'{target}' {what}{_suggest_model(transformers, target, inner)}; "
            f"give a model class such as hf:BertModel, or hf:<directory with config.json>"
        )
    return obj


# ---------------------------------------------------------------- hf: config keys


def _config_fields(config_cls) -> set[str]:
    """The keywords a config's constructor names (a dataclass's fields in transformers 5)."""
    names: set[str] = set()
    try:
        names |= {
            p.name
            for p in inspect.signature(config_cls).parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        }
    except (TypeError, ValueError):
        pass
    if dataclasses.is_dataclass(config_cls):
        names |= {f.name for f in dataclasses.fields(config_cls)}
    return names


@functools.cache
def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def _reads(name: str, code: str) -> bool:
    """Whether `code` reads a config attribute `name`: config.name, getattr(config, "name"),
    kwargs.pop("name") in a config constructor, rope_parameters["name"]..."""
    return re.search(rf"config\.{re.escape(name)}\b|[\"']{re.escape(name)}[\"']", code) is not None


def _config_code(config_cls) -> str:
    # The constructor's own code: a key it takes from **kwargs (GPTNeoX's rotary_pct) is quoted there.
    return "\n".join(_source(c) for c in config_cls.__mro__ if c.__module__.startswith("transformers."))


def _model_code(model) -> str:
    """The code that builds and runs `model`: the classes of its modules (transformers' own,
    PreTrainedModel's generic machinery left out) and the functions their modeling modules
    call from transformers (rotary set-up, masks)."""
    classes, modules = set(), set()
    for m in model.modules():
        for c in type(m).__mro__:
            if c.__module__.startswith("transformers.") and c.__module__ != "transformers.modeling_utils":
                classes.add(c)
                modules.add(c.__module__)
    funcs = {
        v
        for mod in modules
        for v in vars(sys.modules[mod]).values()
        if inspect.isfunction(v) and v.__module__.startswith("transformers.")
    }
    return "\n".join(_source(o) for o in classes | funcs)


def _input_key(cls, key: str) -> bool:
    """image_size on an image model whose config has none (ResNet, RegNet): the side of the
    example images, which a convolutional net takes at any size."""
    return key == "image_size" and getattr(cls, "main_input_name", None) == "pixel_values"


def _check_keys(config_cls, default, cls, options: dict[str, Any], spec: str) -> None:
    """Before building: every key is one the config or the model knows. Configs accept any
    keyword silently, and a misspelt size would build the default (often a multi-GB model)."""
    fields = _config_fields(config_cls)
    alias = dict(getattr(config_cls, "attribute_map", {}) or {})
    for key in options:
        if key in fields or key in alias or (hasattr(default, key) and not callable(getattr(default, key))):
            continue
        if _input_key(cls, key):
            continue
        if _reads(key, _config_code(config_cls)) or _reads(key, _source(sys.modules[cls.__module__])):
            continue  # taken from **kwargs by the constructor, or read by the model's code
        known = fields | set(alias) | set(default.to_dict())
        raise ModelLoadError(f"'{key}' in '{spec}' is not a field of {config_cls.__name__}{_close(key, known)}")


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    return value


def _holds(have: Any, want: Any) -> bool:
    """The config holds the value given; a dict given holds where its keys do (configs add
    their defaults to rope_parameters)."""
    have, want = _plain(have), _plain(want)
    if isinstance(want, dict) and isinstance(have, dict):
        return all(k in have and _holds(have[k], v) for k, v in want.items())
    return have == want


def _show(value: Any) -> str:
    value = _plain(value)
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _check_held(config, default, options: dict[str, Any], name: str) -> None:
    """After the constructor: each key given is what the config holds (or the constructor
    took it, as GPTNeoX takes rotary_pct into rope_parameters)."""
    for key, want in options.items():
        if want is None or not hasattr(config, key):
            continue  # None asks the config for its own value; a key popped from **kwargs was used
        have = getattr(config, key)
        if not _holds(have, want):
            was = "changed nothing" if hasattr(default, key) and _holds(getattr(default, key), have) else "did not hold"
            raise ModelLoadError(f"{name}: {key}={_show(want)} {was} ({type(config).__name__} has {key}={_show(have)})")


def _check_read(model, options: dict[str, Any], name: str) -> None:
    """After building: a key that is not one of the constructor's fields (an extra attribute,
    or one the config derives, as Swin derives num_layers from depths) counts only if the
    model's code reads it."""
    config = model.config
    fields = _config_fields(type(config))
    alias = dict(getattr(type(config), "attribute_map", {}) or {})
    code = None
    for key, want in options.items():
        attr = alias.get(key, key)
        if not hasattr(config, key) or key in fields or attr in fields or _input_key(type(model), key):
            continue
        code = code if code is not None else _model_code(model)
        if _reads(key, code) or _reads(attr, code):
            continue
        raise ModelLoadError(
            f"{name}: {key}={_show(want)} changed nothing ({type(model).__name__} never reads "
            f"{attr}{_derivation(type(config), attr, fields)})"
        )


def _derivation(config_cls, attr: str, fields: set[str]) -> str:
    """'; SwinConfig derives it from depths: give depths=[...] instead', from the line in
    the config's constructor that sets the attribute, or ''."""
    for c in config_cls.__mro__:
        if not c.__module__.startswith("transformers.models."):
            continue
        m = re.search(rf"self\.{re.escape(attr)}\s*=\s*(.+)", _source(c))
        if not m:
            continue
        used = [f for f in dict.fromkeys(re.findall(r"self\.(\w+)", m.group(1))) if f in fields]
        if used:
            like = "[...]" if isinstance(getattr(config_cls, used[0], None), (list, tuple)) else "..."
            return f"; {config_cls.__name__} derives it from {', '.join(used)}: give {used[0]}={like} instead"
    return ""


def _hf_defaults(config, options: dict[str, Any]) -> dict[str, Any]:
    out = dict(options)
    # A single forward pass, not generation: no KV-cache object in the outputs (it is
    # not a tensor, so outputs could not be compared) and no memory spent on it.
    if hasattr(config, "use_cache"):
        out.setdefault("use_cache", False)
    return out


def _hf_config(config_cls, values: dict[str, Any], spec: str):
    try:
        # Through the constructor, not setattr: configs derive fields (head_dim...) there.
        return config_cls(**values)
    except Exception as exc:
        raise ModelLoadError(f"bad config for '{spec}': {_one_line(exc)}") from exc


def _build_hf(cls, config, weights_dir: Path | None, options: dict[str, Any], spec: str):
    # SDPA where the model has it, unless the spec chose an attention implementation.
    sdpa = bool(getattr(cls, "_supports_sdpa", False)) and "attn_implementation" not in options
    kwargs = {"attn_implementation": "sdpa"} if sdpa else {}
    try:
        if weights_dir is not None:
            return cls.from_pretrained(str(weights_dir), config=config, local_files_only=True, **kwargs)
        return cls._from_config(config, **kwargs)
    except ModelLoadError:
        raise
    except Exception as exc:
        raise ModelLoadError(
            f"transformers could not build '{spec}': {_one_line(exc)}{_token_hint(config, options)}"
        ) from exc


def _token_hint(config, options: dict[str, Any]) -> str:
    """Where a special token id the spec left at the config's default lies beyond a
    smaller vocab_size the spec gave (ModernBERT's pad_token_id 50283 against
    vocab_size=1000: the embedding refuses it as padding_idx), the option to give."""
    vocab = getattr(config, "vocab_size", None)
    if not isinstance(vocab, int):
        return ""
    for name in ("pad_token_id", "bos_token_id", "eos_token_id", "sep_token_id", "cls_token_id"):
        v = getattr(config, name, None)
        if isinstance(v, int) and not isinstance(v, bool) and v >= vocab and name not in options:
            return f" ({name} is {v}, the config's default, not below vocab_size {vocab}: give {name}=0 in the spec)"
    return ""


# ---------------------------------------------------------------- hf: loading


def _load_hf(
    spec: str,
    target: str,
    options: dict[str, Any],
    batch: int,
    seq_len: int | None,
    lengths: tuple[int, int] | None,
    seed: int,
) -> HubModel:
    transformers = _import("transformers")
    name = f"hf:{target}"
    path = Path(target).expanduser()
    looks_like_path = path.is_dir() or "/" in target or "\\" in target or target.startswith((".", "~"))
    if looks_like_path:
        if not path.is_dir():
            raise ModelLoadError(
                f"'{target}' is not a local directory and nothing is downloaded; use "
                "hf:<ArchitectureClass> for random weights, or fetch the model yourself "
                "(huggingface-cli download ID --local-dir DIR) and give hf:DIR"
            )
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"'{target}' has no config.json; give a directory saved with save_pretrained")
        try:
            default = transformers.AutoConfig.from_pretrained(str(path), local_files_only=True)
            saved = json.loads((path / "config.json").read_text())
        except Exception as exc:
            raise ModelLoadError(f"could not read {path / 'config.json'}: {_one_line(exc)}") from exc
        archs = getattr(default, "architectures", None) or []
        cls = _hf_class(transformers, archs[0], spec) if archs else None
        if cls is None:
            try:
                cls = transformers.AutoModel._model_mapping[type(default)]
            except Exception as exc:
                raise ModelLoadError(
                    f"{path / 'config.json'} names no architecture and model_type "
                    f"'{default.model_type}' has no AutoModel class"
                ) from exc
        _check_keys(type(default), default, cls, options, spec)
        _check_seq_len(cls, seq_len, spec)
        try:  # the saved values and the overrides together through the constructor
            config = type(default).from_dict({**saved, **_hf_defaults(default, options)})
        except Exception as exc:
            raise ModelLoadError(f"bad config for '{spec}': {_one_line(exc)}") from exc
        _check_held(config, default, options, name)
        weights = path if any((path / f).is_file() for f in _HF_WEIGHTS) else None
        model = _build_hf(cls, config, weights, options, spec)
    else:
        cls = _hf_class(transformers, target, spec)
        try:
            default = cls.config_class()
        except Exception as exc:
            raise ModelLoadError(f"{cls.config_class.__name__}() failed for '{spec}': {_one_line(exc)}") from exc
        _check_keys(cls.config_class, default, cls, options, spec)
        _check_seq_len(cls, seq_len, spec)
        config = _hf_config(cls.config_class, _hf_defaults(default, options), spec)
        _check_held(config, default, options, name)
        model = _build_hf(cls, config, None, options, spec)
    _check_read(model, options, name)
    module, inputs, seq = _hf_inputs(model, name, batch, seq_len, lengths, seed)
    return HubModel(module, inputs, batch, seq, "hf")


def _check_seq_len(cls, seq_len: int | None, spec: str) -> None:
    # Before building: a default-size vision model takes seconds to initialise.
    if seq_len is not None and getattr(cls, "main_input_name", "input_ids") == "pixel_values":
        raise ModelLoadError(
            f"--seq-len does not apply to the image model '{spec}'; set image_size=... in the spec instead"
        )


# ---------------------------------------------------------------- hf: example inputs


class KeywordCall(torch.nn.Module):
    """`module(*inputs)` for a model whose inputs are not its leading positional parameters
    (GPT-2's forward takes its cache before attention_mask): calls the model with them by
    name. The model stays a child module, `.model`, so whatever walks modules finds it all."""

    def __init__(self, model: torch.nn.Module, names: tuple[str, ...]):
        super().__init__()
        self.model = model
        self.names = tuple(names)

    @property
    def config(self):
        return self.model.config

    def forward(self, *inputs: torch.Tensor):
        return self.model(**dict(zip(self.names, inputs)))


# Config attributes that bound a token sequence, in the order configs use them.
_POSITION_LIMITS = ("max_position_embeddings", "n_positions", "max_source_positions")


def _position_limit(config, keys=_POSITION_LIMITS) -> tuple[int, str] | None:
    """(the most positions, the attribute that says so), or None where nothing bounds it."""
    if getattr(config, "position_biased_input", True) is False:
        return None  # DeBERTa with relative positions only: no absolute position table
    alias = dict(getattr(type(config), "attribute_map", {}) or {})
    for key in keys:
        value = getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, alias.get(key, key)
    return None


def _sequence(name: str, config, seq_len: int | None, keys=_POSITION_LIMITS) -> int:
    """--seq-len checked against the position limit, or the default capped by it."""
    limit = _position_limit(config, keys)
    if seq_len is None:
        return min(DEFAULT_SEQ, limit[0]) if limit else DEFAULT_SEQ
    if limit and seq_len > limit[0]:
        raise ModelLoadError(
            f"{name} takes at most {limit[0]} positions ({limit[1]}); --seq-len {seq_len} is "
            f"longer; lower --seq-len or give {limit[1]}={seq_len} in the spec"
        )
    return seq_len


def padding_mask(ids: torch.Tensor, lengths: tuple[int, int] | None, pad_id: int, g: torch.Generator) -> torch.Tensor:
    """The attention mask of a batch padded on the right: each row's length drawn uniformly
    in [lo, hi] (all ones without lengths); `ids` past each length become `pad_id`."""
    batch, seq = ids.shape
    if lengths is None:
        return torch.ones(batch, seq, dtype=torch.long)
    lo, hi = lengths
    n = torch.randint(lo, hi + 1, (batch,), generator=g)
    mask = (torch.arange(seq)[None, :] < n[:, None]).long()
    ids.masked_fill_(mask == 0, pad_id)
    return mask


def _hf_inputs(
    model, name: str, batch: int, seq_len: int | None, lengths: tuple[int, int] | None, seed: int
) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], int | None]:
    """(the module to call, its inputs for module(*inputs), the sequence length used), made
    from the model's forward signature and config: token ids, pixels, Whisper's log-mel
    features or raw audio; decoder ids for an encoder-decoder; under --lengths, an attention
    mask over each row's length (no mask otherwise: the model's own default, unpadded)."""
    config = model.config
    main = getattr(model, "main_input_name", "input_ids")
    params = inspect.signature(model.forward).parameters
    takes_mask = "attention_mask" in params
    decoder = bool(getattr(config, "is_encoder_decoder", False)) and "decoder_input_ids" in params
    if lengths is not None and (main != "input_ids" or not takes_mask):
        why = (
            f"its input is {main}" if main != "input_ids" else f"{type(model).__name__}.forward takes no attention_mask"
        )
        raise ModelLoadError(f"--lengths pads token sequences behind an attention_mask; {name} has none to pad ({why})")
    g = torch.Generator().manual_seed(seed)
    fill: dict[str, torch.Tensor] = {}
    seq = None
    if main == "input_ids":
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        vocab = getattr(text, "vocab_size", None)
        if not vocab:
            raise ModelLoadError(f"{type(config).__name__} has no vocab_size; write a factory for '{name}'")
        seq = _sequence(name, text, seq_len)
        if lengths is not None and lengths[1] > seq:
            raise ModelLoadError(
                f"--lengths {lengths[0]}-{lengths[1]} is longer than the sequence of {name} ({seq}); "
                f"give HI at most {seq}, or a longer --seq-len"
            )
        ids = torch.randint(0, int(vocab), (batch, seq), generator=g)
        if decoder:
            fill["decoder_input_ids"] = ids.clone()
        if lengths is not None:  # without --lengths no mask: a model runs unpadded as it does by default
            pad = getattr(text, "pad_token_id", None)
            fill["attention_mask"] = padding_mask(ids, lengths, pad if isinstance(pad, int) else 0, g)
        fill["input_ids"] = ids
    elif main == "pixel_values":
        vision = getattr(config, "vision_config", None) or config
        h, w = _side(getattr(vision, "image_size", DEFAULT_IMAGE) or DEFAULT_IMAGE)
        fill[main] = _nchw(batch, int(getattr(vision, "num_channels", 3) or 3), h, w, seed)[0]
    elif main == "input_features" and hasattr(config, "num_mel_bins") and hasattr(config, "max_source_positions"):
        # Whisper: log-mel frames, two per encoder position (its second conv has stride 2);
        # the encoder takes exactly that many.
        frames = 2 * int(config.max_source_positions)
        fill[main] = torch.randn(batch, int(config.num_mel_bins), frames, generator=g)
        if decoder:
            seq = _sequence(name, config, seq_len, ("max_target_positions",))
            fill["decoder_input_ids"] = torch.randint(0, int(config.vocab_size), (batch, seq), generator=g)
        elif seq_len is not None:
            raise ModelLoadError(
                f"--seq-len does not apply to '{name}': it takes {frames} mel frames "
                f"(2 x max_source_positions); set max_source_positions=... in the spec instead"
            )
    elif main == "input_values":
        seq = seq_len or DEFAULT_AUDIO
        frames = getattr(model, "_get_feat_extract_output_lengths", None)
        if frames is not None and int(frames(torch.tensor(seq))) < 1:
            raise ModelLoadError(
                f"--seq-len {seq} is too few audio samples for {name}'s feature encoder; "
                f"give more (16000 is one second at 16 kHz)"
            )
        fill[main] = torch.randn(batch, seq, generator=g)
    else:
        raise ModelLoadError(
            f"no example inputs for a model whose main input is '{main}' ({name}); "
            "write a factory that returns (model, inputs), see README"
        )
    return _call_order(model, name, params, fill) + (seq,)


def _call_order(model, name: str, params, fill: dict[str, torch.Tensor]):
    """(module, inputs): the model itself where the inputs are its leading positional
    parameters, else the model behind a KeywordCall."""
    positional = [n for n, p in params.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if set(positional[: len(fill)]) == set(fill):
        return model, tuple(fill[n] for n in positional[: len(fill)])
    by_name = any(p.kind is p.VAR_KEYWORD for p in params.values())
    missing = [n for n in fill if n not in params and not by_name]
    if missing:
        raise ModelLoadError(f"{type(model).__name__}.forward takes no '{missing[0]}'; write a factory for '{name}'")
    names = tuple(sorted(fill, key=lambda n: positional.index(n) if n in positional else len(positional)))
    return KeywordCall(model, names), tuple(fill[n] for n in names)


# ---------------------------------------------------------------- timm


def _load_timm(spec: str, target: str, options: dict[str, Any], batch: int, seed: int) -> HubModel:
    timm = _import("timm")
    if not timm.is_model(target):
        raise ModelLoadError(
            f"'{target}' is not a timm model{_close(target, timm.list_models())}; timm.list_models() lists them"
        )
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
        raise ModelLoadError(
            f"'{target}' is not a torchvision model{_close(target, names)}; torchvision.models.list_models() lists them"
        )
    try:
        model = torchvision.models.get_model(target, weights=None, **options)
    except Exception as exc:
        raise ModelLoadError(f"torchvision could not build '{spec}': {_one_line(exc)}") from exc
    h, w = _side(options.get("image_size") or DEFAULT_IMAGE)  # ViTs take image_size; CNNs any
    return HubModel(model, _nchw(batch, 3, h, w, seed), batch, None, "torchvision")
