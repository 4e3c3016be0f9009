"""The built-in model zoo: BERT, ResNet and Llama in plain PyTorch, random-initialised.

In: a zoo name ("bert-tiny", "bert-base", "resnet-tiny", "resnet50", "llama-tiny",
"llama"), batch size, sequence length, seed. Out: (model, example inputs), or a one-line
ModelLoadError for a sequence longer than the model's position table. No weights
are downloaded: timing and correctness do not depend on trained values, and the boxes
this runs on are often offline.

The models are written the way their users write them: the BERT and Llama blocks as
Hugging Face and nanoGPT write theirs (q/k/v/o projections, heads by reshape,
F.scaled_dot_product_attention inline, the residual added inside the norm call, the
MLP as activation(fc1(x))), the ResNets as torchvision's resnet.py writes Bottleneck,
run in NCHW. Nothing here exists for the evaluator's sake: it finds and replaces work
at the level of torch operators, so a zoo model profiles like a real one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from ..errors import ModelLoadError

# ---------------------------------------------------------------- BERT (encoder)


@dataclass(frozen=True)
class BertSize:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int = 30522
    max_positions: int = 512


class BertAttention(nn.Module):
    """Self-attention with its output projection and post-norm, as BertSelfAttention +
    BertSelfOutput. nn.LayerNorm keeps its default eps (1e-5, nanoGPT's) rather than
    BERT's 1e-12, which underflows to zero in fp16."""

    def __init__(self, s: BertSize):
        super().__init__()
        self.num_heads = s.heads
        self.query = nn.Linear(s.hidden, s.hidden)
        self.key = nn.Linear(s.hidden, s.hidden)
        self.value = nn.Linear(s.hidden, s.hidden)
        self.out = nn.Linear(s.hidden, s.hidden)
        self.norm = nn.LayerNorm(s.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        # (b, t, h) -> (b, heads, t, head_dim)
        q = self.query(x).view(b, t, self.num_heads, -1).transpose(1, 2)
        k = self.key(x).view(b, t, self.num_heads, -1).transpose(1, 2)
        v = self.value(x).view(b, t, self.num_heads, -1).transpose(1, 2)
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=False)
        ctx = ctx.transpose(1, 2).reshape(b, t, h)
        return self.norm(self.out(ctx) + x)


class BertMLP(nn.Module):
    """BertIntermediate + BertOutput: GELU(fc1(x)), fc2, post-norm with the residual."""

    def __init__(self, s: BertSize):
        super().__init__()
        self.fc1 = nn.Linear(s.hidden, s.intermediate)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(s.intermediate, s.hidden)
        self.norm = nn.LayerNorm(s.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.fc2(self.act(self.fc1(x))) + x)


class BertLayer(nn.Module):
    def __init__(self, s: BertSize):
        super().__init__()
        self.attention = BertAttention(s)
        self.mlp = BertMLP(s)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.attention(x))


class Bert(nn.Module):
    """Token + position embeddings, LayerNorm, the encoder layers; returns the last
    hidden state (batch, seq, hidden). Inference only, so no dropout modules."""

    def __init__(self, s: BertSize):
        super().__init__()
        self.word_embeddings = nn.Embedding(s.vocab, s.hidden)
        self.position_embeddings = nn.Embedding(s.max_positions, s.hidden)
        self.norm = nn.LayerNorm(s.hidden)
        self.layers = nn.ModuleList(BertLayer(s) for _ in range(s.layers))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.norm(self.word_embeddings(input_ids) + self.position_embeddings(pos))
        for layer in self.layers:
            x = layer(x)
        return x


# ---------------------------------------------------------------- ResNet (convolutional)


