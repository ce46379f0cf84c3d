"""``python -m studies.trunks.feature_scale LABEL=FEATS.h5 ... [--out FILE.md]``: each feature set's scale, the mean L2
norm of an ``att`` cell and of ``fc`` (issue #46). The captioners read these numbers raw unless
``model.standardise`` is set; a set ten times larger than another meets the same learning rate and init."""
from __future__ import annotations

import argparse

from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli
from feature_extract.stats import mean_norms


def table(named: list[tuple[str, str]]) -> str:
    lines = ["| features | images | mean L2 norm of an att cell | mean L2 norm of fc | file |",
             "|---|---:|---:|---:|---|"]
    for label, path in named:
        n = mean_norms(path)
        lines.append(f"| {label} | {n['images']} | {n['att_l2']:.3f} | {n['fc_l2']:.3f} | `{path}` |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("features", nargs="+", help="LABEL=FEATS.h5")
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args(argv)
    named = []
    for item in args.features:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            raise CapawareError(item, "not LABEL=FEATS.h5", "e.g. Img=runs/demo/features/img.h5")
        named.append((label, path))
    text = table(named)
    print(text, end="")
    if args.out:
        write_text(args.out, text)


if __name__ == "__main__":
    run_cli(main)
