"""A small, generated chat dataset (arithmetic Q&A) in the chat ``messages`` format.

The shipped file ``pipelines/demo/data/demo_chat.jsonl`` is the output of :func:`write_demo_dataset` with the default
arguments; ``scripts/build_demo_dataset.py`` regenerates it, and a test checks that it is current.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

#: The dataset shipped with the project (the demo's default input).
DEMO_DATASET_PATH = Path(__file__).resolve().parent / "data" / "demo_chat.jsonl"
DEFAULT_ROWS = 400
DEFAULT_SEED = 7
SYSTEM_PROMPT = "You are a careful calculator. Answer with the full equation."

_OPERATIONS = {
    "+": (lambda a, b: a + b, "plus"),
    "-": (lambda a, b: a - b, "minus"),
    "*": (lambda a, b: a * b, "times"),
}


def _conversation(rng: random.Random) -> dict:
    """Builds one conversation: an optional system turn, a question and the assistant's full equation."""
    left, right = rng.randint(0, 20), rng.randint(0, 20)
    symbol = rng.choice(sorted(_OPERATIONS))
    compute, word = _OPERATIONS[symbol]
    question = rng.choice([f"What is {left} {word} {right}?", f"Compute {left} {symbol} {right}."])
    messages = [{"role": "system", "content": SYSTEM_PROMPT}] if rng.random() < 0.5 else []
    messages += [
        {"role": "user", "content": question},
        {"role": "assistant", "content": f"{left} {symbol} {right} = {compute(left, right)}"},
    ]
    return {"messages": messages}


def demo_conversations(rows: int = DEFAULT_ROWS, seed: int = DEFAULT_SEED) -> Iterator[dict]:
    """Yields ``rows`` seeded arithmetic conversations.

    Args:
        rows: Number of conversations.
        seed: Seed of the generator; the same seed gives the same rows.

    Yields:
        ``{"messages": [...]}`` rows.
    """
    rng = random.Random(seed)
    for _ in range(rows):
        yield _conversation(rng)


def write_demo_dataset(path: Path = DEMO_DATASET_PATH) -> Path:
    """Writes the demo conversations (the default rows and seed) as JSONL and returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in demo_conversations():
            handle.write(json.dumps(row, sort_keys=True) + "\n")
    return path
