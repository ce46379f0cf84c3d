"""Mean ± standard deviation of nDCG@K over several runs of one study (seeds), and the per-seed paired
difference of one row against the others:
``python -m studies.stage_one_seeds.retrieval_seeds RESULTS_DIR... [--k 1 5 10 20 50] [--reference NAME]
[--against NAME...] [--beside NAME...] [--matches] [--out FILE_STEM] [--machine TEXT] [--timing TEXT]``.

One seed's table cannot rank methods whose gaps are the size of the seed-to-seed spread; this puts
the spread next to every mean. The paired difference (reference minus other, seed by seed: both rows
of a seed share its queries and data order) is what an ordering claim rests on; the verdict line says
``ahead``/``behind`` only where every seed agrees in sign, else ``not separated``. Rows named with
``--beside`` (losses published after the paper, embedder.config.LATER_ROWS) are paired with the reference
the same way, each with a verdict line of its own, but left out of the claim. Each RESULTS_DIR holds a
``retrieval.json`` (``embedder.rows``).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli
from studies.seed_stats import agreement, stat, text

REFERENCE = "L(Log-ratio)+M(Dense)"
BOUNDS = ("Oracle",)


def load_runs(paths: list[Path]) -> list[dict]:
    runs = []
    for p in paths:
        f = Path(p) / "retrieval.json"
        if not f.is_file():
            raise CapawareError(f, "no retrieval table", "run python -m embedder.rows for that seed first")
        runs.append(json.loads(f.read_text())["rows"])
    return runs


def common_rows(runs: list[dict]) -> list[str]:
    return [n for n in runs[0] if all(n in r for r in runs)]


def seed_table(paths: list[Path], ks: tuple[int, ...]) -> str:
    runs = load_runs(paths)
    names = common_rows(runs)
    ks = tuple(k for k in ks if all(len(r[n]["ndcg"]) >= k for r in runs for n in names))
    lines = [f"nDCG@K, mean ± std over {len(runs)} runs ({', '.join(str(p) for p in paths)})", "",
             "| method | " + " | ".join(f"nDCG@{k}" for k in ks) + " |", "|" + "---|" * (len(ks) + 1)]
    for n in names:
        lines.append(f"| {n} | " + " | ".join(text(stat([r[n]["ndcg"][k - 1] for r in runs])) for k in ks) + " |")
    return "\n".join(lines)


def paired(runs: list[dict], reference: str, others: list[str], k: int) -> dict[str, np.ndarray]:
    """{other: per-seed nDCG@k of ``reference`` minus that of ``other``}."""
    if reference not in common_rows(runs):
        raise CapawareError("--reference", f"row {reference!r} is not in every run",
                            f"rows: {', '.join(common_rows(runs))}")
    return {o: np.array([r[reference]["ndcg"][k - 1] - r[o]["ndcg"][k - 1] for r in runs]) for o in others}


def verdict(diff: np.ndarray) -> str:
    return {1: "ahead", -1: "behind", 0: "not separated"}[agreement(diff)]


def paired_table(paths: list[Path], ks: tuple[int, ...], reference: str = REFERENCE,
                 against: list[str] | None = None, verdict_k: int = 10,
                 beside: list[str] | None = None) -> tuple[str, dict]:
    """Markdown of the paired differences and a summary dict (verdict per other row at ``verdict_k``).
    ``beside`` rows follow the others in the table; their summary entries say ``"beside": True``."""
    runs = load_runs(paths)
    names = common_rows(runs)
    beside = list(beside or [])
    others = [o for o in against or [n for n in names if n != reference and n not in BOUNDS] if o not in beside]
    others += beside
    missing = [o for o in others if o not in names]
    if missing:
        raise CapawareError("--against/--beside", f"rows {missing} are not in every run", f"rows: {', '.join(names)}")
    ks = tuple(k for k in ks if all(len(r[n]["ndcg"]) >= k for r in runs for n in [reference, *others]))
    diffs = {k: paired(runs, reference, others, k) for k in ks}
    lines = [f"{reference} minus each row, nDCG@K paired by seed (mean ± std over {len(runs)} seeds; "
             f"seeds ahead at K={verdict_k})", "",
             "| minus | " + " | ".join(f"Δ nDCG@{k}" for k in ks) + f" | seeds ahead @{verdict_k} | verdict |",
             "|" + "---|" * (len(ks) + 3)]
    summary = {}
    for o in others:
        d = diffs[verdict_k][o] if verdict_k in diffs else diffs[ks[-1]][o]
        v = verdict(d)
        summary[o] = {"mean": float(d.mean()), "per_seed": d.tolist(), "verdict": v}
        if o in beside:
            summary[o]["beside"] = True
        lines.append(f"| {o} | " + " | ".join(f"{diffs[k][o].mean():+.3f} ± "
                                             f"{diffs[k][o].std(ddof=1) if len(runs) > 1 else 0.0:.3f}"
                                             for k in ks) + f" | {int((d > 0).sum())}/{len(d)} | {v} |")
    return "\n".join(lines), summary


def claim_line(reference: str, summary: dict, k: int = 10, matches: bool = False) -> str:
    """One plain sentence: does ``reference`` lead every other row, seed by seed (``matches``: is it
    behind none of them, the Fig. 5 form of the claim)? Rows beside the claim are left out."""
    summary = {o: s for o, s in summary.items() if not s.get("beside")}
    ahead = [o for o, s in summary.items() if s["verdict"] == "ahead"]
    behind = [o for o, s in summary.items() if s["verdict"] == "behind"]
    if len(ahead) == len(summary):
        return f"Verdict: {reference} leads every other row at nDCG@{k} in every seed: the claim holds here."
    if matches and not behind:
        return (f"Verdict: {reference} is behind none of the other rows at nDCG@{k} (ahead of "
                f"{', '.join(ahead) or 'none'}, the rest not separated): the claim (matches or beats) holds here.")
    parts = []
    if ahead:
        parts.append("ahead of " + ", ".join(ahead))
    if behind:
        parts.append("behind " + ", ".join(behind))
    rest = [o for o in summary if o not in ahead and o not in behind]
    if rest:
        why = "the sign changes between seeds" if all(len(summary[o]["per_seed"]) > 1 for o in rest) else "one seed"
        parts.append("not separated from " + ", ".join(rest) + f" ({why})")
    return f"Verdict: the claim does not hold here at nDCG@{k}: {reference} is " + "; ".join(parts) + "."


PHRASE = {"ahead": "ahead of", "behind": "behind", "not separated": "not separated from"}


def beside_lines(reference: str, summary: dict, k: int = 10) -> dict[str, str]:
    """{row: one plain sentence} for each row beside the claim: its own paired verdict against ``reference``."""
    lines = {}
    for o, s in summary.items():
        if s.get("beside"):
            d = np.array(s["per_seed"])
            spread = f" ± {d.std(ddof=1):.3f}" if len(d) > 1 else ""
            lines[o] = (f"Beside the claim: {reference} is {PHRASE[s['verdict']]} {o} at nDCG@{k} "
                        f"(Δ {d.mean():+.3f}{spread}, {int((d > 0).sum())}/{len(d)} seeds ahead).")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m studies.stage_one_seeds.retrieval_seeds",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="folders with a retrieval.json, one per seed")
    parser.add_argument("--k", type=int, nargs="+", default=[1, 5, 10, 20, 50])
    parser.add_argument("--reference", default=REFERENCE, help="the row whose lead is tested")
    parser.add_argument("--against", nargs="+", default=None, help="rows to compare with (default: all but Oracle)")
    parser.add_argument("--beside", nargs="+", default=[],
                        help="rows paired with the reference, each with a verdict of its own, outside the claim")
    parser.add_argument("--matches", action="store_true",
                        help="the claim is 'matches or beats' (behind none), not 'leads every row'")
    parser.add_argument("--out", default=None, help="write FILE.md and FILE.json (default: print only)")
    parser.add_argument("--machine", default=None, help="where the runs ran (named in the file)")
    parser.add_argument("--timing", default=None, help="wall time of the runs, as text (named in the file)")
    args = parser.parse_args(argv)
    paths = [Path(p) for p in args.results]
    ks = tuple(args.k)
    table = seed_table(paths, ks)
    diff_md, summary = paired_table(paths, ks, args.reference, args.against, beside=args.beside)
    claim = claim_line(args.reference, summary, matches=args.matches)
    beside = beside_lines(args.reference, summary)
    where = "; ".join(x for x in [args.machine and f"Machine: {args.machine}",
                                  args.timing and f"wall time: {args.timing}"] if x)
    text = "\n\n".join([table, diff_md, claim, *beside.values()] + ([where] if where else []))
    print(text)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_text(out.with_suffix(".md"), text + "\n")
        write_text(out.with_suffix(".json"), json.dumps({"runs": [str(p) for p in paths], "reference": args.reference,
                                                         "paired_ndcg10": summary, "verdict": claim, "beside": beside,
                                                         "machine": args.machine, "timing": args.timing}, indent=1))


if __name__ == "__main__":
    run_cli(main)
