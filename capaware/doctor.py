"""Check what the pipeline needs on this machine:
``python -m capaware.doctor [--config PIPELINE.yaml | --arch resnet101] [--quick]``.

One line per check: ok / MISSING / warn, the finding, and the fix when something is missing. Required
(exit status 1 when missing): Java, the PTB tokenizer, METEOR, torch. Optional (reported, exit 0):
SPICE's CoreNLP models (every other metric runs without them), torchvision, a GPU, ImageNet weights
(only for ``init: imagenet`` / ImageNet features; the embedded default never needs them).

With ``--config``, a pipeline config's own needs are required too: the ImageNet weights of every
architecture its stages load (the paper's pose and layout configs use resnet34, its caption ones
resnet101), its real data folders and image lists, and the disk its feature files take. The checks are
capaware/preflight.py's (which the pipeline's preflight uses too); this module prints them.
"""
from __future__ import annotations

import argparse
import sys

from capcore.errors import CapawareError
from capaware import preflight as env
from capaware.preflight import Check


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=None, help="a pipeline config: check every input its stages need")
    parser.add_argument("--arch", default="resnet101",
                        help="without --config: backbone whose ImageNet weights to look for")
    parser.add_argument("--corenlp-dir", default=None, help="where SPICE's CoreNLP 3.6.0 jars are (if not the default)")
    parser.add_argument("--quick", action="store_true", help="skip starting METEOR (~5 s)")
    a = parser.parse_args(argv)
    checks = [env.check_java(), env.check_ptb()]
    if not a.quick:
        checks.append(env.check_meteor())
    checks += [env.check_spice(a.corenlp_dir), *env.check_torch()]
    try:
        checks += env.check_config(a.config) if a.config else [env.check_weights(a.arch)]
    except CapawareError as err:  # a bad config is one line among the others
        checks.append(Check("config", "MISSING", f"{err.where}: {err.problem}", err.fix or ""))
    width = max(len(c.name) for c in checks)
    for c in checks:
        optional = " (optional)" if c.status == "MISSING" and not c.required else ""
        print(f"{c.status:7s} {c.name:{width}s}  {c.detail}{optional}")
        if c.fix and c.status != "ok":
            print(f"{'':7s} {'':{width}s}  fix: {c.fix}")
    failed = list(dict.fromkeys(c.name for c in checks if c.required and c.status == "MISSING"))
    optional = list(dict.fromkeys(c.name for c in checks if not c.required and c.status == "MISSING"))
    print("doctor: " + (f"missing required: {', '.join(failed)}" if failed else "all required checks passed")
          + (f"; missing optional: {', '.join(optional)} (the pipeline runs without them)" if optional else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
