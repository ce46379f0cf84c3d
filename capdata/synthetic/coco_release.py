"""A tiny COCO tree laid out exactly as the real release, to rehearse the paper's COCO pipeline before the
real 20 GB and a GPU are at hand: ``python -m capdata.synthetic.coco_release DIR [--n-train N]``.

Writes, under DIR::

    coco/train2014/COCO_train2014_%012d.jpg      Karpathy's train images (JPEG, named as released)
    coco/val2014/COCO_val2014_%012d.jpg          its restval, val and test images
    coco/dataset_coco.json                       Karpathy's split: filepath, filename, imgid, cocoid,
                                                 sentences (tokens, raw, imgid, sentid), sentids, split
    coco/annotations/captions_{train,val}2014.json  the same captions in COCO's own release format
    coco/coco_splits.json                        the split file that reads them with Karpathy's splits
                                                 (format coco_captions, capdata/readers/coco_captions.py)
    torch/hub/checkpoints/resnet101-63fe2227.pth a ResNet-101 state dict under torchvision's file name
                                                 (random weights: the file ImageNet's would be, not their knowledge)
    pipeline_coco_rehearsal.yaml                 configs/paper/pipeline_coco.yaml, each entry with these paths
                                                 and budgets small enough for a CPU in minutes

then ``TORCH_HOME=DIR/torch capaware run DIR/pipeline_coco_rehearsal.yaml`` runs the real readers, the
ImageNet weight lookup, ResNet-101 and every stage on it. The scenes and captions are the embedded
default's (``shapes_captions``); the json carries only the fields of Karpathy's release.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import yaml
from tqdm import tqdm

from capcore.errors import CapawareError, run_cli
from capdata.synthetic.drawing import SHAPES_WORLD, check_args, item_rng, save_image, write_json
from capdata.synthetic.shapes_captions import N_CAPTIONS, make_captions, render_scene, sample_scene, split_sizes

PIPELINE = Path(__file__).resolve().parents[2] / "configs" / "paper" / "pipeline_coco.yaml"
WEIGHTS = "resnet101-63fe2227.pth"  # torchvision's ResNet101_Weights.IMAGENET1K_V1 file name
FIRST_ID = 9  # COCO ids are not 0-based or contiguous; neither are these

SMALL = {  # per stage of pipeline_coco.yaml: what shrinks the paper's budgets to a CPU rehearsal
    "stage1": "data.input_size=32 data.num_workers=0 captions.w2v_dim=16 captions.w2v_epochs=2 graph.m=6 "
              "graph.workers=1 train.positives=4 train.batch_size=12 train.k=3 train.epochs=0.2 train.log_every=1 "
              "eval.k=5 eval.n_queries=8 model.embed_dim=8 'methods=[{row: L(Log-ratio)+M(Dense)}]'",
    "features": "input.size=64 att_size=2 batch_size=8 num_workers=0",
    "captioners": "data.word_count_threshold=1 data.num_workers=0 model.rnn_size=16 model.input_encoding_size=12 "
                  "model.att_hid_size=8 train.batch_size=8 train.epochs=2 train.log_every=1 val.batch_size=16",
    "rl": "data.word_count_threshold=1 data.num_workers=0 train.batch_size=8 train.epochs=1 "
          "train.samples_per_image=2 train.log_every=1 val.batch_size=16",
}


def write_images(coco: Path, n_train: int, n_val: int, n_test: int, seed: int, size: int) -> list[dict]:
    """The images and their Karpathy entries: train from train2014, restval, val and test from val2014."""
    splits = [name for name, k in split_sizes(n_train, n_val, n_test).items() for _ in range(k)]
    entries = []
    for i, split in enumerate(tqdm(splits, desc="COCO tree", unit="img")):
        rng = item_rng(seed, "captions", i)
        scene = sample_scene(rng, size)
        folder = "train2014" if split == "train" else "val2014"
        cocoid = FIRST_ID + 7 * i
        name = f"COCO_{folder}_{cocoid:012d}.jpg"
        save_image(render_scene(rng, scene, size).convert("RGB"), coco / folder / name, quality=95)
        sentids = list(range(N_CAPTIONS * i, N_CAPTIONS * (i + 1)))
        sentences = [{"tokens": tokens, "raw": raw, "imgid": i, "sentid": s}
                     for s, (tokens, raw) in zip(sentids, make_captions(rng, scene, size))]
        entries.append({"filepath": folder, "sentids": sentids, "filename": name, "imgid": i, "split": split,
                        "sentences": sentences, "cocoid": cocoid})
    return entries


def write_coco_annotations(coco: Path, entries: list[dict]) -> None:
    """The captions again as COCO releases them (one captions_<folder>.json per image folder), and a split file
    with Karpathy's splits: the same images and references in the second caption format."""
    splits: dict[str, list[int]] = {}
    for folder in sorted({e["filepath"] for e in entries}):
        mine = [e for e in entries if e["filepath"] == folder]
        write_json(coco / "annotations" / f"captions_{folder}.json", {
            "images": [{"id": e["cocoid"], "file_name": e["filename"]} for e in mine],
            "annotations": [{"image_id": e["cocoid"], "id": s["sentid"], "caption": s["raw"]}
                            for e in mine for s in e["sentences"]]})
    for e in entries:
        splits.setdefault(e["split"], []).append(e["cocoid"])
    write_json(coco / "coco_splits.json", {"captions": [f"annotations/captions_{f}.json" for f in
                                                        sorted({e["filepath"] for e in entries})],
                                           "splits": splits, "synthetic": SHAPES_WORLD})


