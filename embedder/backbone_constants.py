"""What the backbone table (``embedder.backbones``) and the trunks it builds (``embedder.grid_trunk``,
``embedder.resnet``) share, torch-free, so that the table imports no trunk module and no trunk module imports the
table: ImageNet's input normalisation and a ResNet's stage names."""
from __future__ import annotations

IMAGENET_NORM = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
"""(mean, std) of ImageNet's images: stage one normalises every trunk's input with it (``embedder.data``)."""

RESNET_STAGES = ("stem", "layer1", "layer2", "layer3", "layer4")
"""A ResNet's stages, input to output: what ``train.freeze`` and ``train.layer_lr`` name for it."""
