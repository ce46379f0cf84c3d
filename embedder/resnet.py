"""The ResNets stage one trains and stage two reads: torchvision's own ``ResNet`` class, built with torchvision's
block and layer layout for each name, its classifier ``fc`` replaced by nothing, and the interface every backbone of
the table has (``embedder.grid_trunk.GridTrunk``): ``width``, ``norm``, ``features_and_vector`` and
``stage_parameters``. Being torchvision's class, its tensors keep torchvision's names (``conv1.weight``,
``layer1.0.bn1.running_mean``, ...): a torchvision weight file loads as it is, and a capaware checkpoint holds them
under ``trunk.``."""
from __future__ import annotations

import torch
from torch import nn
from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet

from embedder.backbone_constants import RESNET_STAGES
from embedder.grid_trunk import GridTrunk

LAYOUTS = {"resnet10": (BasicBlock, (1, 1, 1, 1)), "resnet18": (BasicBlock, (2, 2, 2, 2)),
           "resnet34": (BasicBlock, (3, 4, 6, 3)), "resnet50": (Bottleneck, (3, 4, 6, 3)),
           "resnet101": (Bottleneck, (3, 4, 23, 3)), "resnet152": (Bottleneck, (3, 8, 36, 3))}
"""Each ResNet's block and blocks per stage, as ``torchvision.models.<name>`` builds it; resnet10 is ResNet-18 with
one block per stage (``resnet10``)."""


class ResNetTrunk(ResNet, GridTrunk):
    """A torchvision ResNet up to its pooled vector (``fc`` is ``nn.Identity``): called, the [B, C] vector stage
    one's head embeds (torchvision's forward); ``features_and_vector`` the layer4 map (H/32 x W/32) and None (its
    mean is the vector)."""

    def __init__(self, arch: str):
        block, layers = LAYOUTS[arch]
        super().__init__(block, list(layers))
        self.arch, self.width = arch, int(self.fc.in_features)
        self.fc = nn.Identity()

    def features_and_vector(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x)))), None

    def stage_parameters(self) -> dict[str, list[nn.Parameter]]:
        """Stem and layers (``RESNET_STAGES``), input to output, every parameter in exactly one."""
        modules = [[self.conv1, self.bn1], [self.layer1], [self.layer2], [self.layer3], [self.layer4]]
        return {name: [p for m in ms for p in m.parameters()] for name, ms in zip(RESNET_STAGES, modules)}


def resnet10() -> ResNetTrunk:
    """ResNet-18 with one basic block per stage instead of two: the same stem, widths (C = 512), strides and
    layer4 map, at half the compute (a float32 training step, 96 images at 64 px, one core of the 2-core AMD
    EPYC Zen 5 held to AVX2 (CPU features avx2, avx512f, avx512_bf16): 0.43 s against 0.83 s;
    ``benchmarks/bench_stage1_arch.py``). torchvision builds it but names none; the CPU demo trains it from
    scratch or from the class-pretrained stand-in, so no ImageNet weights exist (``imagenet_weight_file``)."""
    return ResNetTrunk("resnet10")
