"""Benchmark: the dataset_download validator against a bare ``json.loads`` loop and a ``datasets`` baseline.

Generates ``--rows`` chat rows (default 1,000,000) as JSONL, then measures, each in a fresh subprocess so that peak
RSS belongs to that measurement alone:

* ``validator``: ``validate_local_files`` (read + decode + check every row, rejects counted), with a sink writing every
  valid row (as the component does) to ``os.devnull``, so that the figure is the validator's and not the disk's;
* ``json``: a bare ``json.loads`` per line;
* ``datasets``: ``datasets.load_dataset("json", ...)`` then iterating every row.

Prints rows/s, peak RSS (MiB) and the same-run ratios against the targets (validator >= 1.0x a bare ``json.loads``
loop, >= 5x the datasets baseline, <= 128 MiB peak RSS).

Usage: ``python benchmarks/validate_dataset.py [--rows N] [--keep PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TOPICS = ["arithmetic", "geography", "cooking", "python", "history", "astronomy"]


def generate(path: Path, rows: int, seed: int = 0) -> None:
    """Writes ``rows`` chat rows (system prompt on one in three, one or two exchanges) to ``path``."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for index in range(rows):
            topic = rng.choice(TOPICS)
            messages = [{"role": "system", "content": f"You are an expert in {topic}."}] if index % 3 == 0 else []
            for turn in range(rng.randint(1, 2)):
                question = f"Question {index}.{turn} about {topic}: " + " ".join(rng.choices(TOPICS, k=8))
                answer = f"Answer {index}.{turn}: " + " ".join(rng.choices(TOPICS, k=16))
                messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
            handle.write(json.dumps({"messages": messages, "id": index}) + "\n")


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(mode: str, path: Path) -> dict:
    """Runs one measurement in this process; returns rows, seconds and peak RSS."""
    started = time.perf_counter()
    if mode == "validator":
        sys.path.insert(0, str(REPO_ROOT))
        from components.data_processing.dataset_download.validate import validate_local_files

        with open(os.devnull, "wb") as out:
            started = time.perf_counter()
            report = validate_local_files([path], str(path), sink=lambda row: out.write(row + b"\n"))
        rows = report.rows_read
        assert report.rows_valid == rows, report.failure_message()
    elif mode == "json":
        rows = 0
        with open(path, "rb") as handle:
            for line in handle:
                json.loads(line)
                rows += 1
    elif mode == "datasets":
        import datasets

        datasets.disable_progress_bars()
        with tempfile.TemporaryDirectory() as cache:
            started = time.perf_counter()
            dataset = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=cache)
            rows = sum(1 for _ in dataset)
    else:
        raise ValueError(f"unknown mode {mode!r}")
    seconds = time.perf_counter() - started
    return {
        "mode": mode,
        "rows": rows,
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "peak_rss_mib": _peak_rss_mib(),
    }


def _in_subprocess(mode: str, path: Path) -> dict:
    output = subprocess.run(
        [sys.executable, __file__, "--measure", mode, "--file", str(path)], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="write the generated JSONL here (default: a temporary file)")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.file)))
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        path = args.keep or Path(scratch) / "chat.jsonl"
        started = time.perf_counter()
        generate(path, args.rows)
        size_mib = path.stat().st_size / 2**20
        print(f"generated {args.rows:,} rows ({size_mib:.0f} MiB) in {time.perf_counter() - started:.1f} s")
        results = {mode: _in_subprocess(mode, path) for mode in ("validator", "json", "datasets")}
    for result in results.values():
        print(
            f"{result['mode']:>10}: {result['rows_per_s']:>12,.0f} rows/s  ({result['seconds']:.2f} s)  "
            f"peak RSS {result['peak_rss_mib']:.0f} MiB"
        )
    validator = results["validator"]
    vs_json = validator["rows_per_s"] / results["json"]["rows_per_s"]
    vs_datasets = validator["rows_per_s"] / results["datasets"]["rows_per_s"]
    print(f"validator / bare json.loads: {vs_json:.2f}x (target >= 1.0x: {'met' if vs_json >= 1.0 else 'MISSED'})")
    print(f"validator / datasets: {vs_datasets:.2f}x (target >= 5x: {'met' if vs_datasets >= 5 else 'MISSED'})")
    rss_ok = validator["peak_rss_mib"] <= 128
    print(
        f"validator peak RSS: {validator['peak_rss_mib']:.0f} MiB (target <= 128 MiB: {'met' if rss_ok else 'MISSED'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
