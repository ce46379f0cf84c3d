"""``precision: auto`` of feature_extract: bfloat16 autocast on CUDA, float32 on CPU (no GPU needed)."""
import pytest
import torch

from capcore.errors import CapawareError
from feature_extract.config import load_features_config
from feature_extract.dump import Extractor, resolve_precision

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)


def test_auto_resolves_by_device_and_explicit_values_pass_through():
    assert resolve_precision("auto", CPU) == "float32"
    assert resolve_precision("auto", CUDA, native_bf16=True) == "bfloat16"
    assert resolve_precision("auto", CUDA, native_bf16=False) == "float16"  # pre-Ampere: no native bfloat16
    for value in ("float32", "bfloat16", "float16"):
        assert resolve_precision(value, CPU) == resolve_precision(value, CUDA) == value


def test_auto_is_a_valid_config_value_and_the_extractor_records_the_resolved_one(tmp_path):
    cfg = load_features_config(None, ["precision=auto", f"images.folder={tmp_path}"])
    assert cfg.precision == "auto"
    with pytest.raises(CapawareError, match="precision"):
        load_features_config(None, ["precision=half", f"images.folder={tmp_path}"])
    model = torch.nn.Module()
    model.features = torch.nn.Conv2d(3, 4, 1)
    assert Extractor(model, CPU, 2, "auto", False).precision == "float32"  # what identity_attrs stores
    with pytest.raises(CapawareError, match="float16 compute needs a GPU"):
        Extractor(model, CPU, 2, "float16", False)
