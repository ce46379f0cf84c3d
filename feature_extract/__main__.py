"""``python -m feature_extract --config CONFIG [--force] [--skip-bad] [key=value ...]``."""
from capcore.errors import run_cli
from feature_extract.dump import main

if __name__ == "__main__":
    run_cli(main)
