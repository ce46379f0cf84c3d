"""Greedy, sampling and batched beam-search decoding, written once for every core.

They drive a model only through ``encode(fc, att)``, ``init_state(n)``, ``select_state(state, rows)`` and
``step(words, enc, state)``, so they work for every core (captioners/cores.py) without knowing its state.
A sequence's score is the sum of its words' log-probabilities plus that of the EOS ending it; a
sequence cut at ``max_len`` words has no EOS term. Under that one definition beam search with beam 1
is greedy decoding, and a beam wide enough to hold every prefix is exhaustive search.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

METHODS = ("greedy", "sample", "beam")


@dataclass
class Decoded:
    seq: torch.Tensor  # [B, T] word ids, 0 after the end
    logprob: torch.Tensor  # [B] the sequence's score (see module doc)
    alpha: torch.Tensor  # [B, T, L] attention weights that produced each word (0 after the end)


def sample_loop(model, fc, att, max_len: int, temperature: float | None = None,
                generator: torch.Generator | None = None, noise: torch.Tensor | None = None,
                repeat: int = 1) -> Decoded:
    """Greedy (``temperature=None``) or sampling from softmax(logits / temperature).

    Autograd follows the caller's mode: the decoders below run it under ``no_grad``; self-critical
    training (rl/scst_loss.py) runs it with gradients, so a sample and its log-probability come from one
    forward pass. ``noise`` ([max_len, B] uniforms) samples by inverse CDF instead of ``multinomial``:
    row b's word at step t is the first whose cumulative probability reaches noise[t, b], so a row's
    sample depends on its own noise alone, whichever other rows share the batch (SCST under torchrun
    draws one global noise tensor and each process takes its rows). ``repeat`` decodes each image that
    many times in a row (SCST's samples): its features are embedded once and the embedding repeated,
    as self-critical.pytorch does, not the raw 2048-channel grid embedded ``repeat`` times."""
    B = fc.size(0) * repeat
    enc = model.encode(fc, att).repeat(repeat)
    state = model.init_state(B)
    words = torch.zeros(B, dtype=torch.long, device=fc.device)
    done = torch.zeros(B, dtype=torch.bool, device=fc.device)
    score = fc.new_zeros(B)
    seqs, alphas = [], []
    for t in range(max_len):
        logp, state, alpha = model.step(words, enc, state)
        if temperature is None:
            words = logp.argmax(-1)
        else:
            probs = torch.softmax(logp / temperature, dim=-1)
            if noise is None:
                words = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            else:
                cdf = probs.float().cumsum(-1)
                words = torch.searchsorted(cdf, noise[t].to(cdf.device, cdf.dtype).unsqueeze(1)).squeeze(1)
                words = words.clamp_(max=probs.size(-1) - 1)  # a noise above the rounded total
        live = ~done
        score = score + torch.where(live, logp.gather(1, words[:, None]).squeeze(1), score.new_zeros(()))
        words = words.masked_fill(done, 0)
        seqs.append(words)
        alphas.append(alpha * live[:, None])
        done = done | (words == 0)
        if done.all():
            break
    seq, alpha = torch.stack(seqs, 1), torch.stack(alphas, 1)
    return Decoded(_pad(seq, max_len), score, _pad(alpha, max_len))


@torch.no_grad()
def greedy(model, fc, att, max_len: int) -> Decoded:
    return sample_loop(model, fc, att, max_len)


@torch.no_grad()
def beam_search(model, fc, att, beam_size: int, max_len: int) -> Decoded:
    """Batched beam search: every image keeps ``beam_size`` hypotheses; returns each image's best.

    A finished hypothesis stays in the beam with its score fixed (its only continuation is EOS at no
    cost), so it competes with longer ones on equal terms; no length normalisation.
    """
    B, K = fc.size(0), beam_size
    enc = model.encode(fc, att).repeat(K)
    state = model.init_state(B * K)
    words = torch.zeros(B * K, dtype=torch.long, device=fc.device)
    scores = fc.new_full((B, K), float("-inf"))
    scores[:, 0] = 0.0  # all beams start identical: keep one, or the top-K would hold K copies
    done = torch.zeros(B, K, dtype=torch.bool, device=fc.device)
    seq = torch.zeros(B, K, 0, dtype=torch.long, device=fc.device)
    alphas = None
    base = torch.arange(B, device=fc.device).unsqueeze(1) * K
    for _ in range(max_len):
        logp, state, alpha = model.step(words, enc, state)
        V1 = logp.size(-1)
        logp = logp.view(B, K, V1)
        ended = logp.new_full((V1,), float("-inf"))
        ended[0] = 0.0
        logp = torch.where(done.unsqueeze(-1), ended, logp)
        top, flat = (scores.unsqueeze(-1) + logp).view(B, -1).topk(K, dim=1)
        parent, word = flat // V1, flat % V1
        rows = (base + parent).view(-1)  # [B*K] rows of the previous step each new hypothesis extends
        scores = top
        seq = torch.cat([seq.view(B * K, -1)[rows], word.view(-1, 1)], dim=1).view(B, K, -1)
        step_alpha = (alpha * (~done).view(-1, 1))[rows].unsqueeze(1)
        alphas = step_alpha if alphas is None else torch.cat([alphas[rows], step_alpha], dim=1)
        done = done.view(-1)[rows].view(B, K) | (word == 0)
        state = model.select_state(state, rows)
        words = word.view(-1)
        if done.all():
            break
    best = scores.argmax(1)
    pick = base.squeeze(1) + best
    return Decoded(_pad(seq.view(B * K, -1)[pick], max_len), scores[torch.arange(B, device=best.device), best],
                   _pad(alphas[pick], max_len))


def decode(model, fc, att, method: str = "beam", beam_size: int = 2, max_len: int = 16,
           temperature: float = 1.0, generator: torch.Generator | None = None) -> Decoded:
    if method == "greedy" or (method == "beam" and beam_size == 1):
        return greedy(model, fc, att, max_len)
    if method == "sample":
        with torch.no_grad():
            return sample_loop(model, fc, att, max_len, temperature, generator)
    if method == "beam":
        return beam_search(model, fc, att, beam_size, max_len)
    raise ValueError(f"unknown decoding method {method!r}; use one of {METHODS}")


def sequence_logprob(model, fc, att, seq: torch.Tensor, max_len: int) -> torch.Tensor:
    """Score of given sequences [B, T] under the module's definition (used to check the decoders)."""
    B = fc.size(0)
    enc = model.encode(fc, att)
    state = model.init_state(B)
    words = torch.zeros(B, dtype=torch.long, device=fc.device)
    total = fc.new_zeros(B)
    live = torch.ones(B, dtype=torch.bool, device=fc.device)
    for t in range(max_len):
        logp, state, _ = model.step(words, enc, state)
        words = seq[:, t] if t < seq.size(1) else torch.zeros_like(words)
        total = total + torch.where(live, logp.gather(1, words[:, None]).squeeze(1), total.new_zeros(()))
        live = live & (words != 0)
    return total


def _pad(x: torch.Tensor, length: int) -> torch.Tensor:
    """Zero-pad dim 1 to ``length`` (decoding stops early once every sequence has ended)."""
    if x.size(1) >= length:
        return x
    shape = list(x.shape)
    shape[1] = length - x.size(1)
    return torch.cat([x, x.new_zeros(shape)], dim=1)
