"""Check what the pipeline needs on this machine:
``python -m eval.doctor [--config PIPELINE.yaml | --arch resnet101] [--quick]``.

One line per check: ok / MISSING / warn, the finding, and the fix when something is missing. Required
(exit status 1 when missing): Java, the PTB tokenizer, METEOR, torch. Optional (reported, exit 0):
SPICE's CoreNLP models (every other metric runs without them), torchvision, a GPU, ImageNet weights
(only for ``init: imagenet`` / ImageNet features; the embedded default never needs them).

With ``--config``, a pipeline config's own needs are required too: the ImageNet weights of every
architecture its stages load (the paper's pose and layout configs use resnet34, its caption ones
resnet101), its real data folders and image lists, and the disk its feature files take (eval.preflight).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from capcore.errors import CapawareError
from eval import captions_java as jv


@dataclass
class Check:
    name: str
    status: str  # ok | MISSING | warn
    detail: str
    fix: str = ""
    required: bool = True


def check_java() -> Check:
    info = jv.java_info()
    if info is None:
        return Check("java", "MISSING", "no java on PATH (PTB tokenizer, METEOR, SPICE)", jv.JAVA_FIX)
    note = "; SPICE cache gets --add-opens (Java >= 9)" if info.major >= 9 else ""
    return Check("java", "ok", f"{info.version} at {info.path}{note}")


def check_ptb() -> Check:
    try:
        t0 = time.time()
        out = jv.ptb_tokenize(["A man, riding a horse."])
        ok = out == ["a man riding a horse"]
        return Check("PTB tokenizer", "ok" if ok else "MISSING", f"offline, {time.time() - t0:.1f} s -> {out[0]!r}",
                     "" if ok else "reinstall pycocoevalcap (pip install --force-reinstall pycocoevalcap)")
    except Exception as err:  # report, never crash the doctor
        return Check("PTB tokenizer", "MISSING", str(err), "install Java; reinstall pycocoevalcap")


def check_meteor() -> Check:
    try:
        t0 = time.time()
        with jv.Meteor() as m:
            total, _ = m.score(["a dog runs on the grass"], [["a dog runs on the grass", "a dog on grass"]])
        ok = abs(total - 1.0) < 0.05
        return Check("METEOR 1.5", "ok" if ok else "warn", f"one process, {time.time() - t0:.1f} s incl. start; "
                     f"identical caption scores {total:.3f}")
    except Exception as err:
        return Check("METEOR 1.5", "MISSING", str(err),
                     "install Java; METEOR needs ~2 GB heap; reinstall pycocoevalcap if its jar/data is missing")


def check_spice(corenlp_dir: str | None) -> Check:
    why = jv.spice_unavailable(corenlp_dir)
    if why:
        return Check("SPICE models", "MISSING", "SPICE will be reported as unavailable (other metrics still run)",
                     why, required=False)
    return Check("SPICE models", "ok", f"CoreNLP 3.6.0 jars in {jv.corenlp_dir(corenlp_dir)}", required=False)


def check_torch() -> list[Check]:
    out = []
    try:
        import torch
        from capcore.cpu_isa import cpu_isa, cpu_line

        out.append(Check("torch", "ok", torch.__version__))
        isa = cpu_isa()
        auto = "bfloat16 autocast" if isa.bfloat16_native else "float32 (bfloat16 would be emulated: ~12x slower)"
        out.append(Check("CPU", "ok", f"{cpu_line()}; precision: auto -> {auto}", required=False))
        if torch.cuda.is_available():
            name = torch.cuda.get_device_name(0)
            out.append(Check("GPU", "ok", f"{torch.cuda.device_count()} x {name}", required=False))
        else:
            out.append(Check("GPU", "warn", "none (CPU only): fine for the embedded default, slow for COCO",
                             "a CUDA GPU and a CUDA build of torch for the paper configs", required=False))
    except ImportError:
        out.append(Check("torch", "MISSING", "not importable", "make venv (pip install torch)"))
    try:
        import torchvision
        out.append(Check("torchvision", "ok", torchvision.__version__, required=False))
    except ImportError:
        out.append(Check("torchvision", "MISSING", "not importable", "pip install torchvision", required=False))
    return out


def check_weights(arch: str, weights: str = "", used_by: str = "") -> Check:
    """One architecture's ImageNet file; required when a config given to the doctor loads it (``used_by``)."""
    need = f"needed by {used_by}" if used_by else "needed only for ImageNet init / features"
    try:
        from embedder.model import imagenet_weight_file

        try:
            return Check(f"ImageNet {arch}", "ok", f"{imagenet_weight_file(arch, weights)} ({need})",
                         required=bool(used_by))
        except CapawareError as err:
            return Check(f"ImageNet {arch}", "MISSING", f"{err.where} not found; {need}", err.fix or str(err),
                         required=bool(used_by))
    except Exception as err:
        return Check(f"ImageNet {arch}", "warn", f"could not check ({err})", required=False)


def check_config(path: str) -> list[Check]:
    """What one pipeline config's stages need beyond the tools above: every ImageNet trunk they load,
    their real data folders and image lists, and the disk of their feature files."""
    from capcore.pipeline_config import Entry, load_pipeline
    from embedder.config import load_config
    from eval import preflight
    from feature_extract.config import load_features_config

    cfg = load_pipeline(path, None)
    stage1 = [load_config(e.config, e.overrides) for e in (Entry.parse(t, cfg.run_dir) for t in cfg.stage1)]
    features = [load_features_config(e.config, e.overrides) for e in (Entry.parse(t, cfg.run_dir) for t in cfg.features)]
    checks = [check_weights(arch, weights, ", ".join(who))
              for (arch, weights), who in preflight.imagenet_trunks(stage1, features).items()]
    problems = preflight.check_stage_one(stage1, cfg.run_dir) + preflight.check_features(features, cfg.run_dir)
    checks += [Check("inputs", "MISSING", f"{p.where}: {p.problem}", p.fix) for p in problems]
    if not problems:
        checks.append(Check("inputs", "ok", f"the data folders, image lists and disk {path} needs"))
    uncounted = [c for c in features if preflight.uncounted(c, cfg.run_dir)]
    if uncounted:  # the disk is checked against the image lists' counts; until they are in, say what it will take
        per = sum(preflight.feature_bytes(c, 100_000) for c in uncounted)
        where = preflight.existing_parent(Path(uncounted[0].out))
        lists = ", ".join(dict.fromkeys(str(c.images.karpathy) for c in uncounted))
        checks.append(Check("disk", "warn", f"{len(uncounted)} feature file(s) will take up to {per / 1e9:.0f} GB per "
                            f"100,000 images ({shutil.disk_usage(where).free / 1e9:.0f} GB free under {where}); "
                            f"checked exactly once {lists} is there", required=False))
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=None, help="a pipeline config: check every input its stages need")
    parser.add_argument("--arch", default="resnet101", help="without --config: backbone whose ImageNet weights to look for")
    parser.add_argument("--corenlp-dir", default=None, help="where SPICE's CoreNLP 3.6.0 jars are (if not the default)")
    parser.add_argument("--quick", action="store_true", help="skip starting METEOR (~5 s)")
    a = parser.parse_args(argv)
    checks = [check_java(), check_ptb()]
    if not a.quick:
        checks.append(check_meteor())
    checks += [check_spice(a.corenlp_dir), *check_torch()]
    try:
        checks += check_config(a.config) if a.config else [check_weights(a.arch)]
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
