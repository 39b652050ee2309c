"""The GRPO demo's toy task: arithmetic prompts with a verifiable answer (``reward_answer`` rows).

Each row asks for the result of ``a op b`` as a bare number and carries it as ``ground_truth``; the reward
(:func:`components.training.finetuning.pod.rewards.compute_score`) gives 1.0 for the right number and up to 0.5 of
format credit for answering with a number at all. The shipped file ``pipelines/demo/data/demo_grpo.jsonl`` is
:func:`write_grpo_dataset`'s output with the default arguments (``scripts/build_demo_dataset.py`` regenerates it); a
test checks that it is current.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

#: The GRPO demo's dataset (``kfp-finetune demo --algorithm grpo``).
GRPO_DATASET_PATH = Path(__file__).resolve().parent / "data" / "demo_grpo.jsonl"
DEFAULT_ROWS = 200
DEFAULT_SEED = 11
_OPERATIONS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def grpo_rows(rows: int = DEFAULT_ROWS, seed: int = DEFAULT_SEED) -> Iterator[dict]:
    """Yields ``rows`` seeded ``{"question", "ground_truth"}`` rows."""
    rng = random.Random(seed)
    for _ in range(rows):
        left, right = rng.randint(0, 20), rng.randint(0, 20)
        symbol = rng.choice(sorted(_OPERATIONS))
        question = f"Compute {left} {symbol} {right}. Answer with the number only."
        yield {"question": question, "ground_truth": str(_OPERATIONS[symbol](left, right))}


def write_grpo_dataset(path: Path = GRPO_DATASET_PATH) -> Path:
    """Writes the GRPO demo rows (the default rows and seed) as JSONL and returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in grpo_rows():
            handle.write(json.dumps(row, sort_keys=True) + "\n")
    return path
