"""Pretrained weight files, one loader for both stages (issue #65): stage one's ``model.init: imagenet``
(``embedder.model.build_model``) and stage two's ``backbone.checkpoint: imagenet``
(``feature_extract.backbone.load_backbone``) both call ``load_pretrained``, for a ResNet as for any other backbone.

Where the file is: a ResNet's is torchvision's file, the ``weights`` path or under ``$TORCH_HOME/hub/checkpoints``
(``imagenet_weight_file``); any other backbone's is the ``weights`` path alone (``own_weight_file``). capaware
never downloads: a missing file is one line saying what to fetch and where it goes.

What it holds: a state dict (``.safetensors``, ``.pth``/``.pt`` or ``.bin``; possibly inside a ``state_dict`` or
``model`` entry) either of the trunk itself (``torch.save(trunk.state_dict(), path)``: a plugin's own module, keys
as the trunk names them) or, for a trunk that wraps a library's model in ``trunk.net`` (``timm:``,
``torchvision:``), of that model (the files timm and torchvision publish: keys without ``net.``); the loader takes
whichever the file's names match. A classifier's tensors (``CLASSIFIERS``) may be there or not. A file saved from
a DistributedDataParallel model (every key under ``module.``) loads with a one-line note. Anything else that does
not fit, in part or whole (another depth, a renamed layer, tensors under another prefix, other shapes), is one
CapawareError line naming the file, how many tensors are missing, unexpected or of another shape, and the fix.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from capcore.errors import CapawareError
from embedder.backbones import RESNETS

CLASSIFIERS = ("fc.", "head.", "heads.", "classifier.", "head_dist.")
"""Parameter prefixes of the classifier a weight file may carry and a trunk without it does not have."""


def load_pretrained(trunk, arch: str, weights: str = "", key: str = "backbone.weights") -> Path:
    """Load backbone ``arch``'s pretrained weight file into ``trunk`` (its table entry's network); returns the file.
    ``key`` is the config key that gives ``weights`` (``model.weights``, ``backbone.weights``): the lines that ask
    for a file or another architecture name it and its section's ``arch``."""
    path = imagenet_weight_file(arch, weights, key) if arch in RESNETS else own_weight_file(arch, weights, key)
    section = key.rpartition(".")[0] or "backbone"
    load_weights(trunk, path, arch, f"set {section}.arch to the model {path.name} holds (not {arch}), or give "
                                    f"{arch}'s own weight file")
    return path


def imagenet_releases(arch: str) -> list[str]:
    """The URLs of every ImageNet-1k weight file torchvision publishes for ``arch`` (V1, then V2 where
    there is one); a file is found under any of their names."""
    import torchvision

    return [w.url for w in torchvision.models.get_model_weights(arch) if w.name.startswith("IMAGENET1K")]


def imagenet_weight_file(arch: str, weights: str = "", key: str = "the config's weights key") -> Path:
    """Where torchvision's ImageNet weights lie: ``weights`` when given (it must exist), else the first of
    torchvision's file names for ``arch`` (IMAGENET1K_V1, IMAGENET1K_V2) found under
    $TORCH_HOME/hub/checkpoints. Another backbone's file is ``weights`` alone (``own_weight_file``). CapawareError
    (no download) when absent."""
    if arch not in RESNETS:  # a timm, torchvision or plugin backbone: its own file, by path
        return own_weight_file(arch, weights, key)
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
                        f"or set {key} to the file)")


def weight_source(name: str) -> str:
    """Where a backbone's pretrained file comes from, for the line that asks for it: timm's Hugging Face file
    (its default tag) or torchvision's URL, when the library knows one."""
    try:
        if name.startswith("timm:"):
            from timm.models import get_pretrained_cfg

            cfg = get_pretrained_cfg(name[len("timm:"):])
            if cfg is not None and cfg.hf_hub_id:
                return f"https://huggingface.co/{cfg.hf_hub_id}/resolve/main/model.safetensors"
        if name.startswith("torchvision:"):
            import torchvision

            return torchvision.models.get_model_weights(name[len("torchvision:"):]).DEFAULT.url
    except Exception:  # an unknown name, a library without the entry: no source to name
        pass
    return "the model's .safetensors, .pth or .bin state dict"


def own_weight_file(name: str, weights: str, key: str = "backbone.weights") -> Path:
    """The weight file a backbone other than a ResNet loads: the path ``key`` gives, which must exist (capaware
    never downloads); otherwise one line saying what to fetch and where the path goes."""
    if weights and Path(weights).is_file():
        return Path(weights)
    source = weight_source(name)
    if weights:
        raise CapawareError(weights, f"weight file of {name} not found and capaware never downloads",
                            f"download {source} on a machine with internet and put it there (or fix {key})")
    raise CapawareError(key, f"{name} needs its weight file and capaware never downloads",
                        f"download {source} on a machine with internet and set {key} to its path")


