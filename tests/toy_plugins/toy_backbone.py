"""A toy backbone, one file with its registration inside, as a user adds one (issue #57): a strided convolution whose
map is the grid stage two pools to ``att_size`` cells and whose mean is the pooled vector. It exists to show that a
backbone family is one file plus one ``register_backbone`` line, read from a config's ``plugins:``."""
import torch
from torch import nn

from embedder.backbones import IMAGENET_NORM, register_backbone


class ToyGrid(nn.Module):
    width = 24
    norm = IMAGENET_NORM

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, self.width, kernel_size=8, stride=8)

    def features_and_vector(self, x):
        grid = torch.relu(self.conv(x))
        return grid, grid.mean((2, 3))

    def forward(self, x):
        return self.features_and_vector(x)[1]


register_backbone("toy_grid", ToyGrid, family="plugin", known_width=ToyGrid.width)
