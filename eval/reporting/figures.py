"""Figures eval.reporting.report draws itself (matplotlib, Agg): the Fig. 5 dimension sweep, the t-SNE map of
pose embeddings, and caption-example thumbnails. Deterministic: fixed seeds, sorted inputs."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from PIL import Image

from capdata.records import MPII_JOINTS

SWEEP_ROW = re.compile(r"(.+) (\d+)-D")  # a dimension sweep's row: "<method> <d>-D" (embedder.rows)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def sweep_grid(rows: dict[str, dict], k: int) -> tuple[list[int], dict[str, dict[int, float]]]:
    """nDCG@k per method (rows named "<method> <d>-D") and dimension, methods in table order."""
    grid: dict[str, dict[int, float]] = {}
    for name, r in rows.items():
        match = SWEEP_ROW.fullmatch(name)
        if match and len(r["ndcg"]) >= k:
            grid.setdefault(match.group(1), {})[int(match.group(2))] = float(r["ndcg"][k - 1])
    return sorted({d for cols in grid.values() for d in cols}), grid


def plot_sweep(rows: dict[str, dict], ks: list[int], baseline: str | None, path: Path, title: str) -> None:
    plt = _plt()
    fig, axes = plt.subplots(1, len(ks), figsize=(5.2 * len(ks), 3.8), squeeze=False)
    for ax, k in zip(axes[0], ks):
        dims, grid = sweep_grid(rows, k)
        for method, cols in grid.items():
            ds = [d for d in dims if d in cols]
            ax.plot(ds, [cols[d] for d in ds], "o-", label=method)
        if baseline and len(rows[baseline]["ndcg"]) >= k:
            ax.axhline(rows[baseline]["ndcg"][k - 1], ls="--", color="grey", label=baseline)
        ax.set_xscale("log", base=2)
        ax.set_xticks(dims, [str(d) for d in dims])
        ax.set(xlabel="embedding dimension", ylabel=f"nDCG@{k}", title=f"{title}: nDCG@{k}")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------ t-SNE


def label_vectors(joints: np.ndarray) -> np.ndarray:
    """[N, 32] pose label vectors: crop-frame joints, an invisible joint replaced by that joint's mean."""
    flat = joints.reshape(len(joints), -1).astype(np.float64)
    means = np.nanmean(flat, axis=0)
    means = np.where(np.isnan(means), 0.5, means)
    return np.where(np.isnan(flat), means, flat)


def first_component(vectors: np.ndarray) -> tuple[np.ndarray, str]:
    """Scores on the labels' first principal component (sign fixed: largest loading positive) and the
    three joint coordinates it loads on most, to name what the colour shows."""
    centred = vectors - vectors.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    pc = vt[0] * np.sign(vt[0][np.argmax(np.abs(vt[0]))])
    top = np.argsort(-np.abs(pc))[:3]
    names = [f"{MPII_JOINTS[i // 2] if i // 2 < len(MPII_JOINTS) else i // 2} {'xy'[i % 2]}" for i in top]
    return centred @ pc, ", ".join(f"{n} ({pc[i]:+.2f})" for n, i in zip(names, top))


def tsne(emb: np.ndarray, seed: int = 0) -> np.ndarray:
    """2-D t-SNE on one thread: sklearn's OpenMP gradient spins 100x slower on shared, busy cores."""
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    x = emb.astype(np.float64)
    with threadpool_limits(1):
        if x.shape[1] > 50 and len(x) > 50:
            x = PCA(50, random_state=seed).fit_transform(x)
        perplexity = float(min(30.0, max(2.0, (len(x) - 1) / 3.0)))
        return TSNE(2, perplexity=perplexity, init="pca", random_state=seed, n_jobs=1).fit_transform(x)


def neighbour_ratio(points: np.ndarray, labels: np.ndarray, k: int = 10) -> float:
    """Mean label distance from each point to its k nearest map neighbours, over the mean label
    distance of all pairs: 1 = the map ignores the labels, lower = label neighbours stay together."""
    from scipy.spatial.distance import cdist

    k = min(k, len(points) - 1)
    d_map = cdist(points, points)
    np.fill_diagonal(d_map, np.inf)
    nn = np.argsort(d_map, axis=1)[:, :k]
    d_lab = cdist(labels, labels)
    n = len(points)
    return float(np.take_along_axis(d_lab, nn, 1).mean() / (d_lab.sum() / (n * (n - 1))))


def plot_maps(maps: list[tuple[str, np.ndarray]], colour: np.ndarray | None, colour_name: str, path: Path) -> None:
    plt = _plt()
    fig = draw_maps(maps, colour, colour_name)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


TITLE_CHARS = 52  # a panel 5.4 inches wide holds about this many characters of 10-point title


def draw_maps(maps: list[tuple[str, np.ndarray]], colour: np.ndarray | None, colour_name: str):
    """Side-by-side 2-D maps; each title wrapped to its panel's width, so long row names never run into the
    next panel's title."""
    import textwrap

    fig, axes = _plt().subplots(1, len(maps), figsize=(5.4 * len(maps), 5.0), squeeze=False)
    for ax, (title, xy) in zip(axes[0], maps):
        sc = ax.scatter(xy[:, 0], xy[:, 1], s=9, linewidths=0,
                        **(dict(c=colour, cmap="viridis") if colour is not None else dict(c="#4a78b5")))
        ax.set_title("\n".join(textwrap.fill(line, TITLE_CHARS) for line in title.split("\n")), fontsize=10)
        ax.set_xticks([]), ax.set_yticks([])
    if colour is not None:
        fig.colorbar(sc, ax=list(axes[0]), shrink=0.8, label=colour_name)
    return fig


def thumbnail(src: Path, dest: Path, size: int = 220) -> None:
    with Image.open(src) as im:
        im = im.convert("RGB")
        im.thumbnail((size, size))
        dest.parent.mkdir(parents=True, exist_ok=True)
        im.save(dest, format="PNG")
