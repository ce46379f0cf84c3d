"""Query by image and text modifiers (Gordo & Larlus 2017, Fig. 5; issue #67): ``python -m embedder.query
--model ROW/model.pt --image PHOTO [--add WORD ...] [--remove WORD ...] --gallery FOLDER [--top 10]``.

A stage-one row trained with the text losses (a ``text`` section: its checkpoint holds the tf-idf tower and its
stems) embeds the query image, adds the concept embeddings of the words to add, subtracts those to remove
(joint.tfidf_text.modified_query), and ranks the gallery's images by their visual embeddings alone, as the paper's
database holds images only. Words are stemmed as the captions were (Snowball); an unknown or misspelt word is one
line naming the nearest stems. The images are read as the study read its own: the whole image at the study's
``data.input_size``, ImageNet-normalised.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from capcore.checkpoint import load_checkpoint
from capcore.errors import CapawareError, run_cli
from capdata.images import load_rgb
from embedder.config import load_config
from embedder.data import normalise
from embedder.model import build_model
from joint.tfidf_text import TfidfTextEncoder, modified_query, stem_ids

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")


@dataclass
class JointRow:
    """A trained row with its text side: the network, its tf-idf tower, its stems and its input size."""
    model: torch.nn.Module
    tower: TfidfTextEncoder
    vocab: list[str]
    size: int

    @classmethod
    def load(cls, path: str | Path) -> "JointRow":
        path = Path(path)
        state = load_checkpoint(path)
        weight = (state.get("criterion") or {}).get("text.tower.weight")
        if weight is None or "text_vocab" not in state:
            raise CapawareError(path, "this row has no text side to query with",
                                "train a row with a text section (text.eq2 / text.eq3 > 0) on captions.space: tfidf")
        model = build_model(state["arch"], state["embed_dim"])
        model.load_state_dict(state["model"])
        tower = TfidfTextEncoder(*weight.shape)
        tower.load_state_dict({"weight": weight})
        config = path.parents[2] / "config.yaml"  # STUDY/methods/<row>/model.pt
        size = load_config(config).data.input_size if config.is_file() else 128
        return cls(model.eval(), tower.eval(), list(state["text_vocab"]), size)

    def images(self, paths: list[Path]) -> torch.Tensor:
        arrays = [np.asarray(load_rgb(p).resize((self.size, self.size)), np.uint8).transpose(2, 0, 1) for p in paths]
        return normalise(torch.from_numpy(np.stack(arrays)))

    @torch.no_grad()
    def embed(self, paths: list[Path]) -> torch.Tensor:
        return F.normalize(self.model(self.images(paths)), dim=1)


def stemmer():
    from nltk.stem.snowball import SnowballStemmer  # pure Python: no NLTK data to download
    return SnowballStemmer("english").stem


@torch.no_grad()
def rank_gallery(row: JointRow, image: Path, gallery: list[Path], add: list[str] = (),
                 remove: list[str] = ()) -> list[tuple[Path, float]]:
    """The gallery's images by similarity to the (modified) query, most similar first, with their scores."""
    stem = stemmer()
    add_ids, remove_ids = stem_ids(add, row.vocab, stem), stem_ids(remove, row.vocab, stem)
    q = modified_query(row.embed([image])[0], row.tower, add_ids, remove_ids)
    scores = row.embed(gallery) @ q
    order = torch.argsort(scores, descending=True, stable=True)
    return [(gallery[i], float(scores[i])) for i in order.tolist()]


def gallery_of(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise CapawareError(folder, "no such gallery folder", "pass a folder of images")
    paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not paths:
        raise CapawareError(folder, "holds no images", f"put {', '.join(IMAGE_SUFFIXES)} files in it")
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a text-side row's model.pt (STUDY/methods/<row>/model.pt)")
    parser.add_argument("--image", required=True, help="the query image")
    parser.add_argument("--add", nargs="*", default=[], help="words whose concepts the query gains")
    parser.add_argument("--remove", nargs="*", default=[], help="words whose concepts the query loses")
    parser.add_argument("--gallery", required=True, help="a folder of images to rank")
    parser.add_argument("--top", type=int, default=10)
    a = parser.parse_args(argv)
    ranked = rank_gallery(JointRow.load(a.model), Path(a.image), gallery_of(Path(a.gallery)), a.add, a.remove)
    for rank, (path, score) in enumerate(ranked[:a.top], 1):
        print(f"{rank:3d}  {score:+.4f}  {path}")


if __name__ == "__main__":
    run_cli(main)
