"""Load the network whose last map becomes the features: any backbone of ``embedder.backbones`` (a ResNet, timm,
torchvision, a plugin's) with its pretrained weight file from disk (``embedder.weights.load_pretrained``, stage
one's loader too), or a capaware checkpoint's trunk.

Only the trunk is loaded (the embedding head plays no part in stage two). What is loaded is described
by a ``BackboneInfo`` whose fields become attributes of the features file: they are how a resumed
dump proves it uses the same weights, and how stage three labels its rows Img / Cap.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from capcore.checkpoint import file_sha256, load_checkpoint
from capcore.errors import CapawareError
from embedder.backbones import RESNETS, backbone
from embedder.model import Embedder
from embedder.weights import load_fitting, load_pretrained


@dataclass(frozen=True)
class BackboneInfo:
    kind: str  # imagenet | class-pretrained | metric-learning | checkpoint
    method: str  # stage-one method name ("" otherwise)
    arch: str
    checkpoint: str  # the file the weights came from
    checkpoint_sha256: str  # hex digest of that file; "imagenet:<file name>" for torchvision weights

    def attrs(self) -> dict:
        return {"backbone": self.kind, "backbone_method": self.method, "arch": self.arch,
                "checkpoint": self.checkpoint, "checkpoint_sha256": self.checkpoint_sha256}


def _load_trunk(model: Embedder, state: dict, where: str | Path, arch: str) -> None:
    """Load a checkpoint's trunk tensors strictly (bar the classifier ``fc``); a misfit is one CapawareError line."""
    load_fitting(model.trunk, state, where, f"a {arch} trunk",
                 f"set backbone.arch to the architecture that produced {Path(where).name} (not {arch})", ("fc.",))


def load_backbone(cfg) -> tuple[torch.nn.Module, BackboneInfo]:
    """The trunk in eval mode on CPU, and what it is. ``cfg`` is the ``backbone`` config section. A pretrained file
    (``checkpoint: imagenet``) loads through ``embedder.weights.load_pretrained``, as stage one's ``model.init:
    imagenet`` does: a ResNet comes back in its Embedder (head dropped), any other backbone as its own network, with
    its own normalisation."""
    if cfg.checkpoint == "imagenet":
        if cfg.arch is None:
            raise CapawareError("backbone.arch", "imagenet weights need an architecture",
                                f"set backbone.arch to one of {', '.join(RESNETS)}, or timm:NAME / torchvision:NAME")
        backbone(cfg.arch)  # an unknown name: one line naming backbone.arch
        model = Embedder(cfg.arch, 1)
        path = load_pretrained(model.trunk, cfg.arch, cfg.weights, "backbone.weights")
        if not model.resnet:  # a timm, torchvision or plugin network, read alone (its own norm)
            return model.trunk.eval(), BackboneInfo("pretrained", "", cfg.arch, str(cfg.weights), file_sha256(path))
        info = BackboneInfo("imagenet", "", cfg.arch, str(path), f"imagenet:{path.name}")
    else:
        path = Path(cfg.checkpoint)
        state = load_checkpoint(path)
        if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
            raise CapawareError(path, "not a capaware checkpoint (no 'model' weights)",
                                "point backbone.checkpoint at a stage-one model.pt or the class-pretrained one")
        saved_arch = state.get("arch")
        if cfg.arch is not None and saved_arch is not None and cfg.arch != saved_arch:
            raise CapawareError(path, f"checkpoint is a {saved_arch}, the config asks for {cfg.arch}",
                                f"set backbone.arch={saved_arch} or leave it unset (read from the checkpoint)")
        arch = cfg.arch or saved_arch
        if arch is None:
            raise CapawareError(path, "checkpoint does not name its architecture", "set backbone.arch")
        model = Embedder(arch, 1)
        trunk = {k[len("trunk."):]: v for k, v in state["model"].items() if k.startswith("trunk.")}
        if not trunk:
            raise CapawareError(path, "checkpoint holds no trunk.* tensors", "is it a capaware Embedder checkpoint?")
        _load_trunk(model, trunk, path, arch)
        if state.get("kind") == "class-pretrained":
            kind, method = "class-pretrained", ""
        elif "method" in state:
            kind, method = "metric-learning", str(state["method"])
        else:
            kind, method = "checkpoint", ""
        info = BackboneInfo(kind, method, arch, str(path), file_sha256(path))
    model.head = torch.nn.Identity()  # unused here; keeps the module free of a dangling 1-D head
    return model.eval(), info
