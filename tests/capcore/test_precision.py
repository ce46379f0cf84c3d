"""``precision: auto`` follows what the machine can do: bfloat16 only where it is native.

The CPU's facts are monkeypatched (``capcore.device.cpu_isa``), so these tests say the same on an AVX2
laptop and on an AMX server; one test reads the real environment caps through ``capcore.cpu_isa``.
"""
from __future__ import annotations

import pytest
import torch

import capcore.cpu_isa as isa_mod
import capcore.device as device_mod
from capcore.cpu_isa import CpuIsa
from capcore.device import pick_precision, precision_choice
from capcore.errors import CapawareError

CPU = torch.device("cpu")
AVX2 = CpuIsa(aten="AVX2", avx512_bf16=False, amx=False, onednn_cap=None)
ZEN4 = CpuIsa(aten="AVX512", avx512_bf16=True, amx=False, onednn_cap=None)
SAPPHIRE = CpuIsa(aten="AVX512", avx512_bf16=True, amx=True, onednn_cap=None)


def as_cpu(monkeypatch, isa: CpuIsa) -> None:
    monkeypatch.setattr(device_mod, "cpu_isa", lambda: isa)
    monkeypatch.setattr(device_mod, "_WARNED", set())


def test_auto_is_float32_on_a_cpu_without_native_bfloat16(monkeypatch):
    as_cpu(monkeypatch, AVX2)
    dtype, why = precision_choice("auto", CPU)
    assert dtype is None
    assert "float32" in why and "no native bfloat16" in why and "AVX2" in why


@pytest.mark.parametrize("isa, shown", [(ZEN4, "AVX-512 BF16"), (SAPPHIRE, "AMX")])
def test_auto_is_bfloat16_on_a_cpu_with_native_bfloat16(monkeypatch, isa, shown):
    as_cpu(monkeypatch, isa)
    dtype, why = precision_choice("auto", CPU, "pretrain.precision")
    assert dtype is torch.bfloat16
    assert why.startswith("pretrain.precision=auto -> bfloat16") and shown in why


@pytest.mark.parametrize("isa", [ZEN4, SAPPHIRE])
def test_auto_stays_float32_on_a_native_cpu_for_the_captioners_but_not_on_a_gpu(monkeypatch, isa):
    as_cpu(monkeypatch, isa)
    dtype, why = precision_choice("auto", CPU, auto_on_cpu=False)
    assert dtype is None and why.startswith("train.precision=auto -> float32") and isa.name in why
    assert precision_choice("bfloat16", CPU, auto_on_cpu=False)[0] is torch.bfloat16  # asked for: given
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert precision_choice("auto", torch.device("cuda", 0), auto_on_cpu=False)[0] is torch.bfloat16


@pytest.mark.parametrize("aten, cap, native", [
    ("AVX2", None, False),                 # ATEN_CPU_CAPABILITY=avx2 on a BF16 CPU: ATen kernels emulate
    ("AVX512", "AVX2", False),             # ONEDNN_MAX_CPU_ISA=AVX2: oneDNN's convolutions emulate
    ("AVX512", "avx512_core", False),      # AVX-512 without BF16 (Skylake, Ice Lake server, Zen 3 never had it)
    ("AVX512", "AVX512_CORE_BF16", True),  # a cap at or above BF16 keeps it native
    ("AVX512", None, True),
])
def test_caps_on_the_instruction_set_count_as_a_smaller_cpu(aten, cap, native):
    isa = CpuIsa(aten=aten, avx512_bf16=True, amx=False, onednn_cap=cap)
    assert isa.bfloat16_native is native
    assert ("held by" in isa.name) is (cap is not None)
    held = CpuIsa(aten="AVX2", avx512_bf16=True, amx=False, onednn_cap=None, aten_cap="avx2")
    assert not held.bfloat16_native and held.name.startswith("AVX2 (held by ATEN_CPU_CAPABILITY=avx2")


def test_an_explicit_bfloat16_without_native_support_runs_but_warns_once(monkeypatch, capsys):
    as_cpu(monkeypatch, AVX2)
    assert pick_precision("bfloat16", CPU, "train.precision") is torch.bfloat16
    assert pick_precision("bfloat16", CPU, "train.precision") is torch.bfloat16
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "train.precision=bfloat16" in lines[0] and "auto" in lines[0]
    as_cpu(monkeypatch, ZEN4)  # native: no warning
    pick_precision("bfloat16", CPU, "train.precision")
    assert capsys.readouterr().err == ""


def test_float32_is_float32_everywhere_and_unknown_names_are_refused(monkeypatch):
    for isa in (AVX2, SAPPHIRE):
        as_cpu(monkeypatch, isa)
        assert pick_precision("float32", CPU) is None
    with pytest.raises(CapawareError, match="train.precision"):
        pick_precision("float16", CPU)


def test_auto_on_a_gpu_follows_its_bfloat16_support(monkeypatch):
    gpu = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert pick_precision("auto", gpu) is torch.bfloat16 and pick_precision("float32", gpu) is None
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)  # e.g. a V100
    assert pick_precision("auto", gpu) is None


def test_cpu_isa_reads_the_environment_caps(monkeypatch):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")  # read, not applied: torch reads it once at start
    isa_mod.cpu_isa.cache_clear()
    try:
        isa = isa_mod.cpu_isa()
        assert isa.onednn_cap == "AVX2" and not isa.bfloat16_native
        assert "ONEDNN_MAX_CPU_ISA=AVX2" in isa.name and isa.aten_cap == "avx2"
        assert isa.aten == torch.backends.cpu.get_cpu_capability()
    finally:
        isa_mod.cpu_isa.cache_clear()


def test_the_cpu_is_named_with_its_family_and_model_numbers(tmp_path):
    """A virtual machine's model name is often generic ("Intel(R) Xeon(R) Processor"); the family and model numbers
    beside it name the part in every timing and study record. The first processor's block is read."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\n"
                    "model name\t: Intel(R) Xeon(R) Processor\nflags\t\t: avx2\n\nprocessor\t: 1\nmodel\t\t: 1\n")
    assert isa_mod.cpu_model(str(info)) == "Intel(R) Xeon(R) Processor (family 6, model 207)"
    info.write_text("model name\t: AMD EPYC 9R45\n")
    assert isa_mod.cpu_model(str(info)) == "AMD EPYC 9R45"
