"""Retrieval tables and curves from the per-row retrieval files a study writes.

Input: a folder of ``*.npz`` files, one per row (Oracle, Untrained, each method), each holding
``retrieved_dist [Q, K]`` (label distance of every query's k-th result) and ``ideal_dist [Q, K]``.
Output: ``retrieval.json`` (full @K curves), ``retrieval.md`` (a Markdown table at a few K),
``curves.png`` (the paper's Fig. 3: mean label distance@K and nDCG@K).
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from capcore.atomic import write_text
from embedder.retrieval import mean_label_distance_at_k, ndcg_at_k

TABLE_K = (1, 5, 10, 20, 50)
BOUNDS = ("Oracle", "Untrained")  # drawn dashed: the upper and lower bound of every plot


def load_rows(ret_dir: Path) -> dict[str, dict]:
    rows = {}
    for path in sorted(Path(ret_dir).glob("*.npz")):
        with np.load(path) as f:
            name = str(f["name"])
            rows[name] = {"order": int(f["order"]) if "order" in f else len(rows),
                          "ndcg": ndcg_at_k(f["retrieved_dist"], f["ideal_dist"]).tolist(),
                          "mean_dist": mean_label_distance_at_k(f["retrieved_dist"]).tolist(),
                          "n_queries": int(f["retrieved_dist"].shape[0]), "file": str(path)}
    return dict(sorted(rows.items(), key=lambda kv: (kv[1]["order"], kv[0])))


def markdown_table(rows: dict[str, dict], title: str) -> str:
    k_max = min(len(r["ndcg"]) for r in rows.values())
    ks = [k for k in TABLE_K if k <= k_max]
    head = ["method"] + [f"nDCG@{k}" for k in ks] + [f"dist@{k}" for k in ks]
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in rows.items():
        cells = [f"{r['ndcg'][k - 1]:.3f}" for k in ks] + [f"{r['mean_dist'][k - 1]:.3f}" for k in ks]
        lines.append("| " + " | ".join([name] + cells) + " |")
    q = next(iter(rows.values()))["n_queries"]
    lines += ["", f"{q} queries; nDCG uses r = -log2(d + 1) (Kim et al. 2019, Eq. 12); "
                  "dist = mean label distance of the top K."]
    gap = gap_line(rows)
    return "\n".join(lines + ([gap] if gap else []))


def gap_closed(rows: dict[str, dict], k: int = 10) -> tuple[str, dict[str, float]] | None:
    """(baseline row, {trained row: share of the baseline-to-Oracle nDCG@k gap it closes}).

    The baseline is the untrained (or pretrained) network, the first row after the Oracle; a share
    of 1 would be the Oracle's ranking, 0 no change, < 0 worse than before training.
    """
    names = [n for n in rows if n != "Oracle"]  # rows come in study order: Oracle, baseline, methods
    if len(names) < 2 or any(len(rows[n]["ndcg"]) < k for n in names):
        return None
    base = rows[names[0]]["ndcg"][k - 1]
    if base >= 1:
        return None
    return names[0], {n: (rows[n]["ndcg"][k - 1] - base) / (1 - base) for n in names[1:]}


def gap_line(rows: dict[str, dict], k: int = 10) -> str | None:
    closed = gap_closed(rows, k)
    if closed is None:
        return None
    base, shares = closed
    best = max(shares, key=shares.get)
    return (f"Share of the {base}-to-Oracle nDCG@{k} gap closed: "
            + ", ".join(f"{n} {v:+.0%}" for n, v in shares.items()) + f"; best trained row: {best}.")


def dims_table(rows: dict[str, dict], k: int = 10) -> str | None:
    """Fig. 5 as a table: nDCG@k of each method (rows) at each embedding dimension (columns)."""
    grid: dict[str, dict[int, float]] = {}
    for name, r in rows.items():
        match = re.fullmatch(r"(.+) (\d+)-D", name)
        if match and len(r["ndcg"]) >= k:
            grid.setdefault(match.group(1), {})[int(match.group(2))] = r["ndcg"][k - 1]
    if not grid:
        return None
    dims = sorted({d for cols in grid.values() for d in cols})
    lines = [f"### nDCG@{k} by embedding dimension", "", "| method | " + " | ".join(f"{d}-D" for d in dims) + " |",
             "|" + "---|" * (len(dims) + 1)]
    for method, cols in grid.items():
        lines.append(f"| {method} | " + " | ".join(f"{cols[d]:.3f}" if d in cols else "-" for d in dims) + " |")
    return "\n".join(lines)


def plot_curves(rows: dict[str, dict], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, r in rows.items():
        ks = np.arange(1, len(r["ndcg"]) + 1)
        style = "--" if name in BOUNDS else "-"
        axes[0].plot(ks, r["mean_dist"], style, label=name)
        axes[1].plot(ks, r["ndcg"], style, label=name)
    axes[0].set(xlabel="K", ylabel="mean label distance", title=f"{title}: mean distance@K")
    axes[1].set(xlabel="K", ylabel="nDCG", title=f"{title}: nDCG@K")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(ret_dir: Path, out_dir: Path, title: str, command: str | None = None) -> str:
    """Write json/md/png into ``out_dir``; return the Markdown table (printed by the CLI).

    ``command`` (the study's command line) is stored with the table, so that every number can be
    traced to the command and the per-row ``.npz`` files that made it.
    """
    rows = load_rows(ret_dir)
    if not rows:
        raise FileNotFoundError(f"{ret_dir}: no retrieval files (*.npz); run the study first")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text(out_dir / "retrieval.json", json.dumps({"title": title, "command": command, "rows": rows}, indent=1))
    table = markdown_table(rows, title)
    sweep = dims_table(rows)
    if sweep:
        table += "\n\n" + sweep
    source = f"Rows from `{ret_dir}/*.npz`" + (f", made by `{command}`." if command else ".")
    write_text(out_dir / "retrieval.md", table + "\n\n" + source + "\n")
    plot_curves(rows, out_dir / "curves.png", title)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description="Tables and curves from a study's retrieval files.")
    parser.add_argument("retrieval_dir")
    parser.add_argument("--out", required=True)
    parser.add_argument("--title", default="retrieval")
    args = parser.parse_args()
    print(write_report(Path(args.retrieval_dir), Path(args.out), args.title))


if __name__ == "__main__":
    main()
