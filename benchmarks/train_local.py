"""Times the local CPU launcher on the tiny model: seconds per optimizer step and tokens/s for SFT, LoRA and OSFT.

Usage: ``python benchmarks/train_local.py [--steps 50] [--threads 1] [--write-figures]``. Target: 50 steps of 16
samples in < 5 s per algorithm on one core, OSFT within 1.5x of SFT. Prints one line per algorithm and the ratios;
``--write-figures`` records them in ``docs/figures.json`` (``train_local.*``, the training README's "Figures").
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    """Builds the tiny model, trains each algorithm once and prints the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--write-figures", action="store_true", help="record the figures in docs/figures.json")
    args = parser.parse_args()
    import torch

    from components.training.finetuning.local.trainer import train_locally
    from pipelines.demo.demo_data import DEMO_DATASET_PATH
    from pipelines.demo.tiny_model import build_tiny_model
    from tests.harness.requests import training_config

    torch.set_num_threads(args.threads)
    seconds, found = {}, {}
    with tempfile.TemporaryDirectory() as workdir:
        model_dir = build_tiny_model(Path(workdir) / "model")
        for algorithm in ("sft", "lora", "osft"):
            config = training_config(
                base_model=str(model_dir),
                algorithm=algorithm,
                effective_batch_size=16,
                learning_rate=3e-3,
                max_seq_len=256,
                max_tokens_per_gpu=1024,
                max_steps=args.steps,
                num_epochs=100,
            )
            started = time.perf_counter()
            result = train_locally(config, DEMO_DATASET_PATH, Path(workdir) / algorithm, log=lambda _: None)
            total = time.perf_counter() - started
            seconds[algorithm] = result.train_seconds
            rates = [r["tokens_per_second"] for r in result.records]
            found[algorithm] = (1000 * result.train_seconds / len(result.records), result.records[0]["loss"])
            found[algorithm] += (result.records[-1]["loss"],)
            print(
                f"{algorithm}: {len(result.records)} steps in {result.train_seconds:.2f}s "
                f"({1000 * result.train_seconds / len(result.records):.1f} ms/step, median "
                f"{sorted(rates)[len(rates) // 2]:.0f} tok/s, loss {result.records[0]['loss']:.3f} -> "
                f"{result.records[-1]['loss']:.3f}); with load+save {total:.2f}s "
                f"(target < 5 s: {'met' if result.train_seconds < 5 else 'NOT met'})"
            )
    print(
        f"lora/sft: {seconds['lora'] / seconds['sft']:.2f}x, osft/sft: {seconds['osft'] / seconds['sft']:.2f}x "
        f"(target osft <= 1.5x: {'met' if seconds['osft'] <= 1.5 * seconds['sft'] else 'NOT met'})"
    )
    if args.write_figures:
        from scripts.figures import figure, record

        entries = {
            "train_local.osft_per_sft": figure(
                seconds["osft"] / seconds["sft"], "x", f"{seconds['osft'] / seconds['sft']:.2f}"
            )
        }
        for algorithm, (ms_per_step, first, last) in found.items():
            entries[f"train_local.{algorithm}.ms_per_step"] = figure(ms_per_step, "ms", f"{ms_per_step:.0f}")
            entries[f"train_local.{algorithm}.loss"] = figure([first, last], "nats", f"{first:.2f} → {last:.2f}")
        record(entries, "benchmarks/train_local.py")


if __name__ == "__main__":
    main()
