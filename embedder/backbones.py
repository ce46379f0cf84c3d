"""The backbone table: which networks capaware's stages can read, by the name a config gives (issue #57).

Three kinds of name, one door (``backbone(name)``):

- the ResNets stage one trains (``resnet10`` ... ``resnet152``), built by ``embedder.model``;
- ``timm:NAME``: any model of timm, the field's library of backbones (ViT, DeiT, ConvNeXt, EfficientNet, CLIP-style
  image towers, ...), built with ``timm.create_model(NAME, pretrained=False)``, so nothing is downloaded;
- ``torchvision:NAME``: a torchvision classification model (``torchvision.models.get_model``) whose last map is a
  ``features`` block (ConvNeXt, EfficientNet, MobileNet, VGG, DenseNet), a ResNet-style ``layer4``, or a
  VisionTransformer's tokens.

An entry says how to build the network, its output width, how its last map becomes the captioners' inputs (a CNN
map as it is; a ViT's patch tokens put back on their grid, its class token as the pooled vector) and its input
normalisation. A plugin registers more names with ``register_backbone`` (a ``plugins:`` entry, as for losses,
formats and cores). The table is torch-free until a network is built.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from capcore import plugins, registry
from capcore.errors import CapawareError

IMAGENET_NORM = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
PREFIXES = ("timm:", "torchvision:")


@dataclass(frozen=True)
class Backbone:
    name: str
    family: str  # resnet | timm | torchvision | a plugin's
    build: Callable[[], "object"]  # -> a GridTrunk (or, for the ResNets, embedder.model.Embedder)
    known_width: int | None = None  # the last map's channels when known without building the network


BACKBONES: dict[str, Backbone] = {}


def register_backbone(name: str, build: Callable[[], object], family: str = "plugin",
                      known_width: int | None = None) -> Backbone:
    """Add a backbone: ``build()`` returns a module with ``features_and_vector(x)``, ``width`` and ``norm``."""
    return registry.add(BACKBONES, name, Backbone(name, family, build, known_width), "backbone")


RESNETS = {"resnet10": 512, "resnet18": 512, "resnet34": 512, "resnet50": 2048, "resnet101": 2048, "resnet152": 2048}
"""The ResNets stage one trains and splits by stage (embedder.model), with their layer4 widths. resnet10 is ResNet-18
with one block per stage (the CPU demo's trunk; no ImageNet weights exist for it)."""


def _resnet(name: str) -> Callable[[], object]:
    return lambda: registry.imported("embedder.model:Embedder")(name, 1)  # by name: the table stays torch-free


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


@functools.cache
def _grid_trunk_base():
    """The base class of the non-ResNet trunks, made once, on first use (so that importing the table needs no torch)."""
    from torch import nn

    class GridTrunk(nn.Module):
        """A network as stage two reads it: ``features_and_vector(x)`` -> (last map [B, C, h, w], pooled vector
        [B, C] or None for the map's mean), ``width`` C and ``norm`` (mean, std) of its input; called, the pooled
        vector (what stage one's head embeds)."""
        width: int
        norm = IMAGENET_NORM

        def forward(self, x):
            grid, vector = self.features_and_vector(x)
            return grid.mean((2, 3)) if vector is None else vector

    return GridTrunk


def TimmTrunk(name: str):
    """A timm model without its classifier. A ViT (any model with prefix tokens and a patch grid) is built with
    ``dynamic_img_size`` so that it reads stage two's input size; its patch tokens become the map, and its pooled
    vector is timm's own (the class token for most)."""
    import timm

    class _Timm(_grid_trunk_base()):
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

    return _Timm()


def TorchvisionTrunk(name: str):
    """A torchvision classification model read at its last map: ``features`` (ConvNeXt, EfficientNet, MobileNet,
    VGG, DenseNet), ``layer4`` (ResNet, ResNeXt, Wide ResNet) or a VisionTransformer's tokens (class token as
    the pooled vector)."""
    import torch
    import torchvision
    from torchvision.models.vision_transformer import VisionTransformer

    try:
        net = torchvision.models.get_model(name, weights=None)
    except ValueError as err:
        raise CapawareError("backbone.arch", f"torchvision has no model {name!r} ({err})",
                            "use a name of torchvision.models.list_models()") from None

    class _Torchvision(_grid_trunk_base()):
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

    return _Torchvision()


CLASSIFIERS = ("fc.", "head.", "heads.", "classifier.", "head_dist.")
"""Parameter prefixes of the classifier a weight file may carry and a trunk without it does not have."""


def read_weight_file(path) -> dict:
    """A state dict from a ``.safetensors``, ``.pth``/``.pt`` or ``.bin`` file (timm's, Hugging Face's, torch's),
    unwrapped from a ``state_dict`` / ``model`` entry and a ``module.`` prefix (DataParallel)."""
    from pathlib import Path

    import torch

    path = Path(path)
    if not path.is_file():
        raise CapawareError(path, "weight file not found", "fix the path (capaware never downloads weights)")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path))
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # several types for a damaged or foreign file
        raise CapawareError(path, f"not a readable weight file ({type(err).__name__}: {str(err)[:80]})",
                            "give a .safetensors, .pth or .bin state dict of the model") from None
    for key in ("state_dict", "model"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
    if not isinstance(state, dict) or not state:
        raise CapawareError(path, "holds no state dict", "give a .safetensors, .pth or .bin state dict of the model")
    return {k[len("module."):] if k.startswith("module.") else k: v for k, v in state.items()}


def load_fitting(module, state: dict, where, what: str, fix: str, ignored: tuple[str, ...] = CLASSIFIERS) -> None:
    """Load ``state`` into ``module`` (tensors under the ``ignored`` prefixes may be missing or extra: a classifier);
    a state that does not fit is one line naming ``where``, the first mismatch and ``fix``."""
    try:
        missing, unexpected = module.load_state_dict(state, strict=False)
    except RuntimeError as err:  # same names, other shapes
        first = next((ln.strip() for ln in str(err).splitlines() if "size mismatch" in ln), "size mismatch")
        raise CapawareError(where, f"tensors do not fit {what} ({first})", fix) from None
    missing = [k for k in missing if not k.startswith(ignored)]
    unexpected = [k for k in unexpected if not k.startswith(ignored)]
    if missing or unexpected:
        raise CapawareError(where, f"tensors do not fit {what} ({len(missing)} missing, {len(unexpected)} unexpected, "
                            f"e.g. {(missing + unexpected)[0]})", fix)


def load_weights(trunk, path, name: str) -> None:
    """Load a weight file into a GridTrunk's network (its classifier's tensors ignored): ``trunk.net`` where the
    trunk wraps a library's model (timm, torchvision), else the trunk itself (a plugin's own module)."""
    load_fitting(getattr(trunk, "net", trunk), read_weight_file(path), path, name,
                 f"set backbone.arch to the model {path} holds (not {name}), or give {name}'s own weight file")
