"""Builds the tiny offline chat model (Llama + BPE tokenizer with a chat template) into a directory.

Usage: ``python scripts/build_tiny_model.py OUTPUT_DIR [--hidden-size N --num-hidden-layers N ...]``.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.demo.tiny_model import TINY_DIMENSIONS, build_tiny_model  # noqa: E402


def main() -> None:
    """Parses the arguments and builds the model."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    for name, default in TINY_DIMENSIONS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    args = parser.parse_args()
    started = time.perf_counter()
    dimensions = {name: getattr(args, name) for name in TINY_DIMENSIONS}
    build_tiny_model(args.output_dir, seed=args.seed, **dimensions)
    print(f"built {args.output_dir} in {time.perf_counter() - started:.2f}s")


if __name__ == "__main__":
    main()
