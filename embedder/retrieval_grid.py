"""Qualitative retrieval grids (the paper's Fig. 4/6/7): a query and its top results per method.

Reads a study's retrieval folder: the per-row ``*.npz`` files and ``items.json`` (image path and,
for the caption track, one caption per evaluation item). One PNG per query; rows are methods, the
first column the query, each result titled with its label distance (and captioned when available).
"""
from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path

import numpy as np
from PIL import Image

from capcore.run_layout import ITEMS


def load_retrievals(ret_dir: Path) -> list[dict]:
    rows = []
    for path in sorted(Path(ret_dir).glob("*.npz")):
        with np.load(path) as f:
            rows.append({"name": str(f["name"]), "order": int(f["order"]), "retrieved": f["retrieved"],
                         "dist": f["retrieved_dist"], "query_items": f["query_items"], "db_items": f["db_items"]})
    return sorted(rows, key=lambda r: r["order"])


def tile_strip(paths: list[str], gap: int = 4) -> np.ndarray:
    """The images side by side (RGB, each resized to the first's size), ``gap`` white pixels between them."""
    tiles = []
    for path in paths:
        with Image.open(path) as im:
            im = im.convert("RGB")
            size = size if tiles else im.size
            tiles.append(np.asarray(im.resize(size) if im.size != size else im))
    white = np.full((tiles[0].shape[0], gap, 3), 255, np.uint8)
    return np.concatenate([x for t in tiles for x in (t, white)][:-1], axis=1)


def write_grids(ret_dir: Path, out_dir: Path, queries: list[int], top: int = 8,
                methods: list[str] | None = None) -> list[Path]:
    """One PNG per query. Each method's row is one image strip (query, then its top results) in one axes, titled and
    captioned per tile: the same figure as an axes per tile, drawn about five times faster (a matplotlib axes costs
    more to lay out and draw than its image)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ret_dir, out_dir = Path(ret_dir), Path(out_dir)
    items = json.loads((ret_dir / ITEMS).read_text())
    rows = [r for r in load_retrievals(ret_dir) if methods is None or r["name"] in methods]
    captions = items.get("captions")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for q in queries:
        fig, axes = plt.subplots(len(rows), 1, figsize=(1.6 * (top + 1), 2.0 * len(rows) + 0.4), squeeze=False)
        for ax, row in zip(axes[:, 0], rows):
            shown = [int(row["query_items"][q])] + [int(row["db_items"][i]) for i in row["retrieved"][q, :top]]
            strip = tile_strip([items["image_paths"][item] for item in shown])
            ax.imshow(strip)
            ax.set_xticks([]), ax.set_yticks([])
            width = strip.shape[1] / len(shown)  # tile plus its share of the gaps
            for c, item in enumerate(shown):
                x = (c + 0.5) * width
                title = "query" if c == 0 else f"d={row['dist'][q, c - 1]:.2f}"
                ax.text(x, -4, title, fontsize=7, ha="center", va="bottom")
                if captions:
                    ax.text(x, strip.shape[0] + 4, "\n".join(textwrap.wrap(captions[item], 22)[:3]), fontsize=5,
                            ha="center", va="top")
            ax.set_ylabel(row["name"], fontsize=7)
        fig.subplots_adjust(left=0.06, right=0.99, top=0.96, bottom=0.04, hspace=0.5 if captions else 0.25)
        path = out_dir / f"grid_query{q}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description="Qualitative retrieval grids from a study's retrieval folder.")
    parser.add_argument("retrieval_dir")
    parser.add_argument("--out", required=True)
    parser.add_argument("--queries", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args()
    for path in write_grids(Path(args.retrieval_dir), Path(args.out), args.queries, args.top):
        print(path)


if __name__ == "__main__":
    main()