def conv3x3(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class Bottleneck(nn.Module):
    """torchvision's Bottleneck (ResNet v1.5: the stride sits on the 3x3 conv)."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    """torchvision's ResNet with Bottleneck blocks; `width` is the first stage's planes
    (64 in torchvision, smaller for resnet-tiny), doubling per stage. Initialised as
    torchvision initialises it (Kaiming-normal convs, BatchNorm 1/0)."""

    def __init__(self, layers: tuple[int, ...], width: int = 64, num_classes: int = 1000):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(width, layers[0])
        self.layer2 = self._make_layer(width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(width * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(width * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * Bottleneck.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * Bottleneck.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * Bottleneck.expansion, stride),
                nn.BatchNorm2d(planes * Bottleneck.expansion),
            )
        layers = [Bottleneck(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * Bottleneck.expansion
        layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


# ---------------------------------------------------------------- Llama (decoder)


@dataclass(frozen=True)
class LlamaSize:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int = 32000
    rope_theta: float = 10000.0


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class LlamaRotaryEmbedding(nn.Module):
    """cos and sin of the rotary angles for positions 0..t-1, as Hugging Face computes
    them: the frequencies in fp32 whatever the model's dtype, then cast."""

    def __init__(self, head_dim: int, theta: float):
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        pos = torch.arange(seq_len, device=x.device, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq.float())
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class LlamaAttention(nn.Module):
    def __init__(self, s: LlamaSize):
        super().__init__()
        self.num_heads = s.heads
        self.head_dim = s.hidden // s.heads
        self.q_proj = nn.Linear(s.hidden, s.hidden, bias=False)
        self.k_proj = nn.Linear(s.hidden, s.hidden, bias=False)
        self.v_proj = nn.Linear(s.hidden, s.hidden, bias=False)
        self.o_proj = nn.Linear(s.hidden, s.hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        q = self.q_proj(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, h))


class LlamaMLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, s: LlamaSize):
        super().__init__()
        self.gate_proj = nn.Linear(s.hidden, s.intermediate, bias=False)
        self.up_proj = nn.Linear(s.hidden, s.intermediate, bias=False)
        self.down_proj = nn.Linear(s.intermediate, s.hidden, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, s: LlamaSize):
        super().__init__()
        self.input_layernorm = nn.RMSNorm(s.hidden, eps=1e-6)
        self.self_attn = LlamaAttention(s)
        self.post_attention_layernorm = nn.RMSNorm(s.hidden, eps=1e-6)
        self.mlp = LlamaMLP(s)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    """Embeddings, pre-norm decoder layers, final RMSNorm; returns the last hidden state
    (no LM head: its one large gemm would dwarf the blocks on the small vocabularies)."""

    def __init__(self, s: LlamaSize):
        super().__init__()
        self.embed_tokens = nn.Embedding(s.vocab, s.hidden)
        self.rotary_emb = LlamaRotaryEmbedding(s.hidden // s.heads, s.rope_theta)
        self.layers = nn.ModuleList(LlamaDecoderLayer(s) for _ in range(s.layers))
        self.norm = nn.RMSNorm(s.hidden, eps=1e-6)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(input_ids)
        cos, sin = self.rotary_emb(x, input_ids.shape[1])
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


# ---------------------------------------------------------------- the zoo


@dataclass(frozen=True)
class ZooEntry:
    build: Callable[[], nn.Module]
    kind: str  # "tokens" (ids of shape batch x seq) or "image" (batch x 3 x H x W, NCHW)
    batch_size: int  # defaults, overridable on the command line
    seq_len: int | None  # tokens: sequence length; image: side in pixels
    vocab: int = 0
    description: str = ""
    max_positions: int = 0  # tokens: the length of the position table; 0: nothing bounds it (rotary)


ZOO: dict[str, ZooEntry] = {
    "bert-tiny": ZooEntry(
        lambda: Bert(BertSize(128, 2, 2, 512)),
        "tokens",
        2,
        128,
        30522,
        "BERT encoder, 2 layers, hidden 128 (runs the whole pipeline on 2 CPU cores)",
        BertSize.max_positions,
    ),
    "bert-base": ZooEntry(
        lambda: Bert(BertSize(768, 12, 12, 3072)),
        "tokens",
        8,
        128,
        30522,
        "BERT-base encoder, 12 layers, hidden 768, 110M parameters",
        BertSize.max_positions,
    ),
    "resnet-tiny": ZooEntry(
        lambda: ResNet((1, 1, 1, 1), 8, 10),
        "image",
        2,
        64,
        0,
        "ResNet with one bottleneck per stage, width 8, 64x64 images",
    ),
    "resnet50": ZooEntry(
        lambda: ResNet((3, 4, 6, 3), 64), "image", 8, 224, 0, "ResNet-50, 224x224 images, 25.6M parameters"
    ),
    "llama-tiny": ZooEntry(
        lambda: Llama(LlamaSize(128, 2, 4, 352, 1000)),
        "tokens",
        1,
        128,
        1000,
        "Llama decoder, 2 layers, hidden 128, RMSNorm + SwiGLU + causal attention",
    ),
    "llama": ZooEntry(
        lambda: Llama(LlamaSize(2048, 22, 32, 5632)),
        "tokens",
        1,
        512,
        32000,
        "Llama decoder at TinyLlama-1.1B size: 22 layers, hidden 2048, 1.1B parameters",
    ),
}


def check_zoo_inputs(name: str, entry: ZooEntry, seq_len: int, lengths: tuple[int, int] | None) -> None:
    """A sequence longer than the position table is one line here, not an IndexError in
    the embedding; the zoo's forwards take token ids or images alone, so nothing pads."""
    if entry.max_positions and seq_len > entry.max_positions:
        raise ModelLoadError(
            f"{name} takes at most {entry.max_positions} positions (its position table); --seq-len {seq_len} is longer"
        )
    if lengths is not None:
        what = "token ids" if entry.kind == "tokens" else "images"
        raise ModelLoadError(
            f"--lengths pads token sequences behind an attention_mask; {name}'s forward takes "
            f"{what} alone (use an hf: model, e.g. hf:BertModel, for padded batches)"
        )


def example_inputs(entry: ZooEntry, batch_size: int, seq_len: int, seed: int) -> tuple[torch.Tensor, ...]:
    """Token ids below the vocabulary, or an NCHW image batch; from `seed` alone."""
    g = torch.Generator().manual_seed(seed)
    if entry.kind == "tokens":
        return (torch.randint(0, entry.vocab, (batch_size, seq_len), generator=g),)
    return (torch.randn(batch_size, 3, seq_len, seq_len, generator=g),)
