"""``capaware export RUN/captioners/NAME -o model.capaware [--beam N]``: one file to share a captioner."""
from __future__ import annotations

import argparse

from capaware.export import DEFAULT_BEAM


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="capaware export", description="Pack a trained captioner into one file.",
                                epilog="example: capaware export runs/demo/captioners/cap_topdown_scst "
                                       "-o model.capaware")
    p.add_argument("run", help="a captioner run folder (holding best.pt), its best.pt, or a pipeline run folder "
                   "(then its captioner with the best validation CIDEr-D)")
    p.add_argument("-o", "--out", required=True, help="the .capaware file to write")
    p.add_argument("--beam", type=int, default=DEFAULT_BEAM, help=f"default beam width of the file ({DEFAULT_BEAM})")
    a = p.parse_args(argv)
    from capaware.export import export
    from capaware.model_file import read_model_file

    path = export(a.run, a.out, a.beam)
    m = read_model_file(path)  # what a colleague will load, read back
    prep = m.preprocessing
    print(f"export: {m.card.core} ({m.card.stage}) on a {prep.arch} {prep.layer} {prep.att_size}x{prep.att_size} grid, "
          f"{prep.input_policy} {prep.input_size} px input, {len(m.card.vocab)} words, beam {m.decoding['beam_size']}, "
          f"val CIDEr-D {m.provenance['val_cider']:.3f}, from {m.provenance['checkpoint']} -> {path} "
          f"({path.stat().st_size / 2**20:.1f} MiB)")
    return 0
