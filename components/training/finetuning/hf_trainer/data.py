"""The trainer's data: chat rows tokenized with assistant-only labels (``IGNORE_INDEX`` elsewhere).

Why not TRL's ``SFTTrainer(assistant_only_loss=True)``: see the component README.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

IGNORE_INDEX = -100


class LocalTrainingError(ValueError):
    """The data or model cannot be trained as asked (no trainable samples, template without assistant turns...)."""


#: One tokenized conversation: ``{"input_ids": [...], "labels": [...]}``, labels ``IGNORE_INDEX`` outside assistant
#: tokens (what ``DataCollatorForSeq2Seq`` pads).
Sample = dict[str, list[int]]


def _assistant_mask_by_prefix(tokenizer: Any, messages: list[dict[str, Any]], input_ids: list[int]) -> list[int]:
    """Fallback for templates without ``{% generation %}``: assistant spans from templating growing prefixes."""
    mask = [0] * len(input_ids)
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        start = len(tokenizer.apply_chat_template(messages[:index], tokenize=True, add_generation_prompt=True))
        end = len(tokenizer.apply_chat_template(messages[: index + 1], tokenize=True))
        for position in range(start, min(end, len(mask))):
            mask[position] = 1
    return mask


def tokenize_conversation(tokenizer: Any, messages: list[dict[str, Any]]) -> Sample:
    """Tokenizes one conversation with the chat template; labels only on assistant tokens.

    Args:
        tokenizer: A Hugging Face tokenizer with a chat template.
        messages: ``[{"role": ..., "content": ...}, ...]``.

    Returns:
        The sample (labels are ``IGNORE_INDEX`` except on assistant turns).
    """
    encoded = tokenizer.apply_chat_template(
        messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    input_ids = list(encoded["input_ids"])
    mask = list(encoded.get("assistant_masks") or [])
    if not any(mask):
        mask = _assistant_mask_by_prefix(tokenizer, messages, input_ids)
    labels = [token if flag else IGNORE_INDEX for token, flag in zip(input_ids, mask, strict=True)]
    return {"input_ids": input_ids, "labels": labels}


def read_jsonl_rows(path: Path) -> Iterator[dict[str, Any]]:
    """Yields the JSON object of each non-blank line of a JSONL file that ``train_model`` already checked."""
    with Path(path).open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def tokenize_dataset(tokenizer: Any, rows: Iterable[dict[str, Any]], max_seq_len: int, path: Any = "") -> list[Sample]:
    """Tokenizes chat rows, dropping samples longer than ``max_seq_len`` or without assistant tokens.

    Args:
        tokenizer: A tokenizer with a chat template.
        rows: Checked ``{"messages": [...]}`` rows with string contents.
        max_seq_len: Longest kept sample, in tokens.
        path: Where the rows come from, for the error message.

    Returns:
        The kept samples, in file order.

    Raises:
        LocalTrainingError: No sample is left.
    """
    samples = [tokenize_conversation(tokenizer, row["messages"]) for row in rows]
    kept = [s for s in samples if len(s["input_ids"]) <= max_seq_len and any(t != IGNORE_INDEX for t in s["labels"])]
    if not kept:
        raise LocalTrainingError(
            f"{path}: none of {len(samples)} samples is trainable (each needs an assistant turn and at most "
            f"max_seq_len={max_seq_len} tokens); raise max_seq_len or check the data"
        )
    return kept