def write_weights(path: Path, seed: int) -> None:
    import torch
    import torchvision

    torch.manual_seed(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(torchvision.models.resnet101().state_dict(), path)


def rehearsal_pipeline(out: Path, coco: Path) -> dict:
    """pipeline_coco.yaml with the tree's paths and SMALL's budgets appended to every entry."""
    cfg = yaml.safe_load(PIPELINE.read_text())
    json_path = coco / "dataset_coco.json"
    paths = {"stage1": f"data.root={coco}", "features": f"images.captions={json_path} images.image_root={coco}",
             "captioners": f"data.json={json_path}", "rl": f"data.json={json_path}"}
    for stage in SMALL:
        cfg[stage] = [f"{entry} {paths[stage]} {SMALL[stage]}" for entry in cfg[stage]]
    cfg.update(name="coco_rehearsal", run_dir=str(out / "run"))
    return cfg


def generate_coco_release(out: str | Path, n_train: int = 40, n_val: int = 8, n_test: int = 8, seed: int = 0,
                          size: int = 64) -> Path:
    """Write the tree (module docstring); returns the rehearsal pipeline config's path."""
    out = Path(out).resolve()
    check_args("generate_coco_release", seed=seed, size=size, min_size=32, n_train=n_train, n_val=n_val,
               n_test=n_test)
    if not PIPELINE.is_file():  # checked before anything is written: no half-written tree
        raise CapawareError(PIPELINE, "the COCO pipeline config this rehearsal copies is not here: configs/ ships "
                            "with the checkout, not with a plain pip install",
                            "run this command from a clone of capaware (git clone, then pip install -e .)")
    coco = out / "coco"
    entries = write_images(coco, n_train, n_val, n_test, seed, size)
    write_weights(out / "torch" / "hub" / "checkpoints" / WEIGHTS, seed)
    write_json(coco / "dataset_coco.json", {"images": entries, "dataset": "coco", "synthetic": SHAPES_WORLD})
    write_coco_annotations(coco, entries)
    config = out / "pipeline_coco_rehearsal.yaml"
    config.write_text("# configs/paper/pipeline_coco.yaml on the rehearsal tree (capdata/synthetic/coco_release.py)\n"
                      + yaml.safe_dump(rehearsal_pipeline(out, coco), sort_keys=False, width=1000))
    return config


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m capdata.synthetic.coco_release",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder for the tree, the weights and the rehearsal pipeline config")
    parser.add_argument("--n-train", type=int, default=40, help="train + restval images [40]")
    parser.add_argument("--n-val", type=int, default=8)
    parser.add_argument("--n-test", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args(argv)
    config = generate_coco_release(a.out, a.n_train, a.n_val, a.n_test, a.seed)
    print(f"wrote the COCO rehearsal tree under {config.parent}; run it with:\n"
          f"  TORCH_HOME={config.parent / 'torch'} capaware run {config}")


if __name__ == "__main__":
    run_cli(main)
