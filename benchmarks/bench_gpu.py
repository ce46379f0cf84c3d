"""GPU throughput of the paper-scale steps, and the hours they imply (README's *Expected GPU time*).

``python benchmarks/bench_gpu.py [--repeats 10] [--json FILE]`` (needs a CUDA GPU)

Measured, on random inputs of the paper's shapes, with capaware's own modules:

* stage one: ``embedder.model`` trunk + head, one training step (trunk under autocast as in
  ``embedder.train.TrunkHead``, a squared-norm loss standing in for the log-ratio loss, whose cost is
  negligible beside the trunk; backward; the paper config's optimizer) at 224 px: ResNet-34 with a
  128-D head and batch 150 (pose, layout: ``configs/paper/mpii_pose_study.yaml``), ResNet-101 with a 1024-D
  head and batch 50 (caption: ``configs/paper/coco_caption.yaml``). bfloat16 autocast + channels_last, what
  ``precision: auto`` runs on such a GPU, against float32 in torch's default layout (cuDNN's TF32
  convolutions, torch's default), the strongest float32 a user would run without changing settings;
* features: the ResNet-101 trunk's forward at 448 px (a 14 x 14 grid), batch 32, bfloat16 autocast,
  under ``torch.inference_mode`` (the GPU's part of ``feature_extract``: decoding and HDF5 writing are
  CPU work and not timed here);
* captioners: one XE training step of Att2all2 and Top-Down at ``configs/paper/coco_*.yaml``'s sizes (196
  regions x 2048, COCO's 9,487 words, 5 captions per image, 16 words), bfloat16 autocast as
  ``captioners.xe`` runs it.

Each figure is the median (min) of ``--repeats`` steps after 3 warm-up steps, with the GPU synchronised
around every step. The projections multiply the work the paper's settings imply (image passes, or
captioner steps per epoch) by the measured time: compute only (no data loading, label distances,
validation or checkpointing), so they are floors, not promises.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capcore.device import autocast, precision_choice  # noqa: E402
from captioners.config import load_captioner_config  # noqa: E402
from captioners.model import Captioner, xe_loss  # noqa: E402
from embedder.model import build_model  # noqa: E402

COCO_TRAIN_IMAGES = 113_287  # Karpathy train split
COCO_WORDS = 9_487  # Karpathy COCO vocabulary at threshold 5
# image passes the paper's stage-one settings imply (README, Expected GPU time)
STAGE1_WORK = {"pose, one method (12,366 anchors x 150 x 15 epochs)": ("resnet34", 12_366 * 150 * 15),
               "layout, one method (~4,000 anchors x 100 x 15 epochs)": ("resnet34", 4_000 * 100 * 15),
               "caption stage one (113k anchors x 50 x 5 epochs)": ("resnet101", 113_287 * 50 * 5)}


DEVICE = torch.device("cuda")
SIZE, FEATURE_SIZE, MAX_BATCH = 224, 448, 1024  # --smoke: 32, 64, 4


def cuda_seconds(fn, repeats: int, warmup: int = 3) -> tuple[float, float]:
    """(median, min) wall seconds of ``fn``, the GPU synchronised before and after each call."""
    sync = torch.cuda.synchronize if DEVICE.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def stage1_step(arch: str, dim: int, batch: int, optimizer: str, dtype, layout):
    dev = DEVICE
    torch.manual_seed(0)
    model = build_model(arch, dim, "none", "").to(dev, memory_format=layout)
    opt = (torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9) if optimizer == "sgd"
           else torch.optim.Adam(model.parameters(), lr=5e-6, fused=True))
    x = torch.randn(batch, 3, SIZE, SIZE, device=dev).contiguous(memory_format=layout)

    def step():
        with autocast(dev, dtype):
            features = model.trunk(x)
        loss = model.head(features.float()).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def feature_forward(batch: int, size: int, dtype):
    dev = DEVICE
    trunk = build_model("resnet101", 128, "none", "").trunk.to(dev, memory_format=torch.channels_last).eval()
    x = torch.randn(batch, 3, size, size, device=dev).contiguous(memory_format=torch.channels_last)

    def forward():
        with torch.inference_mode(), autocast(dev, dtype):
            trunk(x)
    return forward


def captioner_step(core: str, dtype, max_batch: int):
    dev = DEVICE
    cfg = load_captioner_config(ROOT / f"configs/paper/coco_{core}.yaml")
    m, t = cfg.model, cfg.train
    torch.manual_seed(0)
    model = Captioner(core, COCO_WORDS, 2048, 2048, m.input_encoding_size, m.rnn_size, m.att_hid_size,
                      m.drop_prob_lm).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=t.lr, betas=tuple(t.betas), eps=t.eps)
    k, max_len, batch = cfg.data.seq_per_img, 16, min(t.batch_size, max_batch)
    att = torch.rand(batch, 196, 2048, device=dev)
    fc = att.mean(1)
    seq = torch.randint(1, COCO_WORDS + 1, (batch, k, max_len), device=dev)
    lengths = torch.randint(8, max_len + 1, (batch, k, 1), device=dev)
    seq = seq * (torch.arange(max_len, device=dev).view(1, 1, -1) < lengths)

    def step():
        model.train()
        with autocast(dev, dtype):
            logprobs = model(fc, att, seq)
        loss = xe_loss(logprobs.float(), seq.view(-1, max_len))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), t.grad_clip)
        opt.step()
    return step, batch


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", default=None)
    parser.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU: checks the script runs")
    a = parser.parse_args()
    global DEVICE, SIZE, FEATURE_SIZE, MAX_BATCH
    if a.smoke:
        DEVICE, SIZE, FEATURE_SIZE, MAX_BATCH, a.repeats = torch.device("cpu"), 32, 64, 4, 1
    elif not torch.cuda.is_available():
        sys.exit("error: bench_gpu needs a CUDA GPU (none is visible); "
                 "the CPU benchmarks are the others in benchmarks/")
    dtype, why = precision_choice("auto", DEVICE)
    torch.backends.cudnn.benchmark = True
    gpu = torch.cuda.get_device_name() if DEVICE.type == "cuda" else "no GPU (--smoke)"
    print(f"GPU throughput: python benchmarks/bench_gpu.py --repeats {a.repeats}")
    print(f"# {gpu}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"cuDNN {torch.backends.cudnn.version()}; {why}")
    out = {"gpu": gpu, "torch": torch.__version__, "precision": why, "rows": []}

    print(f"stage one, training step at {SIZE} px (images/s):")
    per_image = {}
    for arch, dim, batch, optimizer in (("resnet34", 128, 150, "sgd"), ("resnet101", 1024, 50, "adam")):
        batch = min(batch, MAX_BATCH)
        auto = cuda_seconds(stage1_step(arch, dim, batch, optimizer, dtype, torch.channels_last), a.repeats)
        fp32 = cuda_seconds(stage1_step(arch, dim, batch, optimizer, None, torch.contiguous_format), a.repeats)
        per_image[arch] = auto[0] / batch
        print(f"  {arch:9s} batch {batch:3d}  auto (bfloat16, channels_last) {batch / auto[0]:7.0f} img/s "
              f"(best {batch / auto[1]:.0f})   float32 {batch / fp32[0]:7.0f} img/s   "
              f"{fp32[0] / auto[0]:.2f}x")
        out["rows"].append({"what": f"stage1 {arch}", "batch": batch, "auto_s": auto, "float32_s": fp32})
        torch.cuda.empty_cache()

    fb = min(32, MAX_BATCH)
    feat = cuda_seconds(feature_forward(fb, FEATURE_SIZE, dtype), a.repeats)
    print(f"features, ResNet-101 forward at {FEATURE_SIZE} px, batch {fb}: {fb / feat[0]:.0f} img/s "
          f"(best {fb / feat[1]:.0f})")
    out["rows"].append({"what": f"features resnet101 {FEATURE_SIZE}", "batch": fb, "auto_s": feat})
    torch.cuda.empty_cache()

    print("captioners, XE training step at the paper's sizes:")
    per_epoch = {}
    for core in ("att2all2", "topdown"):
        step, batch = captioner_step(core, dtype, MAX_BATCH)
        s = cuda_seconds(step, a.repeats)
        per_epoch[core] = s[0] * COCO_TRAIN_IMAGES / batch
        print(f"  {core:8s} batch {batch} images x 5 captions: {s[0] * 1e3:.1f} ms/step (best {s[1] * 1e3:.1f}), "
              f"one COCO epoch ({COCO_TRAIN_IMAGES // batch} steps) {hours(per_epoch[core])}")
        out["rows"].append({"what": f"xe {core}", "batch": batch, "auto_s": s})
        torch.cuda.empty_cache()

    print("projected compute on this GPU (measured step times x the paper's work; no data loading):")
    for what, (arch, passes) in STAGE1_WORK.items():
        print(f"  {what}: {passes / 1e6:.1f} M passes -> {hours(passes * per_image[arch])}")
    print(f"  features: {COCO_TRAIN_IMAGES + 10_000:,} images x 2 backbones -> "
          f"{hours(2 * (COCO_TRAIN_IMAGES + 10_000) * feat[0] / fb)}")
    for core, s in per_epoch.items():
        print(f"  {core} XE, 30 epochs: {hours(30 * s)}")
    out["projection"] = {"per_image_s": per_image, "xe_epoch_s": per_epoch, "feature_img_s": feat[0] / fb}
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
