"""Plot probe accuracy against stage-one steps from ``studies/probes/probe_curve.py`` outputs.

``python -m studies.probes.plot_probe_curves CURVE.json... --out FIG.png [--groups colour count position]
[--names A B ...]``

One panel per group, one line per trained row (every file's rows, named ``NAME: row`` when ``--names`` gives one
name per file, e.g. the seeds of one recipe), the majority floor dashed. Deterministic
(Agg backend, inputs in the order given).
"""
from __future__ import annotations

import argparse

from capcore.atomic import atomic_path
from capcore.errors import CapawareError, run_cli
from studies.json_files import read_json_files


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("curves", nargs="+", help="probe_curve.json files")
    parser.add_argument("--out", required=True)
    parser.add_argument("--groups", nargs="+", default=["colour", "count", "position"])
    parser.add_argument("--names", nargs="+", help="one name per curve file, put before its rows' names")
    a = parser.parse_args(argv)
    if a.names is not None and len(a.names) != len(a.curves):
        raise CapawareError("--names", f"{len(a.names)} names for {len(a.curves)} curve files",
                            "give one name per file")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(a.groups), figsize=(4.2 * len(a.groups), 3.4), squeeze=False)
    floor = {}
    for i, data in enumerate(read_json_files(a.curves, "write it with studies/probes/probe_curve.py")):
        floor.update(data["floor"])
        start = next((r for r in data["rows"] if r["row"] == "start"), None)
        for row in dict.fromkeys(r["row"] for r in data["rows"] if r["row"] != "start"):
            points = ([start] if start else []) + [r for r in data["rows"] if r["row"] == row]
            for ax, group in zip(axes[0], a.groups):
                ax.plot([p["step"] for p in points], [p["probe"][group] for p in points], marker="o",
                        label=f"{a.names[i]}: {row}" if a.names else row)
    for ax, group in zip(axes[0], a.groups):
        if group in floor:
            ax.axhline(floor[group], color="grey", linestyle="--", linewidth=1, label="majority (floor)")
        ax.set_title(f"{group} probe (test accuracy)")
        ax.set_xlabel("stage-one step")
        ax.set_ylim(0, 1)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(a.out) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    print(f"-> {a.out}")


if __name__ == "__main__":
    run_cli(main)
