"""Self-critical sequence training, the math (Rennie et al. 2017): sampling with gradients, the two
baselines, the policy-gradient loss. Pure tensor/array code; the loop is rl/scst.py.

For a caption w^s sampled from the model, loss = -(r(w^s) - b) * log p(w^s), where log p(w^s) sums the
log-probabilities of its words *and of the EOS that ends it* (the EOS is an action too: stopping
early is what the length penalty of CIDEr-D rewards or punishes), and nothing after the EOS.
"""
from __future__ import annotations

import numpy as np
import torch

from captioners import decoding
from captioners.decoding import Decoded


def sample_captions(model, fc: torch.Tensor, att: torch.Tensor, n: int, max_len: int, temperature: float = 1.0,
                    generator: torch.Generator | None = None, positions: np.ndarray | None = None,
                    global_images: int | None = None) -> Decoded:
    """``n`` samples per image (rows image-major: image 0's n, then image 1's, ...).

    This is the decoders' shared sampler (captioners.decoding.sample_loop) with autograd on, so the
    sample and its log-probability come from the same forward pass (same dropout masks): its
    ``logprob`` is exactly log p(w^s) as defined above. With ``temperature`` != 1 the samples come from
    the sharpened distribution but the log-probability stays the model's.

    The uniforms behind the samples are drawn from ``generator`` for a whole global batch of
    ``global_images`` images, every step at once (a fixed number of draws per batch, however early
    the captions end); these images are the batch's ``positions``. One process holds every position;
    under torchrun each process holds its share and samples exactly what one process would for them.
    """
    B = fc.size(0)
    positions = np.arange(B) if positions is None else np.asarray(positions)
    global_images = B if global_images is None else global_images
    noise = torch.rand(max_len, global_images * n, generator=generator, device=generator.device if generator else None)
    rows = torch.as_tensor((positions[:, None] * n + np.arange(n)).reshape(-1), device=noise.device)
    with torch.enable_grad():
        return decoding.sample_loop(model, fc, att, max_len, temperature, generator, noise[:, rows], repeat=n)


@torch.no_grad()
def greedy_captions(model, fc: torch.Tensor, att: torch.Tensor, max_len: int) -> torch.Tensor:
    """The test-time caption of each image (greedy, eval mode: no dropout), the paper's baseline."""
    was_training = model.training
    model.eval()
    try:
        return decoding.greedy(model, fc, att, max_len).seq
    finally:
        model.train(was_training)


def mean_of_others(rewards: np.ndarray) -> np.ndarray:
    """[B, n] rewards of n samples per image -> each sample's baseline: the mean of the image's other
    n - 1 samples (leave-one-out, so a sample's baseline does not depend on its own reward)."""
    rewards = np.asarray(rewards, dtype=np.float64)
    n = rewards.shape[1]
    if n < 2:
        raise ValueError("the mean-of-others baseline needs at least 2 samples per image")
    return (rewards.sum(1, keepdims=True) - rewards) / (n - 1)


def baseline(kind: str, rewards: np.ndarray, greedy_rewards: np.ndarray | None = None) -> np.ndarray:
    """Each sample's baseline, [B, n]: ``greedy`` = its image's greedy-caption reward (``greedy_rewards``
    [B]), ``mean`` = the mean reward of its image's other samples."""
    rewards = np.asarray(rewards, dtype=np.float64)
    if kind == "greedy":
        if greedy_rewards is None:
            raise ValueError("the greedy baseline needs the greedy captions' rewards")
        return np.repeat(np.asarray(greedy_rewards, np.float64).reshape(-1, 1), rewards.shape[1], 1)
    if kind == "mean":
        return mean_of_others(rewards)
    raise ValueError(f"unknown baseline {kind!r}; use greedy or mean")


def scst_loss(logprob: torch.Tensor, reward, baseline, rows: int | None = None) -> torch.Tensor:
    """-(r - b) * log p(w^s) summed over these samples and divided by ``rows`` (default: their number,
    the mean; under torchrun the global batch's sample count); reward and baseline carry no gradient."""
    adv = torch.as_tensor(np.asarray(reward, np.float64) - np.asarray(baseline, np.float64),
                          dtype=logprob.dtype, device=logprob.device)
    terms = -(adv.reshape(-1) * logprob.reshape(-1))
    return terms.mean() if rows is None else terms.sum() / rows
