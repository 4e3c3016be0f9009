"""The target a run builds for: from the device torch reports, or --target; and the search
spaces each family offers for it.

In: a fake GPU behind torch's own calls (`torch.version.hip`, `torch.cuda.is_available`,
`get_device_properties`), as a ROCm build on an MI300X or a CUDA build on an H100 reports
them, and --target spellings. Out: the Hardware record (target string, arch, platform,
published peaks and their source), the one-line errors for a target that is not one or
cannot run here, and every registered family's search space on sm_80 holding no config
that uses wgmma, TMA, setmaxnreg or clusters. CPU only: nothing is compiled.
"""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest
import torch

from evaluator import config, kernels
from evaluator.device import arch as A
from evaluator.device import hardware
from evaluator.errors import ConfigError
from evaluator.kernels.common import normalize_target

GiB = 1024**3

MI300X = SimpleNamespace(
    name="AMD Instinct MI300X",
    gcnArchName="gfx942:sramecc+:xnack-",
    # ROCm reports the gfx9.4 ISA as 9.4: read as CUDA it would be Hopper.
    major=9,
    minor=4,
    multi_processor_count=304,
    total_memory=192 * GiB,
    shared_memory_per_block=65536,
    shared_memory_per_block_optin=65536,
    shared_memory_per_multiprocessor=65536,
    regs_per_multiprocessor=131072,
)
H100 = SimpleNamespace(
    name="NVIDIA H100 80GB HBM3",
    major=9,
    minor=0,
    multi_processor_count=132,
    total_memory=80 * GiB,
    shared_memory_per_block=49152,
    shared_memory_per_block_optin=232448,
    shared_memory_per_multiprocessor=233472,
    regs_per_multiprocessor=65536,
)
RTX4090 = SimpleNamespace(**{**H100.__dict__, "name": "NVIDIA GeForce RTX 4090", "major": 8, "minor": 9})

# Config keys whose programs use Hopper's wgmma, TMA, setmaxnreg or thread-block clusters.
HOPPER_ONLY = ("pingpong", "overlap", "cluster")


def fake_gpu(monkeypatch, props, hip: str | None = None):
    """torch as a build with one GPU that reports `props` (a ROCm build when `hip`)."""
    monkeypatch.setattr(torch.version, "hip", hip)
    monkeypatch.setattr(torch.version, "cuda", None if hip else "12.8")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda _idx=0: props)
    # No nvidia-smi or amdgpu module to ask here.
    monkeypatch.setattr(hardware, "_nvidia_driver", lambda: "")
    monkeypatch.setattr(hardware, "_amd_driver", lambda: "")


# ---------------------------------------------------------------- the device's own target


def test_a_rocm_build_on_an_mi300x_builds_hip_for_gfx942(monkeypatch):
    fake_gpu(monkeypatch, MI300X, hip="6.2.41133")
    cfg = config.build(model="bert-tiny")  # --device auto
    assert cfg.device == "cuda" and cfg.target is None
    hw = hardware.detect(cfg.device, cfg.target)
    assert hw.target == "hip -mcpu=gfx942" and hw.arch == "gfx942"
    assert hardware.tilelang_target(cfg.device) == "hip -mcpu=gfx942"
    # Not "9.4": a family reading it would take the MI300X for a Hopper part.
    assert hw.compute_capability == "gfx942" and hw.cuda == "HIP 6.2.41133"
    assert (hw.peak_tflops, hw.peak_source) == (1307.0, "AMD Instinct MI300X datasheet")
    assert hw.platform == "mi300x"
    # Its own target spelled out is the same run; a CUDA one cannot run there.
    assert config.build(model="bert-tiny", target="hip:gfx942").target == "hip:gfx942"
    with pytest.raises(ConfigError, match=r"--target cuda:sm_80 cannot run here: this device builds for hip:gfx942"):
        config.build(model="bert-tiny", target="cuda:sm_80")
    with pytest.raises(ConfigError, match="use --target hip:gfx942 or leave it out"):
        config.build(model="bert-tiny", target="hip:gfx90a")


def test_the_mi300x_spaces_offer_no_hopper_program_and_fit_its_lds(monkeypatch):
    fake_gpu(monkeypatch, MI300X, hip="6.2.41133")
    hw = hardware.detect("cuda")
    for name in ("gemm", "attention", "conv2d", "bmm"):
        fam = kernels.get(name)
        for shape in fam.standard_shapes("cuda"):
            space = fam.search_space(shape, "float16", hw)
            assert space, (name, shape)
            for cfg in space:
                assert not any(cfg.get(k) for k in HOPPER_ONLY), (name, shape, cfg)
                assert fam.reject_reason(shape, "float16", cfg, hw) is None


