"""The backbone table: which networks capaware's stages can read, by the name a config gives (issue #57).

Three kinds of name, one door (``backbone(name)``):

- the ResNets stage one trains (``resnet10`` ... ``resnet152``): ``embedder.resnet.ResNetTrunk``, torchvision's
  ResNet class;
- ``timm:NAME``: any model of timm, the field's library of backbones (ViT, DeiT, ConvNeXt, EfficientNet, CLIP-style
  image towers, ...), built with ``timm.create_model(NAME, pretrained=False)``, so nothing is downloaded;
- ``torchvision:NAME``: a torchvision classification model (``torchvision.models.get_model``) whose last map is a
  ``features`` block (ConvNeXt, EfficientNet, MobileNet, VGG, DenseNet), a ResNet-style ``layer4``, or a
  VisionTransformer's tokens.

An entry says how to build the network (an ``embedder.grid_trunk.GridTrunk``, whose docstring states the interface),
its output width, how its last map becomes the captioners' inputs (a CNN map as it is; a ViT's patch tokens put back
on their grid, its class token as the pooled vector), its input normalisation and its stages, input to output
(``stage_parameters``: what ``train.freeze`` and ``train.layer_lr`` name). A timm model's stages are timm's own coarse
groups (``group_matcher``, what timm's layer-wise decay reads). A plugin registers more names with
``register_backbone`` (a ``plugins:`` entry, as for losses, formats and cores). The table is torch-free until a
network is built. Pretrained weight files, for every backbone and both stages: ``embedder.weights``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from capcore import plugins, registry
from capcore.errors import CapawareError
from embedder.backbone_constants import IMAGENET_NORM, RESNET_STAGES

PREFIXES = ("timm:", "torchvision:")


@dataclass(frozen=True)
class Backbone:
    name: str
    family: str  # resnet | timm | torchvision | a plugin's
    build: Callable[[], "object"]  # -> a GridTrunk (embedder.resnet.ResNetTrunk for the ResNets)
    known_width: int | None = None  # the last map's channels when known without building the network


BACKBONES: dict[str, Backbone] = {}


def register_backbone(name: str, build: Callable[[], object], family: str = "plugin",
                      known_width: int | None = None) -> Backbone:
    """Add a backbone: ``build()`` returns a module with the interface of ``embedder.grid_trunk.GridTrunk`` (best
    a subclass of it): ``width``, ``features_and_vector(x)``, and optionally ``norm`` and ``stage_parameters()``;
    ``known_width``: its ``width``, when known without building it (so that the preflight needs no torch)."""
    return registry.add(BACKBONES, name, Backbone(name, family, build, known_width), "backbone")


RESNETS = {"resnet10": 512, "resnet18": 512, "resnet34": 512, "resnet50": 2048, "resnet101": 2048, "resnet152": 2048}
"""The ResNets stage one trains and splits by stage (embedder.model), with their layer4 widths. resnet10 is ResNet-18
with one block per stage (the CPU demo's trunk; no ImageNet weights exist for it)."""


def _resnet(name: str) -> Callable[[], object]:
    def build():
        from embedder.resnet import ResNetTrunk  # when built: the table stays torch-free

        return ResNetTrunk(name)

    return build


for _name, _width in RESNETS.items():
    register_backbone(_name, _resnet(_name), "resnet", _width)


def backbone(name: str, where: str = "backbone.arch") -> Backbone:
    """The entry of ``name``: a registered one, or a ``timm:`` / ``torchvision:`` name (built when used)."""
    if plugins.knows(BACKBONES, name):
        return BACKBONES[name]
    if name.startswith("timm:"):
        return Backbone(name, "timm", lambda: TimmTrunk(name[len("timm:"):]))
    if name.startswith("torchvision:"):
        return Backbone(name, "torchvision", lambda: TorchvisionTrunk(name[len("torchvision:"):]))
    raise CapawareError(where, f"unknown backbone {name!r}",
                        f"use one of {', '.join(BACKBONES)}, or timm:NAME / torchvision:NAME for any model of "
                        "those libraries")


def stage_names(name: str) -> list[str]:
    """A backbone's stages, input to output (what ``train.freeze`` and ``train.layer_lr`` name), from the network
    built on the meta device (no memory, no weights)."""
    import torch

    if name in RESNETS:
        return list(RESNET_STAGES)
    with torch.device("meta"):
        trunk = backbone(name).build()
    stages = getattr(trunk, "stage_parameters", None)
    return list(stages()) if stages else ["trunk"]


def width(name: str) -> int:
    """Channels of a backbone's last map (its features' C): the entry's when it knows it (no torch needed, so the
    preflight stays quick), else the network's own, built on the meta device."""
    entry = backbone(name)
    if entry.known_width is not None:
        return entry.known_width
    import torch

    with torch.device("meta"):
        trunk = entry.build()
    return int(trunk.width)


def named_stages(groups: list[list], names: tuple[str, ...] = ()) -> dict[str, list]:
    """Ordered parameter groups -> ``stem``, ``stage1``, ``stage2``, ... (or the given ``names``), empty ones
    dropped."""
    groups = [g for g in groups if g]
    names = names or ("stem",) + tuple(f"stage{i}" for i in range(1, len(groups)))
    return dict(zip(names, groups))


def with_leftovers(module, stages: dict[str, list]) -> dict[str, list]:
    """``stages`` with every parameter of ``module`` they miss (a classifier the trunk never runs, a stray token)
    put in the last stage, so that every parameter has exactly one stage."""
    seen = {id(p) for ps in stages.values() for p in ps}
    last = list(stages)[-1]
    stages[last] = stages[last] + [p for p in module.parameters() if id(p) not in seen]
    return stages


def TimmTrunk(name: str):
    """A timm model without its classifier. A ViT (any model with prefix tokens and a patch grid) is built with
    ``dynamic_img_size`` so that it reads stage two's input size; its patch tokens become the map, and its pooled
    vector is timm's own (the class token for most)."""
    import timm

    from embedder.grid_trunk import GridTrunk

    class _Timm(GridTrunk):
        def __init__(self):
            super().__init__()
            try:
                self.net = timm.create_model(name, pretrained=False, num_classes=0, dynamic_img_size=True)
            except TypeError:  # a CNN: no such argument
                self.net = timm.create_model(name, pretrained=False, num_classes=0)
            except RuntimeError as err:  # timm's "Unknown model"
                raise CapawareError("backbone.arch", f"timm has no model {name!r} ({err})",
                                    "use a name of timm.list_models()") from None
            self.width = int(self.net.num_features)
            self.prefix = int(getattr(self.net, "num_prefix_tokens", 0))
            cfg = getattr(self.net, "pretrained_cfg", {}) or {}
            self.norm = (tuple(cfg.get("mean", IMAGENET_NORM[0])), tuple(cfg.get("std", IMAGENET_NORM[1])))

        def features_and_vector(self, x):
            out = self.net.forward_features(x)
            vector = self.net.forward_head(out, pre_logits=True)
            if out.dim() == 3:  # tokens [B, prefix + h*w, C]
                h, w = self.net.patch_embed.dynamic_feat_size(x.shape[-2:])
                grid = out[:, self.prefix:].transpose(1, 2).reshape(out.shape[0], self.width, h, w)
                return grid, vector
            if getattr(self.net, "output_fmt", "NCHW") == "NHWC":
                out = out.permute(0, 3, 1, 2)
            return out, None

        def stage_parameters(self) -> dict[str, list]:
            """timm's coarse groups (stem, then each block or stage, the final norm with the last), as timm's own
            layer-wise decay groups them; a model without ``group_matcher`` is one stage."""
            from timm.models import group_parameters

            if not hasattr(self.net, "group_matcher"):
                return super().stage_parameters()
            params = dict(self.net.named_parameters())
            groups = group_parameters(self.net, self.net.group_matcher(coarse=True))
            return with_leftovers(self.net, named_stages([[params[n] for n in names] for names in groups.values()]))

    return _Timm()


def TorchvisionTrunk(name: str):
    """A torchvision classification model read at its last map: ``features`` (ConvNeXt, EfficientNet, MobileNet,
    VGG, DenseNet), ``layer4`` (ResNet, ResNeXt, Wide ResNet) or a VisionTransformer's tokens (class token as
    the pooled vector)."""
    import torch
    import torchvision
    from torchvision.models.vision_transformer import VisionTransformer

    from embedder.grid_trunk import GridTrunk

    try:
        net = torchvision.models.get_model(name, weights=None)
    except ValueError as err:
        raise CapawareError("backbone.arch", f"torchvision has no model {name!r} ({err})",
                            "use a name of torchvision.models.list_models()") from None

    class _Torchvision(GridTrunk):
        def __init__(self):
            super().__init__()
            self.net = net
            if isinstance(net, VisionTransformer):
                self.kind, self.width = "vit", net.hidden_dim
            elif hasattr(net, "layer4"):
                self.kind, self.width = "layer4", net.fc.in_features
            elif isinstance(getattr(net, "features", None), torch.nn.Module):
                self.kind = "features"
                with torch.no_grad():
                    self.width = int(net.features(torch.zeros(1, 3, 64, 64)).shape[1])
            else:
                raise CapawareError("backbone.arch", f"torchvision's {name} has no last map capaware can read "
                                    "(no features block, layer4 or ViT encoder)", f"use timm:{name} if timm has it")

        def features_and_vector(self, x):
            n = self.net
            if self.kind == "features":
                return n.features(x), None
            if self.kind == "layer4":
                x = n.maxpool(n.relu(n.bn1(n.conv1(x))))
                return n.layer4(n.layer3(n.layer2(n.layer1(x)))), None
            if tuple(x.shape[-2:]) != (n.image_size, n.image_size):
                raise CapawareError("input.size", f"torchvision's {name} reads {n.image_size} px images only, "
                                    f"not {tuple(x.shape[-2:])}", f"set input.size={n.image_size} and "
                                    "input.policy=square, or use the timm model (any size)")
            h, w = x.shape[-2] // n.patch_size, x.shape[-1] // n.patch_size
            tokens = n._process_input(x)
            tokens = n.encoder(torch.cat([n.class_token.expand(x.shape[0], -1, -1), tokens], dim=1))
            grid = tokens[:, 1:].transpose(1, 2).reshape(x.shape[0], self.width, h, w)
            return grid, tokens[:, 0]

        def stage_parameters(self) -> dict[str, list]:
            return torchvision_stages(self.net, self.kind)

    return _Torchvision()


def torchvision_stages(net, kind: str) -> dict[str, list]:
    """The blocks a torchvision model's last map is read through: ``features``' children, the ResNet stem and
    layers, or a ViT's patch projection and encoder layers (its final norm with the last)."""
    def ps(*modules):
        return [p for m in modules for p in m.parameters()]

    if kind == "features":
        stages = named_stages([ps(m) for m in net.features.children()])
    elif kind == "layer4":
        stages = named_stages([ps(net.conv1, net.bn1), ps(net.layer1), ps(net.layer2), ps(net.layer3),
                               ps(net.layer4)], RESNET_STAGES)
    else:
        layers = list(net.encoder.layers)
        stages = named_stages([ps(net.conv_proj) + [net.class_token, net.encoder.pos_embedding]]
                              + [ps(m) for m in layers[:-1]] + [ps(layers[-1], net.encoder.ln)])
    return with_leftovers(net, stages)
