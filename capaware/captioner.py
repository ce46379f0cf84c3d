"""Caption anyone's images with a ``.capaware`` file: ``ImageCaptioner.load(path).caption(images)``.

``caption`` takes one image (a path as str or Path, or a PIL image; its caption comes back as a str) or a list of
them (a list of captions comes back), whatever the files are called. Its errors name its Python arguments
(``skip_bad=True``, ``beam_size``, ``batch_size``); ``capaware caption`` (caption_cli.py) gives its own flags.

An image takes the road its training images took, through the same functions: ``capdata.images``
opens it upright as 8-bit RGB, ``feature_extract.sources.resize`` applies the input policy,
``feature_extract.dump.Extractor`` normalises, runs the trunk (``precision: auto``: bfloat16 only where
the CPU or GPU has it natively) and pools the layer4 map, and the features are rounded through the
dtype they were stored in. ``captioners.decoding.decode`` then writes the caption. So the captions of
a dataset's own images equal those ``captioners.predict`` gives from its ``feats.h5``
(tests/capaware/test_capaware_cli.py checks this on the same machine).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Union, overload

import numpy as np
import torch
from PIL import Image
from tqdm import tqdm

from capcore.device import pick_device
from capcore.errors import CapawareError
from capdata.images import load_rgb, upright_rgb
from captioners.decoding import decode
from captioners.model import build_captioner
from captioners.prepro import decode_sequence
from embedder.model import Embedder
from feature_extract.dump import Extractor, run_batch
from feature_extract.sources import resize
from capaware.model_file import ModelFile, read_model_file

ImageLike = Union[str, Path, Image.Image]
DTYPES = {"float16": torch.float16, "float32": torch.float32}


class BadImageError(CapawareError):
    """An image that cannot be read, met without ``skip_bad``. Its fix names what the caller can pass: the Python
    argument by default (``skip_bad=True``); ``capaware caption`` raises it again with its flag (``--skip-bad``)."""

    def __init__(self, where: str | Path, problem: str, skip: str = "call ImageCaptioner.run(images, skip_bad=True)"):
        super().__init__(where, problem, f"remove or fix it, or {skip} to caption the rest")


def as_list(images: ImageLike | Iterable[ImageLike]) -> list[ImageLike]:
    """One image (a path as str or Path, or a PIL image) as a list of one; any other iterable as its list.
    (A str is one path, never its characters.)"""
    return [images] if isinstance(images, (str, Path, Image.Image)) else list(images)


@dataclass
class Captioned:
    source: str  # the path, or "<image k>" for a PIL image
    caption: str = ""
    attention: np.ndarray | None = None  # [words, grid_h * grid_w]: where each word looked (when asked)
    image: Image.Image | None = None  # the upright RGB image (when attention is asked, for the overlay)
    error: str = ""  # why it was skipped (skip_bad)


def upright(image: ImageLike) -> Image.Image:
    """A path or a PIL image as upright 8-bit RGB (capdata.images' rules for both)."""
    if isinstance(image, Image.Image):
        return upright_rgb(image)
    return load_rgb(image)


class ImageCaptioner:
    """A trained captioner and the backbone that makes its features, from one ``.capaware`` file."""

    def __init__(self, model: ModelFile, device: str = "auto", precision: str = "auto"):
        self.file, self.device = model, pick_device(device)
        prep = model.preprocessing
        trunk = Embedder(prep.arch, 1)  # any backbone of the table: a ResNet's trunk or a GridTrunk
        trunk.trunk.load_state_dict(model.backbone["state"])
        trunk.head = torch.nn.Identity()
        trunk.norm = (tuple(prep.mean), tuple(prep.std))  # the file's normalisation, which made the features
        self.extract = Extractor(trunk.eval(), self.device, prep.att_size, precision, channels_last=True)
        self.model = build_captioner(dict(model.card.model_args))
        self.model.load_state_dict(model.captioner_state)
        self.model = self.model.to(self.device).eval()
        self.vocab = list(model.card.vocab)

    @classmethod
    def load(cls, path: str | Path, device: str = "auto", precision: str = "auto") -> "ImageCaptioner":
        return cls(read_model_file(path), device, precision)

    @property
    def grid(self) -> tuple[int, int]:
        return tuple(self.file.card.att_grid) or (self.file.preprocessing.att_size,) * 2

    @overload
    def caption(self, images: ImageLike, beam_size: int | None = None, batch_size: int = 16) -> str: ...

    @overload
    def caption(self, images: Iterable[ImageLike], beam_size: int | None = None, batch_size: int = 16) -> list[str]: ...

    def caption(self, images, beam_size=None, batch_size=16):
        """Captions of any images, whatever their names: one image (a path as str or Path, or a PIL image) gives
        its caption as a str (``caption("photos/beach.png")``); a list (or any iterable) of them gives the list of
        their captions, in order. A bad file raises CapawareError (``run(..., skip_bad=True)`` goes on past it);
        ``beam_size`` (default: the model's) and ``batch_size`` must be >= 1."""
        captions = [c.caption for c in self.run(images, beam_size, batch_size)]
        return captions[0] if isinstance(images, (str, Path, Image.Image)) else captions

    def run(self, images: ImageLike | Iterable[ImageLike], beam_size: int | None = None, batch_size: int = 16,
            attention: bool = False, skip_bad: bool = False, progress: bool = False) -> Iterator[Captioned]:
        """Caption in batches, yielding one ``Captioned`` per image in order (one image: one ``Captioned``). A bad
        file raises its CapawareError (``BadImageError``), or with ``skip_bad`` comes back with ``error`` set and
        the rest go on."""
        images = as_list(images)
        beam = self.file.decoding["beam_size"] if beam_size is None else beam_size
        if beam < 1 or batch_size < 1:
            raise CapawareError("ImageCaptioner", f"beam_size ({beam}) and batch_size ({batch_size}) must be >= 1",
                                "e.g. beam_size=2, batch_size=16 (beam_size=1: greedy)")
        bar = tqdm(total=len(images), desc="caption", unit="img", disable=not progress, leave=False)
        for start in range(0, len(images), batch_size):
            batch = [self._prepare(image, k, skip_bad, attention)
                     for k, image in enumerate(images[start:start + batch_size], start)]
            good = [(c, x) for c, x in batch if x is not None]
            if good:
                self._decode(good, beam, attention)
            bar.update(len(batch))
            yield from (c for c, _ in batch)
        bar.close()

    def _prepare(self, image: ImageLike, k: int, skip_bad: bool, keep: bool) -> tuple[Captioned, torch.Tensor | None]:
        source = f"<image {k}>" if isinstance(image, Image.Image) else str(image)
        try:
            rgb = upright(image)
        except CapawareError as err:
            if not skip_bad:
                raise BadImageError(err.where, err.problem) from None
            return Captioned(source, error=f"{err.problem}"), None
        prep = self.file.preprocessing
        pixels = torch.from_numpy(np.asarray(resize(rgb, prep.input_policy, prep.input_size), dtype=np.uint8).copy())
        return Captioned(source, image=rgb if keep else None), pixels

    @torch.no_grad()
    def _decode(self, good: list[tuple[Captioned, torch.Tensor]], beam: int, attention: bool) -> None:
        fc, att = self._features([x for _, x in good])
        dec = decode(self.model, fc, att, "beam" if beam > 1 else "greedy", beam, self.file.decoding["max_length"])
        for k, (c, _) in enumerate(good):
            c.caption = decode_sequence(self.vocab, dec.seq[k].tolist())
            if attention:
                c.attention = dec.alpha[k, : len(c.caption.split())].float().cpu().numpy()

    def features(self, images: ImageLike | Iterable[ImageLike],
                 batch_size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
        """(fc [N, C], att [N, H*W, C]) of the images, as the captioner sees them (rounded through the stored dtype);
        one image gives N = 1."""
        images = as_list(images)
        if batch_size < 1:
            raise CapawareError("ImageCaptioner", f"batch_size ({batch_size}) must be >= 1", "e.g. batch_size=16")
        fcs, atts = [], []
        for start in range(0, len(images), batch_size):
            try:
                good = [self._prepare(image, k, False, False)
                        for k, image in enumerate(images[start:start + batch_size], start)]
            except BadImageError as err:  # no image can be skipped here: every row is asked for
                raise CapawareError(err.where, err.problem, "remove or fix it") from None
            fc, att = self._features([x for _, x in good])
            fcs.append(fc.cpu())
            atts.append(att.cpu())
        return torch.cat(fcs), torch.cat(atts)

    def _features(self, pixels: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        att, fc, _ = run_batch(self.extract, [(k, x, None) for k, x in enumerate(pixels)], False,
                               self.model_channels, self.grid[0] * self.grid[1])
        stored = DTYPES[self.file.preprocessing.feature_dtype]  # as the training features were stored
        return fc.to(stored).float().to(self.device), att.to(stored).float().to(self.device)

    @property
    def model_channels(self) -> int:
        return self.file.card.feature_sizes[1]
