"""CLI: ``python -m capdata.synthetic {poses,rooms,captions} --out DIR [--n-train N] [--n-test N] ...``."""
from __future__ import annotations

import argparse

from capcore.errors import run_cli
from capdata.synthetic import generate_captions, generate_poses, generate_rooms

DEFAULT_SIZE = {"poses": 64, "rooms": 64, "captions": 128}
DEFAULT_TEST = {"poses": 500, "rooms": 500, "captions": None}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m capdata.synthetic",
        description="Write a deterministic synthetic dataset in a real release's file format.")
    parser.add_argument("kind", choices=("poses", "rooms", "captions"),
                        help="poses: MPII-like pose JSON; rooms: LSUN room-layout (type 5); "
                             "captions: Karpathy dataset_coco.json")
    parser.add_argument("--out", required=True, help="output folder (created if missing)")
    parser.add_argument("--n-train", type=int, default=2000,
                        help="training images (captions: train + restval) [2000]")
    parser.add_argument("--n-test", type=int, default=None,
                        help="test images [poses, rooms: 500; captions: n_train / 10]")
    parser.add_argument("--n-val", type=int, default=None, help="captions only: val images [n_train / 10]")
    parser.add_argument("--n-unlabeled", type=int, default=0,
                        help="captions only: images without captions, in OUT/unlabeled/ [0]")
    parser.add_argument("--seed", type=int, default=0, help="same seed, same bytes [0]")
    parser.add_argument("--size", type=int, default=None, help="image side in pixels [poses, rooms: 64; captions: 128]")
    args = parser.parse_args(argv)

    size = DEFAULT_SIZE[args.kind] if args.size is None else args.size
    n_test = DEFAULT_TEST[args.kind] if args.n_test is None else args.n_test
    if args.kind == "captions":
        path = generate_captions(args.out, args.n_train, n_test, args.seed, size, n_val=args.n_val,
                                 n_unlabeled=args.n_unlabeled)
    else:
        if args.n_val is not None or args.n_unlabeled:
            parser.error("--n-val and --n-unlabeled apply to captions only")
        gen = generate_poses if args.kind == "poses" else generate_rooms
        path = gen(args.out, args.n_train, n_test, args.seed, size)
    print(f"wrote {args.kind} dataset: {path}")


if __name__ == "__main__":
    run_cli(main)
