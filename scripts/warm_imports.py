"""Import every module of capaware's packages once, so that Python writes the .pyc of all they import at load time.

Why: ``make venv`` no longer byte-compiles the whole venv (11,838 modules, of which the stages import 2,964; issue
#55), and make's commands write the .pyc of what they import. Without this warm-up the first stage commands, or the
first tests, would all compile torch at once, each on its own: the compiling belongs to the install. What a module
imports only inside a function (timm, matplotlib) is compiled where it is first used.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

PACKAGES = ("capcore", "capdata", "embedder", "joint", "feature_extract", "captioners", "rl", "eval", "capaware",
            "studies")


def main() -> None:
    sys.dont_write_bytecode = False
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    failed = []
    for package in PACKAGES:
        for info in pkgutil.walk_packages([str(root / package)], prefix=f"{package}."):
            if info.name.endswith("__main__"):
                continue  # a package's command line runs when imported
            try:
                importlib.import_module(info.name)
            except Exception as err:  # an optional dependency missing here: that module compiles when first used
                failed.append(f"{info.name} ({type(err).__name__})")
    import pytest  # noqa: F401  (make test's first import; its plugins load at collection)
    print(f"warm_imports: {len(sys.modules)} modules loaded" + (f"; not importable here: {', '.join(failed)}"
                                                               if failed else ""))


if __name__ == "__main__":
    main()
