"""The base class of every backbone of the table (``embedder.backbones``), and so of a plugin's: what stage one
trains and stage two reads. Import it as ``from embedder.grid_trunk import GridTrunk``."""
from __future__ import annotations

import torch
from torch import nn

from embedder.backbone_constants import IMAGENET_NORM


class GridTrunk(nn.Module):
    """A backbone as capaware reads it; the one statement of the interface (docs/plugins.md shows a worked example).

    A subclass gives:

    - ``width`` (int): C, the channels of its last map (and of its pooled vector);
    - ``features_and_vector(x)``: for images ``x`` [B, 3, H, W], normalised with ``norm``, the last map
      [B, C, h, w] (stage two pools it to the ``att_size`` grid) and the pooled vector [B, C], or None for the
      map's mean (the ``fc`` features, and what stage one's head embeds);
    - ``norm`` (optional): the (mean, std) per RGB channel its input is normalised with in stage two (for its own
      weight file); ImageNet's unless set. Stage one normalises every trunk's input with ImageNet's;
    - ``stage_parameters()`` (optional): stage name -> its parameters, input to output, every parameter in exactly
      one: what ``train.freeze`` and ``train.layer_lr`` name; a trunk that names none is one stage, ``trunk``.

    Called, it returns the pooled vector. Its weight file (``model.weights``, ``backbone.weights``) is its own state
    dict, ``torch.save(trunk.state_dict(), path)``, whose tensors are named as ``trunk.state_dict()`` names them; a
    trunk that wraps a library's model as ``self.net`` (as the ``timm:`` and ``torchvision:`` entries do) also
    loads that model's own file (the names without ``net.``: the files timm and torchvision publish). A classifier's
    tensors (``fc.``, ``head.``, ``classifier.``, ...) may be in the file or not (``embedder.weights``). Register a
    subclass with ``embedder.backbones.register_backbone(name, TheClass, known_width=...)``.
    """

    width: int
    norm = IMAGENET_NORM

    def features_and_vector(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        raise NotImplementedError(f"{type(self).__name__} must define features_and_vector(x)")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        grid, vector = self.features_and_vector(x)
        return grid.mean((2, 3)) if vector is None else vector

    def stage_parameters(self) -> dict[str, list[nn.Parameter]]:
        """Stage name -> its parameters, input to output, every parameter in exactly one; a network that names no
        stages is one, ``trunk``."""
        return {"trunk": list(self.parameters())}
