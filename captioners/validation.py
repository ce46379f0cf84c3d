"""Captions for a whole split and their corpus CIDEr-D: what every trainer validates with and what
``captioners.predict`` and ``eval.grounding`` decode with.

The score is pycocoevalcap's own CIDEr-D (not rl/cider.py's vectorised reward), so a val number in
``history.json`` is the number the evaluation stage would print for the same captions.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from capdata.captions import read_captions
from captioners.data import CaptionDataset, eval_batches, loader, on_device
from captioners.decoding import decode
from captioners.model import Captioner
from captioners.prepro import Labels, decode_sequence


def validation_refs(json_path: str, labels: Labels, dataset: CaptionDataset, vocab: list[str],
                    fmt: str | None = None) -> dict[int, list[str]]:
    """Reference captions of the validation images: the json's full token lists (not the truncated,
    UNK-mapped labels) when the json is there; the labels otherwise."""
    ids = set(int(i) for i in dataset.image_ids)
    if json_path and Path(json_path).is_file():
        rec = read_captions(json_path, fmt)
        return {int(i): [" ".join(t) for t in caps] for i, caps in zip(rec.image_ids, rec.captions) if int(i) in ids}
    return {int(labels.image_ids[j]): [decode_sequence(vocab, s) for s in labels.captions_of(j)]
            for j in dataset.label_ix}


def corpus_cider_d(preds: dict[int, str], refs: dict[int, list[str]]) -> tuple[float, np.ndarray]:
    """CIDEr-D (pycocoevalcap's Cider: clipped counts, Gaussian length penalty, sigma 6; document
    frequencies from these references) on already tokenised, lower-case captions."""
    from pycocoevalcap.cider.cider_scorer import CiderScorer

    scorer = CiderScorer(n=4, sigma=6.0)
    for image_id, caption in preds.items():
        scorer += (caption, refs[image_id])
    score, scores = scorer.compute_score()
    return float(score), scores


def corpus_bleu4(preds: dict[int, str], refs: dict[int, list[str]]) -> float:
    """Corpus BLEU-4 (pycocoevalcap's Bleu) on the same tokenised captions as corpus_cider_d."""
    from pycocoevalcap.bleu.bleu import Bleu

    ids = list(preds)
    score, _ = Bleu(4).compute_score({i: refs[i] for i in ids}, {i: [preds[i]] for i in ids}, verbose=0)
    return float(score[3])


@torch.no_grad()
def generate(model: Captioner, dataset: CaptionDataset, vocab: list[str], device, batch_size: int = 100,
             max_len: int = 16, method: str = "greedy", beam_size: int = 1, temperature: float = 1.0,
             generator=None, keep_attention: bool = False, progress: bool = False, num_workers: int = 0):
    """Captions for every image of ``dataset``: {image_id: caption}, and attention rows if asked; read through
    the training loader (``num_workers`` processes)."""
    model.eval()
    preds, attention = {}, []
    batches = eval_batches(len(dataset), batch_size)
    for batch in tqdm(loader(dataset, batches, num_workers, torch.device(device)), total=len(batches), desc="decode",
                      disable=not progress, leave=False):
        dec = decode(model, *on_device(batch, device), method, beam_size, max_len, temperature, generator)
        for k, image_id in enumerate(batch["image_id"].tolist()):
            preds[image_id] = decode_sequence(vocab, dec.seq[k].tolist())
            if keep_attention:
                attention.append((image_id, dec.seq[k].cpu().numpy(), dec.alpha[k].float().cpu().numpy()))
    return preds, attention
