"""Benchmark: ``kfp-finetune validate-dataset`` through the CLI, side by side with a bare ``json.loads`` loop.

Generates ``--rows`` chat rows (default 1,000,000) as JSONL, then measures, each in a fresh subprocess (wall clock,
interpreter start included, peak RSS of that process alone), in ``--rounds`` interleaved rounds so that a busy machine
slows both alike:

Wall-clock time is what a user waits, but on a shared, busy machine it mostly measures the wait for a core; the CPU
time (user + system) of each process is printed too, and its ratio is the steadier figure.

* ``cli``: ``kfp-finetune validate-dataset FILE --output-dir DIR``: the whole dataset step as users run it: read,
  decode and check every row, write the seeded train/eval split with its sha256, print the report;
* ``json``: a bare ``for line in file: json.loads(line)`` loop over the same file;
* ``validator`` (in-process, for reference): ``validate_local_files`` with a sink that discards the rows;
* ``datasets`` (``--with-datasets``): ``datasets.load_dataset("json", ...)`` then iterating every row.

Prints each median and the same-run ratios against the targets: the CLI >= 1.0x the bare ``json.loads`` loop, the
validator >= 5x ``datasets``, the CLI <= 128 MiB peak RSS.

Usage: ``python benchmarks/validate_dataset.py [--rows N] [--rounds R] [--short] [--keep PATH] [--with-datasets]
[--repo DIR]`` (``--short``: ~90-byte rows instead of the default ~400-byte ones).
(``--repo``: run the CLI of another checkout, e.g. an older commit for a before/after figure).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TOPICS = ["arithmetic", "geography", "cooking", "python", "history", "astronomy"]
BARE_LOOP = "import json,sys\nwith open(sys.argv[1],'rb') as f:\n    for line in f: json.loads(line)\n"


def generate(path: Path, rows: int, seed: int = 0, short: bool = False) -> None:
    """Writes ``rows`` chat rows (system prompt on one in three, one or two exchanges) to ``path``.

    ``short``: one question of two words and a one-word answer per row (~90 bytes), where the fixed costs per row
    weigh most against the bare ``json.loads`` loop.
    """
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for index in range(rows):
            if short:
                question, answer = " ".join(rng.choices(TOPICS, k=2)), rng.choice(TOPICS)
                messages = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
                handle.write(json.dumps({"messages": messages}) + "\n")
                continue
            topic = rng.choice(TOPICS)
            messages = [{"role": "system", "content": f"You are an expert in {topic}."}] if index % 3 == 0 else []
            for turn in range(rng.randint(1, 2)):
                question = f"Question {index}.{turn} about {topic}: " + " ".join(rng.choices(TOPICS, k=8))
                answer = f"Answer {index}.{turn}: " + " ".join(rng.choices(TOPICS, k=16))
                messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
            handle.write(json.dumps({"messages": messages, "id": index}) + "\n")


def _timed(command: list[str], repo: Path = REPO_ROOT) -> tuple[float, float, float]:
    """Runs ``command`` in ``repo``; returns (wall seconds, peak RSS MiB, CPU seconds) of that process alone."""
    env = {**os.environ, "PYTHONPATH": str(repo)}
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=repo)
    output = process.stdout.read().decode() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise RuntimeError(f"{command[:4]} exited {process.returncode}: {output[-2000:]}")
    return seconds, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def run_cli(path: Path, output_dir: Path, repo: Path = REPO_ROOT) -> tuple[float, float, float]:
    """``kfp-finetune validate-dataset`` (the same entry point as the console script), writing the split."""
    command = [sys.executable, "-c", "import sys; from pipelines.cli import main; sys.exit(main())"]
    return _timed([*command, "validate-dataset", str(path), "--output-dir", str(output_dir)], repo)


def run_json(path: Path) -> tuple[float, float, float]:
    """The bare ``json.loads`` loop."""
    return _timed([sys.executable, "-c", BARE_LOOP, str(path)])


def measure_in_process(mode: str, path: Path) -> dict:
    """``validator`` or ``datasets``, in this process: rows, seconds, peak RSS."""
    import resource

    if mode == "validator":
        sys.path.insert(0, str(REPO_ROOT))
        from tests.harness.requests import validate_local_files  # at dataset_download's own defaults

        started = time.perf_counter()
        report = validate_local_files([path], str(path), sink=lambda rows: None)
        rows = report.rows_read
        assert report.rows_valid == rows, report.failure_message()
    else:
        import datasets

        datasets.disable_progress_bars()
        with tempfile.TemporaryDirectory() as cache:
            started = time.perf_counter()
            dataset = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=cache)
            rows = sum(1 for _ in dataset)
    seconds = time.perf_counter() - started
    return {"rows": rows, "seconds": seconds, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _in_subprocess(mode: str, path: Path) -> dict:
    output = subprocess.run(
        [sys.executable, __file__, "--measure", mode, "--file", str(path)], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--short", action="store_true", help="short rows (one two-word question, a one-word answer)")
    parser.add_argument("--keep", type=Path, help="write the generated JSONL here (default: a temporary file)")
    parser.add_argument("--with-datasets", action="store_true", help="also measure the datasets baseline (slow)")
    parser.add_argument("--repo", type=Path, default=REPO_ROOT, help="the checkout whose CLI runs (default: this one)")
    parser.add_argument("--write-figures", action="store_true", help="record the README's figures in docs/figures.json")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure_in_process(args.measure, args.file)))
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        path = args.keep or Path(scratch) / "chat.jsonl"
        if not path.exists():
            started = time.perf_counter()
            generate(path, args.rows, short=args.short)
            print(f"generated {args.rows:,} rows in {time.perf_counter() - started:.1f} s")
        print(f"file: {path} ({path.stat().st_size / 2**20:.0f} MiB)")
        cli, bare = [], []
        for round_number in range(1, args.rounds + 1):
            cli.append(run_cli(path, Path(scratch) / "split", args.repo.resolve()))
            bare.append(run_json(path))
            print(
                f"round {round_number}: cli {cli[-1][0]:.2f} s ({cli[-1][2]:.2f} s CPU), "
                f"bare json.loads {bare[-1][0]:.2f} s ({bare[-1][2]:.2f} s CPU)"
            )
        validator = _in_subprocess("validator", path)
        baseline = _in_subprocess("datasets", path) if args.with_datasets else None
    cli_s, bare_s = statistics.median(c[0] for c in cli), statistics.median(b[0] for b in bare)
    cli_cpu, bare_cpu = statistics.median(c[2] for c in cli), statistics.median(b[2] for b in bare)
    cli_rss = max(c[1] for c in cli)
    ratio = bare_s / cli_s
    print(f"bare json.loads loop: {bare_s:.2f} s, {bare_cpu:.2f} s CPU (medians of {args.rounds})")
    print(
        f"kfp-finetune validate-dataset (split written): {cli_s:.2f} s, {cli_cpu:.2f} s CPU, peak RSS {cli_rss:.0f} MiB"
    )
    print(f"CLI / bare json.loads by CPU time: {bare_cpu / cli_cpu:.2f}x")
    print(f"validator in-process: {validator['seconds']:.2f} s, {validator['rows'] / validator['seconds']:,.0f} rows/s")
    print(f"CLI / bare json.loads: {ratio:.2f}x (target >= 1.0x: {'met' if ratio >= 1.0 else 'MISSED'})")
    print(f"CLI peak RSS: {cli_rss:.0f} MiB (target <= 128 MiB: {'met' if cli_rss <= 128 else 'MISSED'})")
    if baseline is not None:
        vs_datasets = baseline["seconds"] / validator["seconds"]
        print(f"validator / datasets: {vs_datasets:.2f}x (target >= 5x: {'met' if vs_datasets >= 5 else 'MISSED'})")
    if args.write_figures:
        record_figures(
            "short" if args.short else "long",
            {"cli_seconds": cli_s, "bare_seconds": bare_s, "ratio": ratio, "cpu_ratio": bare_cpu / cli_cpu},
            cli_rss,
        )
    return 0


def record_figures(rows: str, timings: dict[str, float], peak_rss: float) -> None:
    """Records the README's figures of one run (``short`` or ``long`` rows) and the peak RSS range of both.

    ``timings``: the medians ``cli_seconds`` and ``bare_seconds``, ``ratio`` (bare / CLI wall time: how many times
    faster the CLI is) and ``cpu_ratio`` (the same by CPU time).
    """
    sys.path.insert(0, str(REPO_ROOT))
    from scripts.figures import figure, load, record

    found = {
        f"validate.{rows}.{name}": figure(round(value, 2), "s" if name.endswith("seconds") else "x", f"{value:.2f}")
        for name, value in timings.items()
    }
    found[f"validate.{rows}.peak_rss"] = figure(round(peak_rss), "MiB", f"{peak_rss:.0f}")
    other = load().get(f"validate.{'long' if rows == 'short' else 'short'}.peak_rss", {}).get("value", round(peak_rss))
    low, high = sorted((round(peak_rss), other))
    found["validate.peak_rss.range"] = figure([low, high], "MiB", f"{low}–{high}" if low != high else f"{low}")
    record(found, "benchmarks/validate_dataset.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
