"""``precision: auto`` of feature_extract: bfloat16 autocast where native (CUDA, AVX-512 BF16/AMX CPUs), float32
on other CPUs (no GPU needed; the CPU's facts are monkeypatched)."""
import pytest
import torch

from capcore.errors import CapawareError
from feature_extract.config import load_features_config
from capcore.cpu_isa import CpuIsa
from feature_extract import dump
from feature_extract.dump import Extractor, resolve_precision

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)


def test_auto_resolves_by_device_and_explicit_values_pass_through():
    assert resolve_precision("auto", CPU, native_bf16=False) == "float32"  # AVX2: bfloat16 would be emulated
    assert resolve_precision("auto", CPU, native_bf16=True) == "bfloat16"  # AVX-512 BF16 or AMX
    assert resolve_precision("auto", CUDA, native_bf16=True) == "bfloat16"
    assert resolve_precision("auto", CUDA, native_bf16=False) == "float16"  # pre-Ampere: no native bfloat16
    for value in ("float32", "bfloat16", "float16"):
        assert resolve_precision(value, CPU) == resolve_precision(value, CUDA) == value


def test_auto_is_a_valid_config_value_and_the_extractor_records_the_resolved_one(tmp_path, monkeypatch):
    cfg = load_features_config(None, ["precision=auto", f"images.folder={tmp_path}"])
    assert cfg.precision == "auto"
    with pytest.raises(CapawareError, match="precision"):
        load_features_config(None, ["precision=half", f"images.folder={tmp_path}"])
    model = torch.nn.Module()
    model.features = torch.nn.Conv2d(3, 4, 1)
    for native, resolved in ((False, "float32"), (True, "bfloat16")):  # an AVX2 CPU, then one with AMX
        isa = CpuIsa(aten="AVX512" if native else "AVX2", avx512_bf16=native, amx=native, onednn_cap=None)
        monkeypatch.setattr(dump, "cpu_isa", lambda isa=isa: isa)
        assert Extractor(model, CPU, 2, "auto", False).precision == resolved  # what identity_attrs stores
    with pytest.raises(CapawareError, match="float16 compute needs a GPU"):
        Extractor(model, CPU, 2, "float16", False)
