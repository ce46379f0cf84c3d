"""Caption metrics through pycocoevalcap: ``python -m eval.score_captions --preds preds.json --refs REFS --split test``.

Inputs: predictions in the COCO results format ``[{"image_id": int, "caption": str}]``; references as
a Karpathy ``dataset_*.json`` (the split's images, their ``raw`` sentences) or a COCO
``captions_*.json`` (``annotations: [{"image_id", "caption"}]``; ``--split`` is then ignored). Both
sides are PTB-tokenised (Stanford tokenizer, Java) exactly as coco-caption does, then scored with
BLEU-1..4, METEOR, ROUGE-L, CIDEr-D (pycocoevalcap's ``Cider``: clipped n-gram counts and a Gaussian
length penalty, i.e. CIDEr-D) and SPICE. A metric that cannot run here (SPICE without its CoreNLP
models, anything Java without Java) is reported as unavailable with the way to install it; the
others are still reported.

Written: ``--out`` metrics JSON::

    {"metrics": {"BLEU-1": float, ..., "BLEU-4", "METEOR", "ROUGE-L", "CIDEr-D", "SPICE": float | null},
     "unavailable": {metric: "why, and how to install"}, "notes": [...], "n_images": int,
     "n_split_images": int, "split", "preds", "refs", "preds_sha256", "config_hash" and "scst_signature"
     (from preds.meta.json, written by captioners.predict, else null; the signature says which SCST
     variant trained the model, rl/signature.py), "tokenizer", "command", "discriminativeness" (unique,
     distinct, novel captions, vocabulary, mean length, bad endings: captioners/discriminative.py)}

and with ``--per-image``: ``[{"image_id", "caption", "BLEU-1", ..., "CIDEr-D", "METEOR", "SPICE"}]``.
Values are fractions as pycocoevalcap returns them (papers print x100).

An empty (or blank) predicted caption is scored as a caption with no words, as coco-caption does:
0 on every metric for that image (BLEU-n, METEOR, ROUGE-L, CIDEr-D, and SPICE when it runs), and it
counts in the corpus averages. A prediction for an image outside the references' split, a
references file of another shape, or no Java for ``--tokenizer ptb`` stop the CLI with one line.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli
from capdata.captions import read_references
from captioners.discriminative import simple_tokenize
from eval import captions_java as jv
from eval.caption_refs import load_preds
from eval.captions_discriminative import metrics_section

METRICS = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr-D", "SPICE")
METEOR_PENDING = "pending: the pipeline's scores stage scores it for every run at once (python -m eval.meteor_pending)"
"""What a metrics file says of METEOR under ``--meteor-later`` until eval.meteor_pending fills it in."""


def check_coverage(preds: dict[int, str], refs: dict[int, list[str]], preds_path, refs_path, split: str | None) -> None:
    """Every predicted image must have references: name both files and the split when one has none."""
    unknown = sorted(set(preds) - set(refs))
    if unknown:
        where = f"split {split!r} of {refs_path}" if split else str(refs_path)
        raise CapawareError(preds_path, f"{len(unknown)} of {len(preds)} predicted image ids are not in {where} "
                            f"(e.g. {unknown[:5]})", "score against the references of the same split / dataset "
                            "(--refs, --split)")


@dataclass
class Scores:
    metrics: dict[str, float | None]
    per_image: dict[int, dict[str, float]]
    unavailable: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    tokenizer: str = ""


def _tokenize(flat: list[str], tokenizer: str) -> tuple[list[str], str]:
    """(tokens of ``flat``, the tokenizer's name for the report). PTB is what the COCO server uses, so it is
    the default and a missing Java stops here with the fix; "simple" exists for machines without Java."""
    if tokenizer == "ptb":
        if jv.java_info() is None:
            raise CapawareError("java", "no Java runtime found on PATH; the PTB tokenizer (as the COCO server uses) "
                                "is Java", f"{jv.JAVA_FIX}; or pass --tokenizer simple (no Java, METEOR and SPICE "
                                "n/a, numbers not comparable to published ones)")
        java = jv.require_java()
        return jv.ptb_tokenize(flat), f"PTB (stanford-corenlp-3.4.1, Java {java.version})"
    if tokenizer == "simple":
        return simple_tokenize(flat), "simple (Python regex; not the COCO tokenizer)"
    raise CapawareError("--tokenizer", f"unknown tokenizer {tokenizer!r}", "use ptb or simple")


def _score_meteor(out: Scores, put, ids: list[int], res: dict, gts: dict, meteor: bool | str) -> None:
    """METEOR into ``out``, or why it is unavailable: it needs Java and a JVM of its own, and a failure
    there must not cost the metrics already computed. ``meteor="later"``: left pending (METEOR_PENDING)."""
    if meteor == "later":
        out.unavailable["METEOR"] = METEOR_PENDING
    elif not meteor:
        out.unavailable["METEOR"] = "skipped (--no-meteor or CAPAWARE_METEOR=off)"
    elif jv.java_info() is None:
        out.unavailable["METEOR"] = f"no Java runtime; {jv.JAVA_FIX}"
    else:
        try:
            with jv.Meteor() as m:
                total, per = m.score([res[i][0] for i in ids], [gts[i] for i in ids])
            put("METEOR", total, per)
        except jv.MeteorError as err:
            out.unavailable["METEOR"] = f"{err}; run python -m capaware.doctor"


def _score_spice(out: Scores, put, ids: list[int], res: dict, gts: dict, spice: bool,
                 corenlp_dir: str | Path | None, spice_cache: str | Path | None) -> None:
    """SPICE into ``out``, or why it is unavailable (it needs Java and the CoreNLP models, which a machine
    may lack); its parse cache folder is created here because SPICE will not create it."""
    why = "skipped (--no-spice)" if not spice else jv.spice_unavailable(corenlp_dir)
    if why:
        out.unavailable["SPICE"] = why
        return
    cache = Path(spice_cache) if spice_cache else None
    if cache:
        cache.mkdir(parents=True, exist_ok=True)
    total, per, note = jv.spice_score(ids, [res[i][0] for i in ids], [gts[i] for i in ids],
                                      jv.corenlp_dir(corenlp_dir), cache)
    put("SPICE", total, per)
    if note:
        out.notes.append(note)


def score_captions(preds: dict[int, str], refs: dict[int, list[str]], *, meteor: bool | str = True,
                   spice: bool = True, corenlp_dir: str | Path | None = None, spice_cache: str | Path | None = None,
                   tokenizer: str = "ptb") -> Scores:
    """Score ``preds`` against ``refs`` (every predicted image must have references)."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    ids = sorted(preds)
    unknown = [i for i in ids if i not in refs]
    if unknown:
        raise CapawareError("predictions", f"{len(unknown)} predicted images have no references (e.g. {unknown[:5]})",
                            "score against the references of the same split / dataset")
    flat = [preds[i] for i in ids] + [r for i in ids for r in refs[i]]
    tokens, tok_name = _tokenize(flat, tokenizer)
    res, gts, k = {}, {}, len(ids)
    for n, i in enumerate(ids):
        res[i] = [tokens[n]]
        gts[i] = tokens[k:k + len(refs[i])]
        k += len(refs[i])

    out = Scores(metrics={m: None for m in METRICS}, per_image={i: {} for i in ids}, tokenizer=tok_name)

    def put(name: str, total: float, per) -> None:
        out.metrics[name] = float(total)
        for i, v in zip(ids, per):
            out.per_image[i][name] = float(v)

    bleu, bleu_per = Bleu(4).compute_score(gts, res, verbose=0)
    for n in range(4):
        put(f"BLEU-{n + 1}", bleu[n], bleu_per[n])
    total, per = Rouge().compute_score(gts, res)
    put("ROUGE-L", total, per)
    total, per = Cider().compute_score(gts, res)
    put("CIDEr-D", total, per)
    _score_meteor(out, put, ids, res, gts, meteor)
    _score_spice(out, put, ids, res, gts, spice, corenlp_dir, spice_cache)
    return out


def default_spice_cache() -> Path:
    return Path.home() / ".cache" / "capaware" / "spice"


def parser_of() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preds", required=True, help="COCO results JSON [{image_id, caption}]")
    parser.add_argument("--refs", required=True, help="Karpathy dataset_*.json or COCO captions_*.json")
    parser.add_argument("--split", default="test", help="Karpathy split: train (with restval) | val | test | all")
    parser.add_argument("--format", default=None, help="the caption format of --refs (capdata.captions) [found "
                        "from the file: karpathy, coco_captions, or a bare COCO captions_*.json]")
    parser.add_argument("--out", default=None, help="metrics JSON (default: PREDS_STEM.metrics.json next to --preds)")
    parser.add_argument("--per-image", default=None, help="also write per-image scores to this JSON")
    parser.add_argument("--no-meteor", action="store_true", default=os.environ.get("CAPAWARE_METEOR") == "off",
                        help="skip METEOR (its JVM loads a 62 MB paraphrase table: ~4 s); the default can come "
                             "from CAPAWARE_METEOR=off (the tests of the pipeline's orchestration set it)")
    parser.add_argument("--meteor-later", action="store_true", default=os.environ.get("CAPAWARE_METEOR") == "later",
                        help="leave METEOR to eval.meteor_pending: one METEOR for many runs (CAPAWARE_METEOR=later)")
    parser.add_argument("--no-spice", action="store_true")
    parser.add_argument("--corenlp-dir", default=None, help="folder with the CoreNLP 3.6.0 jars SPICE needs")
    parser.add_argument("--spice-cache", default=str(default_spice_cache()), help="SPICE's parse cache folder")
    parser.add_argument("--spice-no-cache", action="store_true", help="run SPICE without its LMDB cache")
    parser.add_argument("--joint", default=None, help="a joint stage's best.pt: adds the captions' self-retrieval "
                        "R@1/5/10 among their images (eval.self_retrieval), the features from the predictions' meta")
    parser.add_argument("--tokenizer", default=os.environ.get("CAPAWARE_TOKENIZER", "ptb"), choices=("ptb", "simple"),
                        help="ptb (Java, as the COCO server; default) or simple (no Java; not comparable); "
                             "the default can come from $CAPAWARE_TOKENIZER (a machine without Java)")
    return parser


def main(argv: list[str] | None = None) -> None:
    a = parser_of().parse_args(argv)

    preds = load_preds(a.preds)
    found = read_references(a.refs, a.split, a.format)
    refs, split = found.refs, found.split  # split None: a file without splits (COCO's own captions_*.json)
    check_coverage(preds, refs, a.preds, a.refs, split)
    n_split = len(refs) if split else len(set(preds) & set(refs))
    meteor = False if a.no_meteor else "later" if a.meteor_later else True
    s = score_captions(preds, refs, meteor=meteor, spice=not a.no_spice, corenlp_dir=a.corenlp_dir,
                       spice_cache=None if a.spice_no_cache else a.spice_cache, tokenizer=a.tokenizer)
    if split and len(preds) < n_split:
        s.notes.append(f"predictions cover {len(preds)} of the {n_split} {a.split} images")
    meta_file = Path(a.preds).with_name(Path(a.preds).stem + ".meta.json")
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    args = argv if argv is not None else sys.argv[1:]
    command = " ".join(shlex.quote(x) for x in ["python", "-m", "eval.score_captions", *args])
    report = {"metrics": {m: _finite(v) for m, v in s.metrics.items()}, "unavailable": s.unavailable,
              "notes": s.notes, "n_images": len(preds),
              "n_split_images": n_split, "split": split, "caption_format": found.fmt,
              "preds": str(Path(a.preds).resolve()), "refs": str(Path(a.refs).resolve()),
              "preds_sha256": hashlib.sha256(Path(a.preds).read_bytes()).hexdigest(),
              "config_hash": meta.get("config_hash"), "scst_signature": meta.get("scst_signature"),
              "tokenizer": s.tokenizer, "command": command}
    report["discriminativeness"] = metrics_section(preds, a.refs, a.format)
    if a.joint:
        report["self_retrieval"] = self_retrieval_section(preds, meta, a.joint, a.preds, split or a.split)
    out = Path(a.out) if a.out else Path(a.preds).with_name(Path(a.preds).stem + ".metrics.json")
    write_text(out, json.dumps(report, indent=1, allow_nan=False))
    if a.per_image:
        rows = [{"image_id": i, "caption": preds[i], **{m: _finite(v) for m, v in s.per_image[i].items()}}
                for i in sorted(preds)]
        write_text(a.per_image, json.dumps(rows, indent=0))
    print(f"caption metrics: {len(preds)} images ({split or 'a references file without splits'}), {s.tokenizer}")
    for m in METRICS:
        v = s.metrics[m]
        print(f"  {m:8s} {'unavailable: ' + s.unavailable[m] if v is None else f'{v:.4f}'}")
    for note in s.notes:
        print(f"  note: {note}")
    if meta.get("scst_signature"):
        print(f"  SCST signature: {meta['scst_signature']}")
    if "self_retrieval" in report:
        sr = report["self_retrieval"]
        print(f"  self-retrieval: R@1 {sr['r1']:.1f}, R@5 {sr['r5']:.1f}, R@10 {sr['r10']:.1f} (chance R@1 "
              f"{sr['chance_r1']:.1f}, {sr['n_images']} images)")
    print(f"  -> {out}")


def self_retrieval_section(preds: dict[int, str], meta: dict, joint: str, preds_path: str, split: str) -> dict:
    """``--joint``: the captions' self-retrieval in that joint space, its features the file the predictions' meta
    names (refused in one line when the joint model was trained on another)."""
    from eval.self_retrieval import matching_joint, score_preds
    from joint.loading import load_joint, weights_sha256

    if not meta.get("features"):
        raise CapawareError(preds_path, "no .meta.json naming the features of these captions",
                            "decode with python -m captioners.predict (it writes the meta)")
    features = str(Path(meta["features"]).resolve())
    model, card = load_joint(joint)
    if matching_joint(features, {str(Path(card.features).resolve()): ((model, card), joint)}) is None:
        raise CapawareError(joint, f"trained on {card.features}, not on these captions' features {features}",
                            "pass the joint model trained on the same features file")
    record = score_preds(preds, features, model, card, split)
    return {**record, "joint": str(Path(joint).resolve()), "joint_sha256": weights_sha256(joint)}


def _finite(v: float) -> float | None:
    return None if v is None or not np.isfinite(v) else v


if __name__ == "__main__":
    run_cli(main)