def read_weight_file(path) -> dict:
    """A state dict from a ``.safetensors``, ``.pth``/``.pt`` or ``.bin`` file (timm's, Hugging Face's, torch's),
    unwrapped from a ``state_dict`` / ``model`` entry; a ``module.`` prefix on every key (a DistributedDataParallel
    or DataParallel save) is stripped, with a one-line note on stderr."""
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
    if not isinstance(state, dict) or not state or not all(isinstance(k, str) and hasattr(v, "shape")
                                                           for k, v in state.items()):
        raise CapawareError(path, "holds no state dict", "give a .safetensors, .pth or .bin state dict of the model")
    if all(k.startswith("module.") for k in state):
        print(f"note: {path}: stripped the 'module.' prefix (a DistributedDataParallel save)", file=sys.stderr)
        state = {k[len("module."):]: v for k, v in state.items()}
    return state


def misfit(module, state: dict, ignored: tuple[str, ...]) -> tuple[list[str], list[str], list[str]]:
    """(missing, unexpected, of another shape): ``state``'s names against ``module``'s, tensors under ``ignored``
    prefixes (a classifier) left out. A BatchNorm's ``num_batches_tracked`` counter may be missing (torchvision's
    first ImageNet files have none)."""
    own = module.state_dict()
    missing = [k for k in own if k not in state and not k.startswith(ignored) and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in state if k not in own and not k.startswith(ignored)]
    reshaped = [k for k in state if k in own and not k.startswith(ignored)
                and tuple(state[k].shape) != tuple(own[k].shape)]
    return missing, unexpected, reshaped


def prefix_hint(state: dict, module, ignored: tuple[str, ...]) -> str:
    """When every tensor of ``state`` sits under one prefix and would fit without it: what to do about it."""
    firsts = {k.partition(".")[0] for k in state}
    if len(firsts) != 1 or not all("." in k for k in state):
        return ""
    prefix = f"{firsts.pop()}."
    if misfit(module, {k[len(prefix):]: v for k, v in state.items()}, ignored) != ([], [], []):
        return ""
    return f"; its tensors are under {prefix!r}: save the state_dict() of the module under it instead"


def load_fitting(module, state: dict, where, what: str, fix: str, ignored: tuple[str, ...] = CLASSIFIERS) -> None:
    """Load ``state`` into ``module`` whole (tensors under the ``ignored`` prefixes may be missing or extra: a
    classifier); a state that does not fit, in part or whole, is one line naming ``where``, how many tensors are
    missing, unexpected or of another shape, the first of each, and ``fix``."""
    missing, unexpected, reshaped = misfit(module, state, ignored)
    if missing or unexpected or reshaped:
        counts = f"{len(missing)} missing, {len(unexpected)} unexpected" + (
            f", {len(reshaped)} of another shape" if reshaped else "")
        firsts = ", ".join(f"{kind} {keys[0]}" for kind, keys in (("missing", missing), ("unexpected", unexpected),
                                                                  ("reshaped", reshaped)) if keys)
        raise CapawareError(where, f"tensors do not fit {what} ({counts}; e.g. {firsts})",
                            fix + prefix_hint(state, module, ignored))
    own = module.state_dict()
    module.load_state_dict({k: v for k, v in state.items() if k in own and tuple(v.shape) == tuple(own[k].shape)},
                           strict=False)  # all but a classifier the trunk lacks or has in another size


def fitting_target(trunk, state: dict):
    """The module a weight file is for: the trunk itself, or the library model it wraps in ``trunk.net`` (timm,
    torchvision), whichever has more of the file's tensor names (the wrapped model's on a tie: a published file)."""
    net = getattr(trunk, "net", None)
    if net is None or not hasattr(net, "state_dict"):
        return trunk
    overlap = [len(set(state) & set(m.state_dict())) for m in (trunk, net)]
    return trunk if overlap[0] > overlap[1] else net


def load_weights(trunk, path, name: str, fix: str = "") -> None:
    """Load a weight file into a backbone's trunk (``fitting_target``: the trunk's own state dict, or the wrapped
    library model's), its classifier's tensors ignored."""
    state = read_weight_file(path)
    load_fitting(fitting_target(trunk, state), state, path, name,
                 fix or f"set backbone.arch to the model {Path(path).name} holds (not {name}), or give {name}'s own "
                        "weight file")
