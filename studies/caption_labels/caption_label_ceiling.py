"""How much of a caption label is about the image? Retrieval by the scenes' ground-truth attributes.

Ranks a caption config's test queries by embeddings built from the synthetic set's ``attributes``
(what a perfect vision model could know) and scores them with the label distance of that config,
as the stage-one tables do (nDCG@10, Eq. 12). If ground truth barely beats a random ranking, the label
measures how the captions are worded rather than what the images hold, and no image model can learn
it. This is how the demo's caption labels were chosen (README, *Caption-aware labels*): run it on the
independent sweep set, e.g.::

    python -m studies.caption_labels.caption_label_ceiling studies/demo_sweeps/configs/demo_caption_lr_sweep.yaml \\
        out_dir=runs/demo/ceiling
    python -m studies.caption_labels.caption_label_ceiling studies/demo_sweeps/configs/demo_caption_lr_sweep.yaml \\
        out_dir=runs/demo/ceiling_w2v \\
        "captions.vectors=''" captions.w2v_dim=50 captions.w2v_epochs=20   # old labels: Word2Vec on the captions

Only the synthetic caption set records attributes; prints a markdown table. When the config's study has run
(``OUT_DIR/retrieval/*.npz``, on the same queries), it then prints each trained row's share of the gap from the
baseline row (Img) to the label ceiling, the best of the ground-truth rows: a share of 1 is everything an image
model could learn of this label, where the stage-one tables' share of the gap to the Oracle (the labels
themselves) can never reach 1. Those shares are also written to ``OUT_DIR/ceiling_shares.json``
(studies/caption_labels/ceiling_seeds.py sums them up over seeds).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli
from embedder.config import load_config
from embedder.retrieval import ndcg_at_k, oracle_ranking, retrieve
from embedder.retrieval_report import load_rows
from embedder.spaces import word_vectors
from embedder.rows import self_columns
from embedder.track import prepare_track

K = 10
WORD_PAIRS = (("red", "blue"), ("left", "right"), ("circle", "square"), ("two", "three"), ("purple", "violet"))
"""Words the captions use in the same slot: do the label's vectors tell them apart (synonyms aside)?"""
ROWS = (("shape", "colour"), ("shape", "colour", "object"), ("shape", "colour", "object", "count"),
        ("shape", "colour", "object", "size", "count", "background"))


def attribute_vectors(attributes: list[dict], groups: tuple[str, ...]) -> np.ndarray:
    """[N, V] one column per (group, value) seen: the scene's attribute set as a vector."""
    vocab = sorted({(g, v) for a in attributes for g in groups for v in a[g]})
    col = {key: i for i, key in enumerate(vocab)}
    out = np.zeros((len(attributes), len(vocab)))
    for i, a in enumerate(attributes):
        for g in groups:
            out[i, [col[(g, v)] for v in a[g]]] = 1.0
    return out


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if {"-h", "--help"} & set(argv):
        print(__doc__.strip())
        return
    if not argv:
        raise SystemExit(__doc__)
    cfg = load_config(argv[0], argv[1:])
    track = prepare_track(cfg)
    attributes = track.eval_records.attributes
    if attributes is None:
        raise CapawareError(cfg.data.root, "the caption set records no scene attributes",
                            "run this on a synthetic caption set (python -m capdata.synthetic captions)")
    q, db = track.query_idx, track.db_idx
    own = self_columns(track, q)
    dist = track.eval_space.pairwise(q, db).astype(np.float64)  # every query-database label distance
    dist[np.arange(len(q)), own] = np.inf
    ideal = np.take_along_axis(dist, oracle_ranking(dist, K), 1)

    def score(emb: np.ndarray) -> float:
        got = np.take_along_axis(dist, retrieve(emb[q], emb[db], K, exclude_self=own), 1)
        return float(ndcg_at_k(got, ideal)[-1])

    scores = {}
    rand = float(np.mean([score(np.random.default_rng(s).normal(size=(len(attributes), 8))) for s in range(5)]))
    print(f"Ground-truth attribute retrieval under the labels of {argv[0]} {' '.join(argv[1:])}\n")
    print(f"| embedding | nDCG@{K} | share of the random-to-Oracle gap |\n|---|---:|---:|")
    print(f"| random (mean of 5) | {rand:.3f} | 0% |")
    for groups in ROWS:
        s = scores[" + ".join(groups)] = score(attribute_vectors(attributes, groups))
        print(f"| {' + '.join(groups)} | {s:.3f} | {(s - rand) / (1 - rand):.0%} |")
    print(f"\n{len(q)} queries, {len(db)} database images; Oracle = 1.")
    ret_dir = Path(cfg.out_dir) / "retrieval"
    rows = load_rows(ret_dir) if ret_dir.is_dir() else {}
    names = [n for n in rows if n != "Oracle"]  # study order: Oracle, the baseline (Img), the trained rows
    if len(names) > 1:
        ceiling_name = max(scores, key=scores.get)
        ceiling, base = scores[ceiling_name], rows[names[0]]["ndcg"][K - 1]
        print(f"\nShare of the {names[0]}-to-ceiling nDCG@{K} gap (ceiling: {ceiling_name}, {ceiling:.3f}; rows from "
              f"{ret_dir}):\n\n| row | nDCG@{K} | share of the gap to the ceiling | share of the gap to the Oracle |"
              "\n|---|---:|---:|---:|")
        shares = {}
        for n in names:
            v = rows[n]["ndcg"][K - 1]
            shares[n] = {"ndcg": v, "ceiling_share": (v - base) / (ceiling - base),
                         "oracle_share": (v - base) / (1 - base)}
            print(f"| {n} | {v:.3f} | {shares[n]['ceiling_share']:+.0%} | {shares[n]['oracle_share']:+.0%} |")
        write_text(Path(cfg.out_dir) / "ceiling_shares.json", json.dumps(
            {"ceiling": ceiling_name, "ceiling_ndcg": ceiling, "seed": cfg.seed, "rows": shares}, indent=1))
    kv = word_vectors(cfg, None, Path(cfg.out_dir) / "word_vectors.kv")  # loaded or cached by prepare_track
    print("Word-vector cosines: " + ", ".join(f"{a}/{b} {kv.similarity(a, b):.2f}" for a, b in WORD_PAIRS
                                              if a in kv and b in kv) + ".")


if __name__ == "__main__":
    run_cli(main)
