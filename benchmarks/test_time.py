"""Where a test run's time went, per test file: ``python benchmarks/test_time.py junit.xml``.

Reads the JUnit XML that ``pytest --junitxml=FILE`` writes and prints each test file's summed test time,
largest first, with its share of the whole. Under ``--dist loadfile`` a file runs on one worker from start to
end, so the largest file is the floor of the suite's wall time on any number of workers.
"""
from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def per_file(junit: Path) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        parts = [p for p in module if not p[:1].isupper()]  # drop a test class: tests.eval.test_x.TestY
        totals["/".join(parts) + ".py"] += float(case.get("time", 0))
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path, nargs="+", help="pytest --junitxml files (several: columns side by side)")
    parser.add_argument("--top", type=int, default=25, help="files to list (the rest summed in one line)")
    parser.add_argument("--write", type=Path, default=None,
                        help="also write the first file's seconds per test file as JSON (tests/file_seconds.json: "
                        "the order tests/conftest.py hands files to pytest's workers)")
    args = parser.parse_args(argv)
    runs = [per_file(j) for j in args.junit]
    if args.write:
        args.write.write_text(json.dumps({f: round(s, 1) for f, s in runs[0].items()}, indent=1) + "\n")
    files = list(runs[0]) + [f for r in runs[1:] for f in r if f not in runs[0]]
    heads = " | ".join(f"{j.name} (s)" for j in args.junit)
    print(f"| test file | {heads} |\n|---|" + "---:|" * len(runs))
    for f in files[:args.top]:
        print(f"| {f} | " + " | ".join(f"{r[f]:.1f}" if f in r else "—" for r in runs) + " |")
    rest = files[args.top:]
    if rest:
        sums = " | ".join(f"{sum(r.get(f, 0) for f in rest):.1f}" for r in runs)
        print(f"| {len(rest)} other files | {sums} |")
    print("| all files | " + " | ".join(f"{sum(r.values()):.1f}" for r in runs) + " |")


if __name__ == "__main__":
    main()
