"""Gordo & Larlus 2017's Table 2 for a finished caption study on the tf-idf label space: ``python -m
embedder.g17_table STUDY_DIR [--r-max 100] [--out FILE.json]`` (issue #67).

Each row of the study (its retrieval npz keeps the query and database embeddings) ranks the whole evaluation split
for every query, the query removed, and is scored against the tf-idf proxy by ``embedder.proxy_ranking``: NDCG@R
and PCC@R for R = 1..r_max and their AUCs. The rows, named as the paper names them (training, query):

- Random (5 draws): random scores, mean ± sd over the draws;
- the untrained visual baseline (, V): the study's Img row (the class-pretrained trunk);
- each trained row: (V, V) when it trained without the text losses, (V+T, V) with them, WSABIE-like (Eq. 2 alone);
- and for each row with a text tower, (V+T, V+T): the query is its image's and its captions' joint embedding,
  normalise(φq + θq), the database images alone (φ), as their Table 2 queries "by image + text".

The study's queries are its own draw (``eval.n_queries``); the paper's is 1k queries against the split.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from capcore.atomic import write_text
from capcore.checkpoint import load_checkpoint
from capcore.errors import CapawareError, run_cli
from capcore.run_layout import StudyDir
from embedder.config import load_config, slug, text_on
from embedder.proxy_ranking import proxy_curves
from embedder.track import prepare_track
from joint.tfidf_text import TfidfTextEncoder, scipy_to_torch

RANDOM_DRAWS = 5


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def scored(query: np.ndarray, db: np.ndarray, relevance: np.ndarray, exclude, r_max: int) -> dict:
    c = proxy_curves(unit(query) @ unit(db).T, relevance, r_max, exclude)
    return {"ndcg_auc": c.ndcg_auc, "pcc_auc": c.pcc_auc, "ndcg": c.ndcg.tolist(), "pcc": c.pcc.tolist()}


def joint_query(model_pt: Path, phi: np.ndarray, bags) -> np.ndarray:
    """normalise(φq + θq) with the row's own tower (its checkpoint's criterion state)."""
    state = load_checkpoint(model_pt)["criterion"]
    weight = state["text.tower.weight"]
    tower = TfidfTextEncoder(*weight.shape)
    tower.load_state_dict({"weight": weight})
    with torch.no_grad():
        theta = tower(scipy_to_torch(bags)).numpy()
    return unit(unit(phi.astype(np.float64)) + theta)


def g17_rows(study: Path, r_max: int) -> list[dict]:
    where = StudyDir(study)
    cfg = load_config(where.config)
    if cfg.captions.space != "tfidf":
        raise CapawareError(where.config, "Gordo & Larlus's table scores against the tf-idf proxy",
                            "run the study with captions.space: tfidf")
    track = prepare_track(cfg)
    space = track.eval_space
    relevance = np.asarray((space.vectors[track.query_idx] @ space.vectors[track.db_idx].T).todense())
    position = {int(item): j for j, item in enumerate(track.db_idx)}
    exclude = np.array([position.get(int(q), -1) for q in track.query_idx])
    exclude = exclude if (exclude >= 0).all() else None
    rng = np.random.default_rng(cfg.seed)
    draws = [proxy_curves(rng.random(relevance.shape), relevance, r_max, exclude) for _ in range(RANDOM_DRAWS)]
    rows = [{"row": f"Random (x{RANDOM_DRAWS})", "ndcg_auc": float(np.mean([d.ndcg_auc for d in draws])),
             "ndcg_auc_sd": float(np.std([d.ndcg_auc for d in draws], ddof=1)),
             "pcc_auc": float(np.mean([d.pcc_auc for d in draws])),
             "pcc_auc_sd": float(np.std([d.pcc_auc for d in draws], ddof=1))}]
    with np.load(where.retrieval / "untrained.npz") as f:
        rows.append({"row": f"Visual baseline (, V): {f['name']}",
                     **scored(f["query_emb"], f["db_emb"], relevance, exclude, r_max)})
    for m in cfg.methods:
        with np.load(where.retrieval / f"{slug(m.name)}.npz") as f:
            qe, de = f["query_emb"].astype(np.float64), f["db_emb"].astype(np.float64)
        kind = "WSABIE-like (V+T, V)" if m.text.visual == 0 else "(V+T, V)" if text_on(m.text) else "(V, V)"
        rows.append({"row": f"{m.name} {kind}", **scored(qe, de, relevance, exclude, r_max)})
        if text_on(m.text):
            q = joint_query(where.method(slug(m.name)).model, qe, space.vectors[track.query_idx])
            rows.append({"row": f"{m.name} (V+T, V+T)", **scored(q, de, relevance, exclude, r_max)})
    return rows


def markdown(rows: list[dict], r_max: int) -> str:
    lines = [f"| row | NDCG AUC | PCC AUC |  (R = 1..{r_max}; PCC from R = 2)", "|---|---:|---:|"]
    for r in rows:
        sd = (f" ± {r['ndcg_auc_sd']:.3f}", f" ± {r['pcc_auc_sd']:.3f}") if "ndcg_auc_sd" in r else ("", "")
        lines.append(f"| {r['row']} | {r['ndcg_auc']:.3f}{sd[0]} | {r['pcc_auc']:.3f}{sd[1]} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", help="a finished stage-one caption study folder (its out_dir)")
    parser.add_argument("--r-max", type=int, default=100, help="the curves' last R [100]")
    parser.add_argument("--out", default=None, help="the JSON [STUDY/results/g17_table.json]")
    a = parser.parse_args(argv)
    rows = g17_rows(Path(a.study), a.r_max)
    out = Path(a.out) if a.out else Path(a.study) / "results" / "g17_table.json"
    write_text(out, json.dumps({"r_max": a.r_max, "rows": rows}, indent=1))
    text = markdown(rows, a.r_max)
    write_text(out.with_suffix(".md"), text)
    print(text + f"-> {out}")


if __name__ == "__main__":
    run_cli(main)
