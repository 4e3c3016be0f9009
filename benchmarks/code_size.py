"""How much machine code a kernel config compiles to, without a GPU: the family's program
lowered to CUDA source by TileLang, compiled for sm_90a, and the size of each kernel's
SASS (its ELF `.text.` section) read from the cubin, with ptxas's registers and spills.

In: a family, a shape written with x, and configs (JSON objects). Out: a line per config.
Why: at ViT-B's 3152x3072x768 on the H200 (2026-12-02,
reports/examples/benchmarks/h200-2026-12-02/) the ping-pong gemm_gelu ran 48.7 µs inside
the model against 36.1 µs in the op sweep, and the cause is its code size: each of its two
consumers carries its own fully unrolled epilogue.

Needs nvcc on PATH (the GPU image has it), or else the PyPI wheels nvidia-cuda-nvrtc-cu12
(CUDA C++ to PTX) and nvidia-cuda-nvcc-cu12 (ptxas), which install on a machine with no GPU:

    pip install nvidia-cuda-nvrtc-cu12==12.9.* nvidia-cuda-nvcc-cu12==12.9.* nvidia-cuda-runtime-cu12==12.9.* \\
        nvidia-cuda-cccl-cu12==12.9.*
    python3 benchmarks/code_size.py gemm_gelu 3152x3072x768 '{"block_M": 128, ...}' '{...}'
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from evaluator import kernels  # noqa: E402
from evaluator.kernels import common as C  # noqa: E402

TARGET = "cuda -arch=sm_90a"


def _wheel_dir(package: str) -> Path | None:
    """Where a pip-installed nvidia-* wheel put its files (nvidia/<package>)."""
    try:
        import nvidia  # the namespace package the wheels share
    except ImportError:
        return None
    for root in nvidia.__path__:
        if (Path(root) / package).is_dir():
            return Path(root) / package
    return None


def _includes(wheels: bool) -> list[str]:
    """TileLang's headers, and with `wheels` (NVRTC) the CUDA headers the wheels ship; nvcc
    brings its own, and mixing the two versions breaks cccl."""
    import tilelang

    root = Path(tilelang.__file__).parent
    out = [root / "src", root / "3rdparty" / "cutlass" / "include"]
    if wheels:
        out += [d / "include" for p in ("cuda_runtime", "cuda_cccl", "cuda_nvrtc") if (d := _wheel_dir(p))]
    return [str(p) for p in out]


def _ptx_by_nvrtc(source: str) -> bytes:
    lib = _wheel_dir("cuda_nvrtc")
    if lib is None:
        raise SystemExit("no nvcc on PATH and no nvidia-cuda-nvrtc-cu12 wheel: see this script's docstring")
    nvrtc = ctypes.CDLL(str(next((lib / "lib").glob("libnvrtc.so.*"))))
    # TileLang's own NVRTC path prepends this header (tilelang/contrib/nvrtc.py).
    code = ("#include <tl_templates/cuda/nvrtc_std.h>\n" + source).encode()
    prog = ctypes.c_void_p()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(prog), code, b"kernel.cu", 0, None, None):
        raise SystemExit("nvrtcCreateProgram failed")
    opts = [b"-std=c++17", b"-arch=compute_90a", b"-default-device", b"-w"] + [
        f"-I{i}".encode() for i in _includes(True)
    ]
    status = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    if status:
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise SystemExit(f"NVRTC failed: {log.value.decode()[-800:]}")
    nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetPTX(prog, ptx)
    return ptx.value


def compile_cubin(source: str, work: Path) -> tuple[bytes, str]:
    """(cubin, ptxas's -v report) of one lowered CUDA source for sm_90a."""
    cu, ptx, cubin = work / "kernel.cu", work / "kernel.ptx", work / "kernel.cubin"
    cu.write_text(source)
    if shutil.which("nvcc"):
        p = subprocess.run(
            [
                "nvcc",
                "-std=c++17",
                "-gencode=arch=compute_90a,code=sm_90a",
                "-cubin",
                "-O3",
                "-w",
                "-Xptxas",
                "-v",
                *[f"-I{i}" for i in _includes(False)],
                str(cu),
                "-o",
                str(cubin),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
    else:
        ptx.write_bytes(_ptx_by_nvrtc(source))
        d = _wheel_dir("cuda_nvcc")
        ptxas = shutil.which("ptxas") or (str(d / "bin" / "ptxas") if d else None)
        if not ptxas:
            raise SystemExit("no ptxas: install nvidia-cuda-nvcc-cu12 (see this script's docstring)")
        p = subprocess.run(
            [ptxas, "-arch=sm_90a", "-O3", "-v", str(ptx), "-o", str(cubin)],
            capture_output=True,
            text=True,
            timeout=600,
        )
    if p.returncode:
        raise SystemExit(f"compile failed: {p.stderr[-800:]}")
    return cubin.read_bytes(), p.stderr


def text_sections(elf: bytes) -> dict[str, int]:
    """Section name -> size of the `.text.*` sections (one per kernel) of an ELF64 cubin."""
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names_off = headers[shstrndx][4]
    out = {}
    for name_off, _type, _flags, _addr, _off, size, *_ in headers:
        end = elf.index(b"\0", names_off + name_off)
        name = elf[names_off + name_off : end].decode()
        if name.startswith(".text."):
            out[name[len(".text.") :]] = size
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("family")
    ap.add_argument("shape")
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--dtype", default="float16")
    args = ap.parse_args()
    fam = kernels.get(args.family)
    shape = tuple(int(x) for x in args.shape.split("x"))
    for text in args.configs:
        cfg = json.loads(text)
        source = C.lower_source(fam.program(shape, args.dtype, cfg, TARGET), TARGET)
        with tempfile.TemporaryDirectory() as work:
            cubin, report = compile_cubin(source, Path(work))
        regs = re.findall(r"Used (\d+) registers", report)
        spills = re.findall(r"(\d+) bytes spill stores", report)
        for kernel, size in text_sections(cubin).items():
            print(
                f"{args.family} {args.shape} {kernel}: {size / 1024:.1f} KiB of SASS "
                f"({size // 16} instructions), {regs[0] if regs else '?'} registers, "
                f"{spills[0] if spills else '?'} bytes spilled | {cfg}",
                flush=True,
            )


if __name__ == "__main__":
    main()
