"""Regenerates the shipped demo datasets: ``pipelines/demo/data/demo_chat.jsonl`` and ``demo_grpo.jsonl``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.demo.demo_data import write_demo_dataset, write_grpo_dataset  # noqa: E402

if __name__ == "__main__":
    print(write_demo_dataset())
    print(write_grpo_dataset())
