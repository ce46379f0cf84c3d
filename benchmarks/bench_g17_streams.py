"""Gordo & Larlus's six-stream step (V+T: Eq. 1-3) against the three-stream one (V: Eq. 1), at the same batch.

``python benchmarks/bench_g17_streams.py [--arch resnet10] [--batch 50] [--anchors 4] [--size 128] [--vocab 60]
[--embed 1024] [--repeats 9] [--threads 1]``

One stage-one training step as the demo's caption rows take it (the trunk from layer4 on, the frozen prefix's maps
given, the head, the loss, backward, Adam) on random maps and tf-idf bags: the G17 (V) row, then the G17 (V+T) row,
whose extra streams are the batch members' texts through the tf-idf tower and the hinges of Eq. 2 and 3. The two are
timed in alternation; medians (min). ``--vocab``: the tower's stems (the demo's captions have about 60; COCO's tens
of thousands, where the sparse product still touches only each bag's rows).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from scipy.sparse import random as sparse_random

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capcore.cpu_isa import cpu_line  # noqa: E402
from capcore.optim import adam  # noqa: E402
from timing import median_seconds  # noqa: E402

from embedder.config import COMPANION_ROWS, TextLossConfig  # noqa: E402
from embedder.losses.method_loss import MethodLoss  # noqa: E402
from embedder.model import build_model  # noqa: E402


def row(name: str):
    spec = COMPANION_ROWS[name]
    return argparse.Namespace(name=name, loss=spec["loss"], mining=spec["mining"], margin=spec["margin"],
                              loss_args={}, text=TextLossConfig(**spec.get("text", {})))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="resnet10")
    for name, default in (("batch", 50), ("anchors", 4), ("size", 128), ("vocab", 60), ("embed", 1024),
                          ("repeats", 9), ("threads", 1)):
        p.add_argument(f"--{name}", type=int, default=default)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    bags = sparse_random(a.batch * 4, a.vocab, density=min(1.0, 12 / a.vocab), format="csr", random_state=0)
    model = build_model(a.arch, a.embed)
    prefix, rest = model.split_trunk("layer3")
    maps = prefix(torch.rand(a.batch, 3, a.size, a.size)).detach()
    anchors = torch.as_tensor(rng.choice(a.batch, a.anchors, replace=False))
    positive = torch.as_tensor(rng.random((a.anchors, a.batch)) < 0.2)
    items = torch.as_tensor(rng.choice(bags.shape[0], a.batch, replace=False))

    def stepper(name):
        criterion = MethodLoss(row(name), None, 0, bags, a.embed)
        opt = adam([*rest.parameters(), *model.head.parameters(), *criterion.parameters()], fused=False, lr=1e-4)

        def step():
            loss = criterion(model.head(rest(maps)), anchors, torch.zeros(a.anchors, a.batch), positive, items)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return step

    (v, vt) = median_seconds([stepper("G17 (V)"), stepper("G17 (V+T)")], a.repeats)
    print(f"# G17 step, three streams (V) against six (V+T): {cpu_line()}, {a.threads} thread(s), "
          f"torch {torch.__version__}")
    print(f"{a.arch} from layer4, {a.batch} images at {a.size} px, {a.anchors} anchors, {a.embed}-D, "
          f"{a.vocab} stems, float32")
    print("| step | median ms (min) |\n|---|---:|")
    for name, (med, low) in (("(V): Eq. 1", v), ("(V+T): Eq. 1-3", vt)):
        print(f"| {name} | {med * 1000:.1f} ({low * 1000:.1f}) |")
    print(f"six streams / three: x{vt[0] / v[0]:.2f}")


if __name__ == "__main__":
    main()
