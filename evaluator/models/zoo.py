"""The built-in model zoo: BERT, ResNet and Llama in plain PyTorch, random-initialised.

In: a zoo name ("bert-tiny", "bert-base", "resnet-tiny", "resnet50", "llama-tiny",
"llama"), batch size, sequence length, seed. Out: (model, example inputs). No weights
are downloaded: timing and correctness do not depend on trained values, and the boxes
this runs on are often offline.

Attention, LayerNorm, RMSNorm, Linear and Conv2d are modules (not functional calls) so the
end-to-end stage can swap them for TileLang-backed ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F


# ---------------------------------------------------------------- attention


class Attention(nn.Module):
    """softmax(q k^T / sqrt(d)) v over (batch, heads, seq, head_dim), through PyTorch's
    fused scaled_dot_product_attention as Hugging Face models call it. A module of its
    own (no parameters) so the attention family can swap it for a TileLang kernel."""

    def __init__(self, causal: bool = False):
        super().__init__()
        self.causal = bool(causal)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)

    def extra_repr(self) -> str:
        return f"causal={self.causal}"


class AddNorm(nn.Module):
    """LayerNorm(x + r): a post-norm transformer's residual join. Its own module, and
    marked, so the fused layernorm_residual family can replace the pair with one pass."""

    adds_residual_before_norm = True

    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return self.norm(x + r)


# ---------------------------------------------------------------- BERT (encoder)


@dataclass(frozen=True)
class BertSize:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int = 30522
    max_positions: int = 512


class BertLayer(nn.Module):
    def __init__(self, s: BertSize):
        super().__init__()
        self.heads = s.heads
        self.q = nn.Linear(s.hidden, s.hidden)
        self.k = nn.Linear(s.hidden, s.hidden)
        self.v = nn.Linear(s.hidden, s.hidden)
        self.o = nn.Linear(s.hidden, s.hidden)
        self.attn = Attention(causal=False)
        self.ln1 = AddNorm(s.hidden)
        # Linear then GELU as one Sequential: the fused gemm_gelu family can take both.
        self.up = nn.Sequential(nn.Linear(s.hidden, s.intermediate), nn.GELU())
        self.down = nn.Linear(s.intermediate, s.hidden)
        self.ln2 = AddNorm(s.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        d = h // self.heads

        def split(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, self.heads, d).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        ctx = self.attn(q, k, v).transpose(1, 2).reshape(b, t, h)
        x = self.ln1(x, self.o(ctx))
        return self.ln2(x, self.down(self.up(x)))


class Bert(nn.Module):
    def __init__(self, s: BertSize):
        super().__init__()
        self.tok = nn.Embedding(s.vocab, s.hidden)
        self.pos = nn.Embedding(s.max_positions, s.hidden)
        self.ln = nn.LayerNorm(s.hidden)
        self.layers = nn.ModuleList(BertLayer(s) for _ in range(s.layers))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.ln(self.tok(ids) + self.pos(pos))
        for layer in self.layers:
            x = layer(x)
        return x


# ---------------------------------------------------------------- ResNet (convolutional)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.down is None else self.down(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + idt)


class ResNet(nn.Module):
    def __init__(self, blocks: tuple[int, ...], base: int, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, base, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(base), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages, cin = [], base
        for i, n in enumerate(blocks):
            width = base * 2**i
            for j in range(n):
                stages.append(Bottleneck(cin, width, 2 if (j == 0 and i > 0) else 1))
                cin = width * Bottleneck.expansion
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


# ---------------------------------------------------------------- Llama (decoder)


@dataclass(frozen=True)
class LlamaSize:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int = 32000


def _rope(x: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding over the last dim of (b, heads, t, d)."""
    t, d = x.shape[-2], x.shape[-1]
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
    ang = torch.outer(torch.arange(t, device=x.device, dtype=torch.float32), inv)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class LlamaLayer(nn.Module):
    def __init__(self, s: LlamaSize):
        super().__init__()
        self.heads = s.heads
        self.norm1 = nn.RMSNorm(s.hidden, eps=1e-6)
        self.q = nn.Linear(s.hidden, s.hidden, bias=False)
        self.k = nn.Linear(s.hidden, s.hidden, bias=False)
        self.v = nn.Linear(s.hidden, s.hidden, bias=False)
        self.o = nn.Linear(s.hidden, s.hidden, bias=False)
        self.attn = Attention(causal=True)
        self.norm2 = nn.RMSNorm(s.hidden, eps=1e-6)
        self.gate = nn.Sequential(nn.Linear(s.hidden, s.intermediate, bias=False), nn.SiLU())
        self.up = nn.Linear(s.hidden, s.intermediate, bias=False)
        self.down = nn.Linear(s.intermediate, s.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        d = h // self.heads
        y = self.norm1(x)

        def split(z: torch.Tensor) -> torch.Tensor:
            return z.view(b, t, self.heads, d).transpose(1, 2)

        q, k, v = _rope(split(self.q(y))), _rope(split(self.k(y))), split(self.v(y))
        x = x + self.o(self.attn(q, k, v).transpose(1, 2).reshape(b, t, h))
        y = self.norm2(x)
        return x + self.down(self.gate(y) * self.up(y))


class Llama(nn.Module):
    def __init__(self, s: LlamaSize):
        super().__init__()
        self.tok = nn.Embedding(s.vocab, s.hidden)
        self.layers = nn.ModuleList(LlamaLayer(s) for _ in range(s.layers))
        self.norm = nn.RMSNorm(s.hidden, eps=1e-6)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


# ---------------------------------------------------------------- the zoo


@dataclass(frozen=True)
class ZooEntry:
    build: Callable[[], nn.Module]
    kind: str  # "tokens" (ids of shape batch x seq) or "image" (batch x 3 x H x W)
    batch_size: int  # defaults, overridable on the command line
    seq_len: int | None  # tokens: sequence length; image: side in pixels
    vocab: int = 0
    description: str = ""


ZOO: dict[str, ZooEntry] = {
    "bert-tiny": ZooEntry(lambda: Bert(BertSize(128, 2, 2, 512)), "tokens", 2, 128, 30522,
                          "BERT encoder, 2 layers, hidden 128 (runs the whole pipeline on 2 CPU cores)"),
    "bert-base": ZooEntry(lambda: Bert(BertSize(768, 12, 12, 3072)), "tokens", 8, 128, 30522,
                          "BERT-base encoder, 12 layers, hidden 768, 110M parameters"),
    "resnet-tiny": ZooEntry(lambda: ResNet((1, 1, 1, 1), 8, 10), "image", 2, 64, 0,
                            "ResNet with one bottleneck per stage, width 8, 64x64 images"),
    "resnet50": ZooEntry(lambda: ResNet((3, 4, 6, 3), 64), "image", 8, 224, 0,
                         "ResNet-50, 224x224 images, 25.6M parameters"),
    "llama-tiny": ZooEntry(lambda: Llama(LlamaSize(128, 2, 4, 352, 1000)), "tokens", 1, 128, 1000,
                           "Llama decoder, 2 layers, hidden 128, RMSNorm + SwiGLU + causal attention"),
    "llama": ZooEntry(lambda: Llama(LlamaSize(2048, 22, 32, 5632)), "tokens", 1, 512, 32000,
                      "Llama decoder at TinyLlama-1.1B size: 22 layers, hidden 2048, 1.1B parameters"),
}


def example_inputs(entry: ZooEntry, batch_size: int, seq_len: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    if entry.kind == "tokens":
        return (torch.randint(0, entry.vocab, (batch_size, seq_len), generator=g),)
    return (torch.randn(batch_size, 3, seq_len, seq_len, generator=g),)
