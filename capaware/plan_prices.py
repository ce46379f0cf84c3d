"""What each step of a plan costs: timed on this machine (capaware.plan_probes), or read from a benchmark's
stored figures for the machine the run will use (``capaware plan --figures FILE``), such as a GPU this machine
does not have. A figures file (benchmarks/results/plan_figures_*.json) names its machine and its source, and
holds images/s of the stage-one and feature trunks and seconds of the captioners' XE steps. Work it has no
figure for (SCST steps, decoding) is priced at this machine's probe scaled by the file's XE step over this
machine's, and said so in the plan's notes; a command's start and Java scoring stay this machine's (host work).
"""
from __future__ import annotations

import json
from pathlib import Path

from capaware import plan_probes as probe
from capcore.errors import CapawareError


class Prices:
    def __init__(self, device: str, figures: str | None = None):
        self.device, self.notes = device, []
        self.figures = json.loads(Path(figures).read_text()) if figures else None
        self.machine = self.figures["machine"] if self.figures else None
        if self.figures:
            self.notes.append(f"step figures of {self.machine} from {self.figures['source']}")

    def trunk(self, arch: str, batch: int, size: int, train: bool, precision: str, freeze: str = "none",
              threads: int = 1) -> float:
        if self.figures is None:
            return probe.trunk_seconds(arch, batch, size, train, precision, self.device, freeze, threads)
        rows = [r for r in self.figures["trunk"] if r["arch"] == arch and r["train"] == train]
        if not rows:
            raise CapawareError(self.figures["source"], f"no {'training' if train else 'forward'} figure for {arch}",
                                "add one from benchmarks/bench_gpu.py, or plan without --figures")
        r = min(rows, key=lambda r: abs(r["size"] - size))
        return batch * (size / r["size"]) ** 2 / r["images_per_s"]  # a trunk's work grows with its pixels

    def captioner(self, core: str, sizes: tuple, vocab: int, batch: int, seq_per_img: int, max_len: int, kind: str,
                  samples: int = 5, threads: int = 1) -> float:
        here = probe.captioner_seconds(core, sizes, vocab, batch, seq_per_img, max_len, kind, samples, self.device,
                                       threads)
        if self.figures is None:
            return here
        rows = [r for r in self.figures["captioner"] if r["core"] == core]
        if not rows:
            raise CapawareError(self.figures["source"], f"no XE step figure for the {core} captioner",
                                "add one from benchmarks/bench_gpu.py, or plan without --figures")
        xe = rows[0]["seconds"] * batch / rows[0]["batch"]
        if kind == "xe":
            return xe
        note = f"{kind} steps: this machine's {kind} / XE time ratio times the figures' XE step"
        if note not in self.notes:
            self.notes.append(note)
        ratio = here / probe.captioner_seconds(core, sizes, vocab, batch, seq_per_img, max_len, "xe", samples,
                                               self.device, threads)
        return xe * ratio

    def joint(self, sizes: tuple, vocab: int, batch: int, max_len: int, threads: int = 1) -> float:
        """A joint-space step: this machine's probe (a figures file has no joint figure yet; said in the notes)."""
        if self.figures is not None:
            note = "joint-space steps: this machine's probe (the figures file has none)"
            if note not in self.notes:
                self.notes.append(note)
        return probe.joint_seconds(sizes, vocab, batch, max_len, self.device, threads)

    def retrieval(self, sizes: tuple, vocab: int, images: int, captions: int, max_len: int, threads: int = 1) -> float:
        """The self-retrieval reward's share of an SCST step: this machine's probe, as the joint step's."""
        return probe.retrieval_seconds(sizes, vocab, images, captions, max_len, self.device, threads)

    def process(self) -> float:
        return probe.process_seconds()

    def scoring(self, images: int) -> float:
        return probe.scoring_seconds(images)
