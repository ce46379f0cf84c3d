"""Caption images a run never saw with its exported model: ``python benchmarks/caption_own_images.py RUN``.

What issue #28 asks a user to be able to do after ``make demo``, measured: ``capaware export RUN`` (the
captioner with the best validation CIDEr-D) -> one ``.capaware`` file; a new synthetic caption set
(another generator seed, so no image of the demo) -> ``ImageCaptioner.load(file).caption(paths)``. Prints
the throughput (images/s, model loaded, warm-up excluded, median of ``--repeats`` passes over the
folder, decoding the images from disk each time), the same throughput with bfloat16 compute where
the CPU has it natively, then the captions beside each image's first reference caption, and CIDEr-D and
BLEU-4 of the captions against the new set's references (pycocoevalcap, PTB tokenizer), beside the
model's own test-split scores. Nothing here is chosen on these images.
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capaware.captioner import ImageCaptioner  # noqa: E402
from capaware.export import export  # noqa: E402
from capcore.cpu_isa import cpu_isa, cpu_line  # noqa: E402
from capdata.synthetic import generate_captions  # noqa: E402
from eval.score_captions import score_captions  # noqa: E402


def throughput(captioner: ImageCaptioner, paths: list[Path], repeats: int, batch: int) -> tuple[float, list[str]]:
    captioner.caption(paths[:batch], batch_size=batch)  # warm-up (allocators, oneDNN kernels)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        captions = captioner.caption(paths, batch_size=batch)
        times.append(time.perf_counter() - start)
    return len(paths) / statistics.median(times), captions


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="a finished pipeline run folder (runs/demo)")
    p.add_argument("--images", type=int, default=48, help="new images to caption [48]")
    p.add_argument("--seed", type=int, default=7, help="generator seed of the new images (the demo's is 0) [7]")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--show", type=int, default=8, help="captions to print [8]")
    p.add_argument("--work", default=None, help="folder for the model file and the images [RUN/own_images]")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    work = Path(a.work or Path(a.run) / "own_images")
    model = export(a.run, work / "model.capaware")
    data = json.loads(generate_captions(work / "images", a.images, 0, a.seed, 128, n_val=0).read_text())
    root = work / "images"
    images = [(root / im["filepath"] / im["filename"], im) for im in data["images"]]
    paths = [path for path, _ in images]
    captioner = ImageCaptioner.load(model, device="cpu", precision="float32")
    command = shlex.join(["python", "benchmarks/caption_own_images.py", *(sys.argv[1:] if argv is None else argv)])
    print(f"* command: `{command}`")
    print(f"* machine: {cpu_line()}; {a.threads} threads; {len(paths)} new images (generator seed {a.seed}), "
          f"batch {a.batch_size}, beam 2; `{model.name}` {model.stat().st_size / 2**20:.1f} MiB, exported from "
          f"`{Path(captioner.file.provenance['checkpoint']).parent.name}` (best validation CIDEr-D)")
    rate, captions = throughput(captioner, paths, a.repeats, a.batch_size)
    print(f"* float32: **{rate:.1f} images/s** (read, decode, resize, trunk, captioner; model loaded; median of "
          f"{a.repeats} passes)")
    if cpu_isa().bfloat16_native:
        fast = ImageCaptioner.load(model, device="cpu", precision="auto")
        rate16, captions = throughput(fast, paths, a.repeats, a.batch_size)  # the default: what a user gets
        print(f"* precision auto (bfloat16 autocast, native on this CPU): **{rate16:.1f} images/s**")
    print("\nCaptions with `precision: auto` (the default), beside the first of each image's references:\n")
    print("| image | capaware caption | first reference |\n|---|---|---|")
    for (path, im), caption in list(zip(images, captions))[:a.show]:
        print(f"| {path.name} | {caption} | {im['sentences'][0]['raw'].rstrip('.')} |")
    refs = {im["cocoid"]: [s["raw"] for s in im["sentences"]] for _, im in images}
    preds = {im["cocoid"]: c for (_, im), c in zip(images, captions)}
    scores = score_captions(preds, refs, meteor=False, spice=False)
    print(f"\n* the {len(preds)} new images: CIDEr-D {scores.metrics['CIDEr-D']:.3f}, "
          f"BLEU-4 {scores.metrics['BLEU-4']:.4f}"
          f" (against their own references; tokenizer {scores.tokenizer})")
    test = captioner.file.provenance["scores"].get("metrics_test")
    if test:
        print(f"* the run's own test split (its metrics_test.json): CIDEr-D {test['CIDEr-D']:.3f}, "
              f"BLEU-4 {test['BLEU-4']:.4f}")


if __name__ == "__main__":
    main()
