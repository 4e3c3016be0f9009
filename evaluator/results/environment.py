"""What was evaluated, and on what: the model, the device and the software versions.

In: the model spec as loaded (models/), the device as probed (hardware.py) and the
installed versions (pipeline.py). Out: `ModelSpec`, `Hardware` and `Environment`, the
records a run starts from and a baseline is filed under (model, platform). A run's
settings are not a record: `RunResult.settings` is the plain dict `Config.settings_dict`
makes (every option that changes a measurement or the verdict), so a new option needs
no change here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The memory layouts a model can be run in (--layout; models.choose_layout resolves "auto").
LAYOUTS = ("auto", "as-given", "channels-last")


@dataclass(frozen=True)
class ModelSpec:
    """What was evaluated: enough to load the same model again."""

    name: str  # "bert-tiny", "pkg.mod:factory", "path/file.py:factory"
    source: str  # "zoo" | "module" | "file"
    batch_size: int
    seq_len: int | None
    dtype: str  # "float32" | "float16" | "bfloat16"
    parameters: int = 0
    spec_hash: str = ""  # hash of the name, sizes and parameter shapes
    origin: str = ""  # the --model spec as given, when `name` is a stable --name for it
    # The memory layout every path ran the model in: "as-given" (the inputs as the model
    # makes them, NCHW for images) or "channels-last" (model and 4-D inputs converted).
    layout: str = "as-given"


@dataclass(frozen=True)
class Hardware:
    """The device the kernels were compiled for and timed on."""

    # The TileLang target its kernels are built for, as the families take it: "c" on a
    # CPU, "cuda -arch=sm_90a", "hip -mcpu=gfx942", "maca" (kernels.common.normalize_target
    # makes it the dict tvm.target.Target takes); records written without an arch say "cuda".
    target: str
    device: str  # "cpu" | "cuda"
    name: str  # "NVIDIA H200", or the CPU model
    platform: str  # short slug used in baseline paths: "h200", "cpu-x86_64"
    cores: int = 0  # CPU cores, or streaming multiprocessors on a GPU
    memory_gb: float = 0.0
    smem_per_block: int = 0  # bytes; 0 on CPU
    smem_per_sm: int = 0
    regs_per_block: int = 0
    regs_per_sm: int = 0
    compute_capability: str = ""
    driver: str = ""
    cuda: str = ""
    peak_tflops: float | None = None  # published dense fp16/bf16 peak
    peak_gbps: float | None = None  # published memory bandwidth
    peak_source: str = ""  # the document the published peaks come from ("": none published)
    measured_tflops: float | None = None  # a large matmul through PyTorch, this dtype
    measured_gbps: float | None = None  # a large device-to-device copy (read + write)
    ceilings_note: str = ""  # how the measured ceilings were obtained
    arch: str = ""  # the target's architecture: "sm_90a", "gfx942"; "" on a CPU or a kind without one


@dataclass(frozen=True)
class Environment:
    """Versions of everything a measurement depends on (the baseline manifest)."""

    evaluator: str
    python: str
    os: str
    cpu: str
    torch: str
    tilelang: str
    hardware: Hardware
    # The model libraries' versions (transformers, timm, torchvision, triton; those
    # installed): their code decides which kernels a model runs. transformers' BertModel
    # ran 1773 µs of kernels in one captured replay against 810 µs eagerly on the H200.
    libraries: dict[str, str] = field(default_factory=dict)
