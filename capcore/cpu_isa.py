"""What this CPU's instruction set can do, as torch will actually use it.

Why it matters: bfloat16 autocast on a CPU is fast only where the arithmetic is native (AVX-512 BF16
or AMX). Elsewhere (AVX2: most laptops and desktops, AMD before Zen 4) torch emulates it, and a
ResNet training step takes about 12x its float32 time (``benchmarks/bench_stage1_precision.py``).
``precision: auto`` therefore asks this module, and every timing capaware prints names the result.

The hardware flags alone are not enough: ``ATEN_CPU_CAPABILITY`` and ``ONEDNN_MAX_CPU_ISA`` can hold
torch's kernels below what the CPU has (the way to try the AVX2 case on a newer CPU), and torch still
reports the hardware flag then. Both caps are read here, so a held run is treated as the smaller CPU.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch

# oneDNN ISA names (ONEDNN_MAX_CPU_ISA) at or above which bfloat16 dot products are native
_ONEDNN_BF16_ISAS = {"AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16",
                     "AVX10_1_512", "AVX10_1_512_AMX", "AVX10_1_512_AMX_FP16", "AVX10_2_512",
                     "AVX10_2_512_AMX_2", "ALL", "DEFAULT"}


@dataclass(frozen=True)
class CpuIsa:
    """The CPU's instruction-set facts torch acts on, and the one-line name timings print."""

    aten: str  # torch.backends.cpu.get_cpu_capability(): AVX2, AVX512, ... after ATEN_CPU_CAPABILITY
    avx512_bf16: bool  # hardware flag
    amx: bool  # hardware flag (AMX tiles)
    onednn_cap: str | None  # ONEDNN_MAX_CPU_ISA, when set
    aten_cap: str | None = None  # ATEN_CPU_CAPABILITY, when set (``aten`` already follows it)

    @property
    def bfloat16_native(self) -> bool:
        """bfloat16 arithmetic runs in hardware in both ATen and oneDNN kernels."""
        if not (self.avx512_bf16 or self.amx) or not self.aten.startswith("AVX512"):
            return False
        return self.onednn_cap is None or self.onednn_cap.upper() in _ONEDNN_BF16_ISAS

    @property
    def name(self) -> str:
        """AVX2, AVX-512, AVX-512 BF16 or AMX (the best that torch uses here), with any cap named."""
        if self.bfloat16_native:
            best = "AMX" if self.amx and (self.onednn_cap is None or "AMX" in self.onednn_cap.upper()
                                           or self.onednn_cap.upper() in {"ALL", "DEFAULT"}) else "AVX-512 BF16"
        elif self.aten.startswith("AVX512"):
            best = "AVX-512"
        else:
            best = self.aten  # AVX2, DEFAULT (no vector extension), or a non-x86 name (VSX, SVE256, ...)
        held = [f"ATEN_CPU_CAPABILITY={self.aten_cap}"] if self.aten_cap else []
        if self.onednn_cap:
            held.append(f"ONEDNN_MAX_CPU_ISA={self.onednn_cap}")
        hardware = "AMX" if self.amx else "AVX-512 BF16" if self.avx512_bf16 else None
        note = f" (held by {', '.join(held)}; the CPU has {hardware or 'more'})" if held else ""
        return best + note


@functools.lru_cache(maxsize=1)
def cpu_isa() -> CpuIsa:
    """Read once per process: torch's capability, the hardware flags and the environment's caps."""
    flag = lambda name: bool(getattr(torch.cpu, name, lambda: False)())  # noqa: E731 (absent on non-x86 builds)
    return CpuIsa(aten=torch.backends.cpu.get_cpu_capability(), avx512_bf16=flag("_is_avx512_bf16_supported"),
                  amx=flag("_is_amx_tile_supported"), onednn_cap=os.environ.get("ONEDNN_MAX_CPU_ISA") or None,
                  aten_cap=os.environ.get("ATEN_CPU_CAPABILITY") or None)


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name from /proc/cpuinfo (Linux) with its family and model numbers, which name the part where a
    virtual machine's name does not (``Intel(R) Xeon(R) Processor (family 6, model 207)``); else the platform's
    processor string."""
    fields = {}
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, _, value = line.partition(":")
                if not line.strip():
                    break  # the first processor's block is enough
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    if "model name" in fields:
        numbers = [f"{k} {fields[v]}" for k, v in (("family", "cpu family"), ("model", "model")) if v in fields]
        return fields["model name"] + (f" ({', '.join(numbers)})" if numbers else "")
    import platform
    return platform.processor() or platform.machine()


def cpu_line() -> str:
    """The CPU and the instruction set torch uses on it, printed beside every timing (benchmarks,
    ``capaware.doctor``): figures from a CPU with native bfloat16 say so there."""
    return f"{cpu_model()}, instruction set {cpu_isa().name}"
