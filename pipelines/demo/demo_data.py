"""The demo's generated data: arithmetic chat conversations, and arithmetic prompts with a verifiable answer for GRPO.

``scripts/build_demo_dataset.py`` writes the shipped ``data/demo_chat.jsonl`` and ``demo_grpo.jsonl``; a test checks
they are current. A GRPO row asks for ``a op b`` as a bare number, its ``ground_truth`` (the reward: 1.0 for the right
number, up to 0.5 of format credit for any number).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from pathlib import Path

#: The datasets shipped with the project (the demo's default inputs: ``--algorithm grpo`` reads the second).
DEMO_DATASET_PATH = Path(__file__).resolve().parent / "data" / "demo_chat.jsonl"
GRPO_DATASET_PATH = DEMO_DATASET_PATH.with_name("demo_grpo.jsonl")
SYSTEM_PROMPT = "You are a careful calculator. Answer with the full equation."
_OPERATIONS = {
    "+": (lambda a, b: a + b, "plus"),
    "-": (lambda a, b: a - b, "minus"),
    "*": (lambda a, b: a * b, "times"),
}


def _operands(rng: random.Random) -> tuple[int, str, int]:
    """``(left, symbol, right)`` of one seeded equation."""
    left, right = rng.randint(0, 20), rng.randint(0, 20)
    return left, rng.choice(sorted(_OPERATIONS)), right


def demo_conversations(rows: int = 400, seed: int = 7) -> Iterator[dict]:
    """Yields ``rows`` seeded ``{"messages": [...]}`` rows: an optional system turn, a question, the equation."""
    rng = random.Random(seed)
    for _ in range(rows):
        left, symbol, right = _operands(rng)
        compute, word = _OPERATIONS[symbol]
        question = rng.choice([f"What is {left} {word} {right}?", f"Compute {left} {symbol} {right}."])
        messages = [{"role": "system", "content": SYSTEM_PROMPT}] if rng.random() < 0.5 else []
        messages += [
            {"role": "user", "content": question},
            {"role": "assistant", "content": f"{left} {symbol} {right} = {compute(left, right)}"},
        ]
        yield {"messages": messages}


def grpo_rows(rows: int = 200, seed: int = 11) -> Iterator[dict]:
    """Yields ``rows`` seeded ``{"question", "ground_truth"}`` rows."""
    rng = random.Random(seed)
    for _ in range(rows):
        left, symbol, right = _operands(rng)
        question = f"Compute {left} {symbol} {right}. Answer with the number only."
        yield {"question": question, "ground_truth": str(_OPERATIONS[symbol][0](left, right))}


def _write(path: Path, rows: Iterable[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True) + "\n")
    return path


def write_demo_dataset(path: Path = DEMO_DATASET_PATH) -> Path:
    """Writes the demo conversations (the default rows and seed) as JSONL and returns the path."""
    return _write(path, demo_conversations())


def write_grpo_dataset(path: Path = GRPO_DATASET_PATH) -> Path:
    """Writes the GRPO demo rows (the default rows and seed) as JSONL and returns the path."""
    return _write(path, grpo_rows())
