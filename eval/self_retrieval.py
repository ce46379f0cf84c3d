"""Self-retrieval R@1/5/10 of each captioner run's generated test captions (Liu et al. 2018, Table 4):
``python -m eval.self_retrieval RUN... --joint BEST.pt [--joint BEST.pt ...] [--split test]``.

Each RUN is a captioner run folder (XE or SCST) with its ``preds_<split>.json`` and ``.meta.json``
(captioners.predict). It is scored in the joint space trained on its own features file: of the ``--joint`` models
(the joint stage's best.pt, one per feature set), the one whose card names the features file the meta names. A run
with none is left out with one line saying so. Written into the run folder, ``self_retrieval_<split>.json``::

    {"r1", "r5", "r10", "medr", "meanr", "chance_r1", "n_images", "split", "joint", "joint_sha256", "features",
     "preds_sha256", "per_image": [{"image_id", "rank", "retrieved"}]}

``rank`` is 0-based (0: the caption finds its own image first), ``retrieved`` the image id it finds first: the
per-image records a study pairs across arms. Results table 1 (eval.reporting.results_table) shows R@1/5/10 beside
the run's unique and novel captions.
"""
from __future__ import annotations

import argparse
import json
from functools import lru_cache
from pathlib import Path

from capcore.atomic import write_text
from capcore.checkpoint import file_sha256
from capcore.errors import CapawareError, run_cli
from capcore.run_layout import CaptionerDir
from eval.caption_refs import load_preds
from joint.data import features_of
from joint.loading import load_joint, weights_sha256
from joint.self_retrieval import caption_ids, self_retrieval


def score_run(run: Path, joints: dict[str, tuple], split: str = "test") -> dict | None:
    """The run's record, or None when no joint model was trained on its features."""
    d = CaptionerDir(run)
    meta_file = d.preds(split).with_name(d.preds(split).stem + ".meta.json")
    if not meta_file.is_file():
        raise CapawareError(meta_file, "predictions meta not found", "decode the run with captioners.predict")
    features = str(Path(json.loads(meta_file.read_text())["features"]).resolve())
    found = matching_joint(features, joints)
    if found is None:
        return None
    (model, card), joint_path = found
    record = score_preds(load_preds(d.preds(split)), features, model, card, split)
    return {**record, "joint": str(joint_path), "joint_sha256": weights_sha256(joint_path),
            "preds_sha256": file_sha256(d.preds(split))}


def score_preds(preds: dict[int, str], features: str | Path, model, card, split: str = "test") -> dict:
    """Self-retrieval of these captions (one per image) among their images, in a loaded joint space."""
    image_ids = sorted(preds)
    feats = features_of(features, image_ids, card.model_args["source"], split)
    result = self_retrieval(model, feats, caption_ids([preds[i] for i in image_ids], card.vocab))
    per_image = [{"image_id": int(i), "rank": int(r), "retrieved": int(image_ids[t])}
                 for i, r, t in zip(image_ids, result.ranks, result.retrieved)]
    return {**result.as_dict(), "n_images": len(image_ids), "split": split, "features": str(features),
            "per_image": per_image}


def matching_joint(features: str, joints: dict[str, tuple]) -> tuple | None:
    """The joint model trained on this features file: by path, else (a run folder copied or moved) by content, the
    file's sha256 against each card's (read only when the paths differ: a COCO features file is hundreds of GB)."""
    if features in joints:
        return joints[features]
    if not Path(features).is_file():
        return None
    sha = _content_sha256(features)
    return next((j for j in joints.values() if j[0][1].features_sha256 == sha), None)


@lru_cache(maxsize=None)
def _content_sha256(path: str) -> str:
    """Read once per file and process: the runs of one feature set share their features file."""
    return file_sha256(path)


def output_path(run: str | Path, split: str = "test") -> Path:
    return Path(run) / f"self_retrieval_{split}.json"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="captioner run folders")
    parser.add_argument("--joint", action="append", required=True, help="a joint stage's best.pt (repeatable)")
    parser.add_argument("--split", default="test")
    a = parser.parse_args(argv)
    joints = {}
    for path in a.joint:
        model, card = load_joint(path)
        joints[str(Path(card.features).resolve())] = ((model, card), Path(path).resolve())
    for run in a.runs:
        record = score_run(Path(run), joints, a.split)
        if record is None:
            print(f"self-retrieval: {run}: no joint model was trained on its features; left out")
            continue
        write_text(output_path(run, a.split), json.dumps(record, indent=0))
        print(f"self-retrieval: {run}: R@1 {record['r1']:.1f}  R@5 {record['r5']:.1f}  R@10 {record['r10']:.1f} "
              f"(chance R@1 {record['chance_r1']:.1f}, {record['n_images']} images)")


if __name__ == "__main__":
    run_cli(main)
