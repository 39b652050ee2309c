"""The trainer's data: checked chat rows as the dataset TRL's ``SFTTrainer`` tokenizes with assistant-only labels.

A template TRL cannot mark is tokenized here (``assistant_masks`` by growing prefixes); samples over ``max_seq_len``
tokens are dropped (the component README says why).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


class LocalTrainingError(ValueError):
    """The data or model cannot be trained as asked (no trainable samples, batch settings, QLoRA without CUDA...)."""


def read_jsonl_rows(path: Path) -> Iterator[dict[str, Any]]:
    """Yields the JSON object of each non-blank line of a JSONL file that ``train_model`` already checked."""
    with Path(path).open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def template_marks_assistant(tokenizer: Any) -> bool:
    """Whether TRL's ``assistant_only_loss`` can mask this tokenizer's template (markers present or patched in)."""
    from trl.chat_template_utils import get_training_chat_template

    try:
        get_training_chat_template(tokenizer)
    except ValueError:  # a template TRL cannot patch
        return False
    return True


def _token_ids(tokenizer: Any, messages: list[dict[str, Any]], **kwargs: Any) -> list[int]:
    return list(tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, **kwargs)["input_ids"])


def assistant_mask_by_prefix(tokenizer: Any, messages: list[dict[str, Any]], length: int) -> list[int]:
    """1 on each assistant turn's tokens: from the templated prompt before it to the conversation ending with it."""
    mask = [0] * length
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            start = len(_token_ids(tokenizer, messages[:index], add_generation_prompt=True))
            end = min(len(_token_ids(tokenizer, messages[: index + 1])), length)
            mask[start:end] = [1] * max(end - start, 0)
    return mask


def chat_dataset(tokenizer: Any, rows: Iterable[dict[str, Any]], max_seq_len: int, label: Any = "") -> tuple[Any, int]:
    """The rows of at most ``max_seq_len`` tokens as a ``datasets.Dataset`` for ``SFTTrainer``, and the longest length.

    Raises:
        LocalTrainingError: No sample is left.
    """
    from datasets import Dataset, disable_progress_bars

    disable_progress_bars()  # TRL's preparation would draw one per pass; the step lines are the progress
    marked = template_marks_assistant(tokenizer)
    kept, lengths, total = [], [], 0
    for total, row in enumerate(rows, start=1):
        ids = _token_ids(tokenizer, row["messages"])
        mask = [1] if marked else assistant_mask_by_prefix(tokenizer, row["messages"], len(ids))
        if len(ids) <= max_seq_len and any(mask):
            kept.append({"messages": row["messages"]} if marked else {"input_ids": ids, "assistant_masks": mask})
            lengths.append(len(ids))
    if not kept:
        raise LocalTrainingError(
            f"{label}: none of {total} samples is trainable (each needs an assistant turn and at most "
            f"max_seq_len={max_seq_len} tokens); raise max_seq_len or check the data"
        )
    return Dataset.from_list(kept), max(lengths)
