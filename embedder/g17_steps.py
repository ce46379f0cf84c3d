"""Stage one's loop with Gordo & Larlus's pool mining (``train.sampler: g17_pool``; their §6.1, issue #67).

Every ``train.pool.refresh`` steps (and at the first step), a pool of ``queries`` training images and
``per_query`` of each one's relevant images (its ``train.positives`` proxy-nearest) is embedded by the current
model, and each (query, relevant) pair keeps its ``per_pair`` largest-loss irrelevant pool images
(embedder/g17_pool.py); each step then draws ``triplets`` of those candidates with the row's seeded generator and
takes the row's loss on them (Eq. 1, and Eq. 2-3 for a (V+T) row). The candidates are a buffer of the criterion, so
a checkpoint keeps them with the generator; the pool of a mining is drawn from the study's seed and the step, and the
model at a mining step is the checkpoint's when a run resumes there: a killed run resumes identical. One process.
"""
from __future__ import annotations

import numpy as np
import torch
from tqdm import tqdm

from capcore.errors import CapawareError
from embedder.g17_pool import candidates, draw_pool
from embedder.jitter import jitter
from embedder.step_loop import TrunkHead, after_step, train_mode, training_net


@torch.no_grad()
def mine(run, cfg, inputs, to_input, relevant: np.ndarray, step: int, batch: int = 128) -> torch.Tensor:
    """The candidates [T, 3] (training indices) mined with the model as it is at ``step``."""
    pool_cfg = cfg.train.pool
    pool = draw_pool(relevant, pool_cfg.queries, pool_cfg.per_query, np.random.default_rng([cfg.seed, step]))
    run.model.eval()
    net = TrunkHead(run.rest, run.model.head, run.dtype)
    emb = torch.cat([net(to_input(inputs(pool.images[s:s + batch]))).float().cpu()
                     for s in range(0, len(pool.images), batch)])
    train_mode(run)
    return torch.from_numpy(candidates(emb, pool, relevant, run.criterion.method.margin, pool_cfg.per_pair))


def take_pool_steps(run, cfg, inputs, to_input, nn_idx: np.ndarray, out, start: int, on_step=None) -> None:
    """The loop from ``start`` to ``run.total`` on mined triplets; logs, checkpoints and stops as every row's."""
    t = cfg.train
    if run.world > 1:
        raise CapawareError("train.sampler", "g17_pool mines its triplets in one process",
                            "run this row without torchrun, or with train.sampler: anchors")
    relevant, mined = nn_idx[:, :t.positives], run.criterion.loss.mined
    net = training_net(run)
    bar = tqdm(total=run.total, initial=start, desc=out.name, disable=not out.progress, leave=False)
    for step in range(start, run.total):
        if step % t.pool.refresh == 0 or len(mined.triplets) == 0:
            mined.triplets = mine(run, cfg, inputs, to_input, relevant, step)
        if len(mined.triplets) == 0:  # every pool triplet satisfied: nothing to learn from until the next mining
            loss = torch.zeros((), device=run.device)
        else:
            pick = torch.randint(len(mined.triplets), (t.pool.triplets,), generator=run.criterion.generator)
            items, rows = torch.unique(mined.triplets[pick].flatten(), return_inverse=True)
            x = jitter(to_input(inputs(items.numpy())), t.jitter, cfg.seed, step)
            loss = run.criterion.triplets(net(x), rows.view(-1, 3).to(run.device), items)
            run.opt.zero_grad(set_to_none=True)
            loss.backward()
            run.opt.step()
        run.sched.step()
        after_step(run, t, out, loss, step + 1, bar, on_step)
    bar.close()
    out.writer.close()
