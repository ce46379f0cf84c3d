"""The embedding network: a trunk of the backbone table (``embedder.backbones``: a ResNet, timm, torchvision or a
plugin's) + a linear embedding head.

Initialisation never downloads: ``imagenet`` looks for torchvision's weight file on disk (the
``weights`` path, or ``$TORCH_HOME/hub/checkpoints``) and fails with one line saying where to put it;
a path initialises from a capaware checkpoint (a stage-one run, or the class-pretrained backbone).
"""
from __future__ import annotations

import os
from pathlib import Path

import torch
import torchvision
from torch import nn

from capcore.checkpoint import load_checkpoint
from capcore.errors import CapawareError
from embedder.backbones import IMAGENET_NORM, backbone
from embedder.config import ARCHS, FREEZABLE
from embedder.resnet import ResNetTrunk, resnet10  # noqa: F401 (embedder.model.resnet10, as the docs name it)


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


def imagenet_releases(arch: str) -> list[str]:
    """The URLs of every ImageNet-1k weight file torchvision publishes for ``arch`` (V1, then V2 where
    there is one); a file is found under any of their names."""
    return [w.url for w in torchvision.models.get_model_weights(arch) if w.name.startswith("IMAGENET1K")]


def imagenet_weight_file(arch: str, weights: str = "") -> Path:
    """Where torchvision's ImageNet weights lie: ``weights`` when given (it must exist), else the first of
    torchvision's file names for ``arch`` (IMAGENET1K_V1, IMAGENET1K_V2) found under
    $TORCH_HOME/hub/checkpoints. Another backbone's file is ``weights`` alone (``own_weight_file``). CapawareError
    (no download) when absent."""
    if arch not in ARCHS:  # a timm, torchvision or plugin backbone: its own file, by path
        from embedder.backbones import own_weight_file

        return own_weight_file(arch, weights, "the config's weights key")
    if arch == "resnet10":
        raise CapawareError("model.arch", "resnet10 has no ImageNet weights (torchvision publishes none)",
                            "set model.arch=resnet18 (or larger) with model.init=imagenet")
    if weights:
        if not Path(weights).is_file():
            raise CapawareError(weights, f"ImageNet weight file for {arch} not found",
                                "fix the path, or leave it empty to use $TORCH_HOME/hub/checkpoints")
        return Path(weights)
    urls = imagenet_releases(arch)
    hub = Path(os.environ.get("TORCH_HOME", Path.home() / ".cache" / "torch")) / "hub" / "checkpoints"
    for url in urls:
        if (hub / Path(url).name).is_file():
            return hub / Path(url).name
    names = " or ".join(Path(u).name for u in urls)
    raise CapawareError(hub / Path(urls[0]).name, f"ImageNet weights for {arch} not found and capaware never downloads",
                        f"download {urls[0]} on a machine with internet and put it in {hub} (named {names}; "
                        "or set the config's weights key to the file)")


def build_model(arch: str, embed_dim: int, init: str = "none", weights: str = "") -> Embedder:
    model = Embedder(arch, embed_dim)
    if init == "none":
        return model
    if init == "imagenet" and not model.resnet:  # a timm or torchvision model's own file (model.weights)
        from embedder.backbones import load_weights, own_weight_file

        load_weights(model.trunk, own_weight_file(arch, weights, "model.weights"), arch)
        return model
    if init == "imagenet":
        path = imagenet_weight_file(arch, weights)
        state = torch.load(path, map_location="cpu", weights_only=True)
        state = {k: v for k, v in state.items() if not k.startswith("fc.")}
        model.trunk.load_state_dict(state, strict=False)
        return model
    state = load_checkpoint(init)
    trunk_state = {k[len("trunk."):]: v for k, v in state["model"].items() if k.startswith("trunk.")}
    missing, unexpected = model.trunk.load_state_dict(trunk_state, strict=False)
    if unexpected or [k for k in missing if not k.startswith("fc.")]:
        raise CapawareError(init, f"checkpoint does not fit a {arch} trunk "
                            f"({len(missing)} missing, {len(unexpected)} unexpected tensors)",
                            f"set model.arch to the checkpoint's architecture ({state.get('arch', '?')})")
    return model