def test_a_cuda_device_builds_for_its_compute_capability(monkeypatch):
    fake_gpu(monkeypatch, H100)
    hw = hardware.detect("cuda")
    assert (hw.target, hw.arch, hw.compute_capability) == ("cuda -arch=sm_90a", "sm_90a", "9.0")
    assert hw.platform == "h100" and hw.peak_source == "NVIDIA H100 datasheet (SXM)"
    fake_gpu(monkeypatch, RTX4090)
    hw = hardware.detect("cuda")
    assert (hw.target, hw.arch) == ("cuda -arch=sm_89", "sm_89")
    # The table has no RTX 4090 under sm_89: no published roof, the measured one only.
    assert (hw.peak_tflops, hw.peak_gbps, hw.peak_source) == (None, None, "")


def test_a_metax_device_builds_maca_where_the_installed_tilelang_has_the_kind(monkeypatch):
    from evaluator.device import targets as T
    from evaluator.errors import DeviceError

    c500 = SimpleNamespace(**{**H100.__dict__, "name": "MetaX C500", "major": 8, "minor": 0})
    fake_gpu(monkeypatch, c500)
    monkeypatch.setattr(T, "available_kinds", lambda: ("cuda", "hip", "c", "llvm"))
    with pytest.raises(DeviceError, match="MetaX C500: no TileLang backend installed for MACA.*MetaX's TileLang fork"):
        hardware.detect("cuda")
    monkeypatch.setattr(T, "available_kinds", lambda: ("cuda", "hip", "maca", "c", "llvm"))
    hw = hardware.detect("cuda")
    assert (hw.target, hw.arch, hw.platform) == ("maca", "", "c500")
    assert hw.peak_source == "MetaX C500 product brief"


