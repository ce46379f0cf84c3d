"""The embedding network: a trunk of the backbone table (``embedder.backbones``: a ResNet, timm, torchvision or a
plugin's) + a linear embedding head.

Initialisation never downloads: ``imagenet`` loads the backbone's weight file from disk (a ResNet's: torchvision's,
the ``weights`` path or under ``$TORCH_HOME/hub/checkpoints``; any other's: the ``weights`` path) through
``embedder.weights.load_pretrained``, the loader stage two uses too, and fails with one line saying where to put it;
a path initialises from a capaware checkpoint (a stage-one run, or the class-pretrained backbone).
"""
from __future__ import annotations

import torch
from torch import nn

from capcore.checkpoint import load_checkpoint
from capcore.errors import CapawareError
from embedder.backbones import IMAGENET_NORM, backbone
from embedder.config import FREEZABLE
from embedder.resnet import ResNetTrunk, resnet10  # noqa: F401 (embedder.model.resnet10, as the docs name it)
from embedder.weights import imagenet_releases, imagenet_weight_file  # noqa: F401 (capaware.preflight's)
from embedder.weights import load_fitting, load_pretrained


class Embedder(nn.Module):
    """Trunk (up to its pooled vector) + linear head; ``features`` exposes the trunk's last map. The trunk is any
    backbone of ``embedder.backbones``: a ResNet (``embedder.resnet.ResNetTrunk``, torchvision's class:
    ``trunk.conv1`` ... ``trunk.layer4``, as every checkpoint so far holds it), or a timm, torchvision or plugin
    network, whose stages its entry names (``stage_parameters``): ``train.freeze`` and ``train.layer_lr`` read them.
    Stage one normalises every trunk's input with ImageNet's mean and std (``embedder.data``), so ``norm`` says so
    for stage two."""

    def __init__(self, arch: str = "resnet18", embed_dim: int = 128):
        super().__init__()
        self.trunk = backbone(arch, "model.arch").build()
        self.arch, self.feat_dim = arch, int(self.trunk.width)
        self.resnet = isinstance(self.trunk, ResNetTrunk)
        self.head = nn.Linear(self.feat_dim, embed_dim)

    norm = IMAGENET_NORM  # what stage one normalises every trunk's input with (embedder.data)

    @property
    def width(self) -> int:
        """Channels of the last map (a ResNet's layer4: 512 or 2048): the backbone table's ``width``."""
        return self.feat_dim

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The last map [B, C, h, w] (a ResNet's layer4, H/32 x W/32): what stage two pools into att/fc features."""
        return self.features_and_vector(x)[0]

    def features_and_vector(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """As every backbone of ``embedder.backbones``: the map, and the pooled vector (None: the map's mean)."""
        return self.trunk.features_and_vector(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(x))

    def stage_parameters(self) -> dict[str, list[nn.Parameter]]:
        """The trunk's stages, input to output, then ``head``: every parameter in exactly one (``train.layer_lr``'s
        keys; ``train.freeze`` names one of the trunk's). A ResNet's are its stem and layers."""
        own = getattr(self.trunk, "stage_parameters", None)  # a plugin's plain module names none: one stage
        stages = own() if own else {"trunk": list(self.trunk.parameters())}
        return {**stages, "head": list(self.head.parameters())}

    def split_trunk(self, frozen: str) -> tuple[nn.Sequential, nn.Sequential]:
        """(frozen prefix, trainable rest up to the pooled vector) of the trunk, cut after stage ``frozen``.

        Both share the trunk's modules, so training the rest trains ``self.trunk``; ``frozen='none'``
        gives an empty prefix. Stage one can then embed a ResNet prefix's maps once and train the rest alone.
        Another backbone is not a plain sequence of modules, so it freezes in place: the stages up to
        ``frozen`` stop taking gradients (never stepped, their norms held: ``hold_frozen_norms``) and still run
        every step; the prefix is empty.
        """
        if not self.resnet:
            stages = self.stage_parameters()
            names = list(stages)[:-2]  # neither the last stage nor the head
            if frozen != "none" and frozen not in names:
                raise CapawareError("train.freeze", f"{self.arch} has no stage {frozen!r} to freeze up to",
                                    f"use none or one of {', '.join(names) or '(none: it is one stage)'}")
            if frozen != "none":
                for name in names[:names.index(frozen) + 1]:
                    for p in stages[name]:
                        p.requires_grad_(False)
            return nn.Sequential(), self.trunk
        if frozen not in FREEZABLE:
            raise CapawareError("train.freeze", f"unknown stage {frozen!r}", f"use one of {', '.join(FREEZABLE)}")
        t = self.trunk
        stages = [nn.Sequential(t.conv1, t.bn1, t.relu, t.maxpool), t.layer1, t.layer2, t.layer3, t.layer4]
        cut = FREEZABLE.index(frozen)
        return nn.Sequential(*stages[:cut]), nn.Sequential(*stages[cut:], t.avgpool, nn.Flatten(1))


def hold_frozen_norms(model: nn.Module) -> None:
    """BatchNorm layers none of whose parameters train (a stage frozen in place) in eval mode, so that their
    running statistics stay the initial trunk's, as a frozen stage must."""
    for m in model.modules():
        params = list(m.parameters(recurse=False))
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and params and not any(p.requires_grad for p in params):
            m.eval()


def build_model(arch: str, embed_dim: int, init: str = "none", weights: str = "") -> Embedder:
    """The network of ``model.arch``: random (``init: none``), the backbone's pretrained weight file (``imagenet``:
    ``embedder.weights.load_pretrained``, as stage two loads it), or a capaware checkpoint's trunk (a path)."""
    model = Embedder(arch, embed_dim)
    if init == "none":
        return model
    if init == "imagenet":
        load_pretrained(model.trunk, arch, weights, "model.weights")
        return model
    state = load_checkpoint(init)
    trunk_state = {k[len("trunk."):]: v for k, v in state["model"].items() if k.startswith("trunk.")}
    load_fitting(model.trunk, trunk_state, init, f"a {arch} trunk",
                 f"set model.arch to the checkpoint's architecture ({state.get('arch', '?')})", ("fc.",))
    return model
