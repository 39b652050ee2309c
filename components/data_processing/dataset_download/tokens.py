"""Token statistics of chat rows with a real tokenizer (its chat template when it has one), in constant memory."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field


def load_token_counter(tokenizer_source: str) -> Callable[[list[dict]], int]:
    """A function giving the token count of a conversation, from ``AutoTokenizer`` (token from ``HF_TOKEN``)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source, token=os.environ.get("HF_TOKEN") or None)

    def count(messages: list[dict]) -> int:
        if tokenizer.chat_template:
            return len(tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"])
        return len(tokenizer("\n".join(str(message.get("content", "")) for message in messages))["input_ids"])

    return count


@dataclass
class TokenStats:
    """A histogram of token counts (memory grows with distinct lengths, not rows) and the rows over a limit."""

    max_seq_len: int
    histogram: Counter = field(default_factory=Counter)

    def add(self, tokens: int) -> None:
        """Counts one row of ``tokens`` tokens."""
        self.histogram[tokens] += 1

    @property
    def rows(self) -> int:
        """Rows counted."""
        return sum(self.histogram.values())

    @property
    def rows_over_max_seq_len(self) -> int:
        """Rows longer than ``max_seq_len`` (they will be truncated or dropped by training)."""
        return sum(n for tokens, n in self.histogram.items() if tokens > self.max_seq_len)

    def percentile(self, fraction: float) -> int:
        """The smallest token count at or below which ``fraction`` of the rows lie."""
        rank, seen = fraction * self.rows, 0
        for tokens in sorted(self.histogram):
            seen += self.histogram[tokens]
            if seen >= rank:
                return tokens
        return 0

    def summary(self) -> dict[str, float]:
        """``token_min/mean/p50/p95/max``, ``token_total``, ``rows_over_max_seq_len``."""
        if not self.histogram:
            return {}
        total = sum(tokens * n for tokens, n in self.histogram.items())
        return {
            "token_min": min(self.histogram),
            "token_mean": round(total / self.rows, 2),
            "token_p50": self.percentile(0.5),
            "token_p95": self.percentile(0.95),
            "token_max": max(self.histogram),
            "token_total": total,
            "rows_over_max_seq_len": self.rows_over_max_seq_len,
        }