def test_the_cpu_builds_for_c(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert config.build(model="bert-tiny").device == "cpu"
    hw = hardware.detect("cpu")
    assert (hw.target, hw.arch) == ("c", "")
    assert config.build(model="bert-tiny", target="c").target == "c"


# ---------------------------------------------------------------- --target


@pytest.mark.parametrize("text", ["sm_80", "cuda:80", "hip:942", "rocm", "cuda:sm_80:x", ""])
def test_a_target_that_is_not_one_names_the_forms(text):
    with pytest.raises(ConfigError) as err:
        A.parse_flag(text)
    msg = str(err.value)
    assert "\n" not in msg and f"--target '{text}' is not a target" in msg
    assert "cuda:sm_XY" in msg and "hip:gfxNNN" in msg and "maca or c" in msg


@pytest.mark.parametrize(
    "text, target",
    [
        ("cuda:sm_80", A.Target("cuda", "sm_80")),
        ("CUDA:SM_90A", A.Target("cuda", "sm_90a")),
        ("hip:gfx942", A.Target("hip", "gfx942")),
        ("hip:gfx90a", A.Target("hip", "gfx90a")),
        ("maca", A.Target("maca")),
        ("c", A.Target("c")),
    ],
)
def test_target_spellings_and_their_build_strings(text, target):
    got = A.parse_flag(text)
    assert got == target
    assert A.parse(got.build) == got  # the families' string reads back as the same target


def test_target_sm_80_on_an_h100_builds_for_ampere_on_its_own_platform(monkeypatch):
    fake_gpu(monkeypatch, H100)
    cfg = config.build(model="bert-tiny", target="cuda:sm_80")
    assert cfg.target == "cuda:sm_80" and cfg.settings_dict()["target"] == "cuda:sm_80"
    hw = hardware.detect(cfg.device, cfg.target)
    # sm_80's program, with Hopper machine code built from its PTX beside the sm_80 cubin:
    # an sm_80 cubin alone does not load on sm_90 (CUDA_ERROR_NO_BINARY_FOR_GPU).
    assert (hw.target, hw.arch) == ("cuda -arch=sm_80 -code=sm_80,sm_90", "sm_80")
    assert A.parse(hw.target) == A.Target("cuda", "sm_80", ("sm_80", "sm_90"))
    assert A.parse(hw.target).flag == "cuda:sm_80" and not A.parse(hw.target).features() & {"wgmma", "tma"}
    assert normalize_target(hw.target) == {"kind": "cuda", "arch": "sm_80", "code": ["sm_80", "sm_90"]}
    # Its baselines never share a history with the H100's own kernels; its roof is still the H100's.
    assert hw.platform == "h100-sm_80" and hw.peak_tflops == 989.0
    # Code for a newer or another arch-specific target does not run on sm_90a.
    for other in ("cuda:sm_100a", "cuda:sm_120"):
        with pytest.raises(ConfigError, match=f"--target {other} cannot run here: this device builds for cuda:sm_90a"):
            config.build(model="bert-tiny", target=other)
    with pytest.raises(ConfigError, match="cannot run here"):
        config.build(model="bert-tiny", target="hip:gfx942")


@pytest.mark.parametrize("family", sorted(kernels.REGISTRY))
def test_target_sm_80_takes_the_hopper_programs_out_of_every_family(family, monkeypatch):
    """Through the registry, each family's space on an H100 run with --target cuda:sm_80:
    no config whose program uses wgmma, TMA, setmaxnreg or clusters, and every config
    resolves for sm_80. The families that have Hopper programs offer them on the H100's
    own target, so the sm_80 space is a choice, not an accident of the shapes."""
    fake_gpu(monkeypatch, H100)
    fam = kernels.get(family)
    ampere = hardware.detect("cuda", "cuda:sm_80")
    hopper = hardware.detect("cuda")
    hopper_configs = 0
    for shape in fam.standard_shapes("cuda"):
        for cfg in fam.search_space(shape, "float16", ampere):
            assert not any(cfg.get(k) for k in HOPPER_ONLY), (shape, cfg)
            fam.resolve(shape, "float16", cfg, ampere.target)  # raises on a program sm_80 cannot run
        hopper_configs += sum(any(c.get(k) for k in HOPPER_ONLY) for c in fam.search_space(shape, "float16", hopper))
    if family in ("gemm", "gemm_relu", "gemm_mul", "attention"):
        assert hopper_configs > 0


def test_a_hopper_program_is_refused_for_sm_80_by_every_check():
    gemm = kernels.get("gemm")
    shape, cfg = (4096, 4096, 4096), {"pingpong": 1, "persistent": 132, "block_M": 128, "block_N": 128}
    ampere = hardware.detect("cpu")
    import dataclasses

    ampere = dataclasses.replace(ampere, target="cuda -arch=sm_80", device="cuda", arch="sm_80", smem_per_block=166912)
    why = gemm.reject_reason(shape, "float16", cfg, ampere)
    assert why and "needs CUDA sm_90a; the target is cuda:sm_80" in why
    # A record written with the kind only is judged by its compute capability.
    old = dataclasses.replace(ampere, target="cuda", arch="", compute_capability="8.0")
    assert "needs CUDA sm_90a" in gemm.reject_reason(shape, "float16", cfg, old)


# ---------------------------------------------------------------- gfx9: MFMA tiles in 64 KiB of LDS


def test_gfx9_gemm_tiles_are_sized_for_mfma_and_the_lds(monkeypatch):
    """On the MI300X the wave tiles step by MFMA's 32-wide blocks (not wgmma's 16), four
    64-thread wavefronts take 128-row tiles at the one or two stages 64 KiB of LDS holds,
    and the run's own device and the portability matrix's MI300X record give one space."""
    from evaluator.device import targets as T
    from evaluator.kernels import common as C
    from evaluator.kernels.gemm import _tc_smem

    fake_gpu(monkeypatch, MI300X, hip="6.2.41133")
    own = hardware.detect("cuda")
    table = T.TARGETS["mi300x"].hardware()
    gemm = kernels.get("gemm")
    wide = 0
    for shape in gemm.standard_shapes("cuda"):
        space = gemm.search_space(shape, "float16", own)
        assert space == gemm.search_space(shape, "float16", table), shape
        for cfg in space:
            assert cfg["block_N"] % 32 == 0 and cfg["block_M"] % 32 == 0, (shape, cfg)
            assert cfg["threads"] % A.WAVEFRONT == 0 and cfg["num_stages"] <= 2, (shape, cfg)
            assert C.smem_fits(_tc_smem(cfg, "float16"), own) and _tc_smem(cfg, "float16") <= 64 * 1024
            wide += cfg["block_M"] == 128 and cfg["threads"] == 256
    assert wide >= 5  # the 128-row tiles a 64 KiB ring can hold are offered


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_an_sm_80_kernel_built_for_a_hopper_card_carries_both_machine_codes():
    """nvcc, no GPU, through TileLang's own build callback: layernorm's program built for
    cuda:sm_80 on an H100 is a fatbin with an sm_80 and an sm_90 ELF (the same PTX
    compiled twice), so the card loads it; built for sm_80 alone it is one cubin."""
    import tilelang  # noqa: F401  (puts its bundled tvm on the path)
    from tilelang.cuda.backend import tilelang_callback_cuda_compile
    from tvm.target import Target

    from evaluator.kernels import common as C

    fam = kernels.get("layernorm")
    sched = fam.schedule((256, 768), "float16", "cuda")
    params = {k: float(v) for k, v in fam.params.items()}
    prim = sched.program((256, 768), "float16", {**sched.defaults, **params})
    elves = {}
    for built in ("cuda -arch=sm_80 -code=sm_80,sm_90", "cuda -arch=sm_80"):
        source = C.lower_source(prim, built)
        binary = bytes(tilelang_callback_cuda_compile(source, Target(C.normalize_target(built))))
        elves[built] = binary.count(b"\x7fELF")
    assert elves == {"cuda -arch=sm_80 -code=sm_80,sm_90": 2, "cuda -arch=sm_80": 1}
