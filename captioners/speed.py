"""``train.compile``: torch.compile for the per-word part of a captioner.

A training step runs the core once per word (16 times or so), and on a CPU most of its time goes to
the attention's [rows, regions, att_hid] tensors (add, tanh, score, and their gradients), which eager
PyTorch writes to and reads back from memory several times per word. Compiling the core lets
inductor fuse them into a few loops. The weights and state_dict are untouched (checkpoints stay
interchangeable); the first steps pay the compilation (benchmarks/bench_vs_selfcritical.py prints it).
"""
from __future__ import annotations


def apply_compile(model) -> None:
    """Compile ``model``'s core in place."""
    model.core.compile()
