"""What a broken chat row or data file says: the rules by name, the two error types, the excerpt of a record."""

from __future__ import annotations

import dataclasses
import re

#: Every rule a row or a file can break, by name, with what it requires (used in errors, reports and metrics).
RULES: dict[str, str] = {
    "invalid_json": "each line/record must be valid JSON",
    "invalid_utf8": "the text must be valid UTF-8",
    "nesting_too_deep": "JSON may not nest deeper than the parser's limit (about 1000 levels)",
    "not_an_object": "each row must be a JSON object",
    "missing_field": "the fields of the input format must be present",
    "field_not_string": "the text fields of the input format must be strings",
    "messages_not_list": "`messages` must be a list",
    "messages_empty": "`messages` must not be empty",
    "message_not_object": "each message must be an object",
    "role_invalid": "each message `role` must be one of system, user, assistant, tool",
    "content_not_string": "each message `content` must be a string or a list of text parts",
    "content_part_invalid": 'each part of a list `content` must be {"type": "text", "text": "<string>"}',
    "content_empty": "each message `content` must be non-empty (not only whitespace)",
    "system_not_first": "a system message may only be the first message",
    "no_assistant_turn": "a conversation needs at least one assistant message",
    "trailing_user": "a conversation must not end on a user message (see allow_trailing_user)",
    "last_not_assistant": "a held-out conversation must end with the assistant's reference answer",
    "no_user_turn": "a held-out conversation needs a user message before the reference answer",
    "bad_compression": "a .gz file must be a complete gzip stream",
    "invalid_csv": "a .csv file must be readable by Python's csv module",
    "bad_parquet": "a .parquet file must be a complete, readable Parquet file",
    "no_rows": "a data file must hold at least one row",
    "record_too_large": "a JSONL line, .json array element or CSV record may not be longer than max_line_bytes",
    "decompressed_too_large": "a .gz file (or a Parquet file, decoded) may not expand past max_decompressed_bytes",
    # GRPO's prompt rows (components/_common/reward_rows.py)
    "prompt_missing": "a reward row needs a non-empty `question` string or a `messages` prompt ending on a user turn",
    "ground_truth_invalid": "a `reward_answer` row's `ground_truth` must be a non-empty string or a number",
    "tool_call_invalid": (
        "a `reward_tool_call` row needs `tools` (a list of objects), `target_tool_name` (a non-empty string) and "
        "`target_arguments` (an object)"
    ),
}
_EXCERPT_CHARS = 120
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class RowError(ValueError):
    """A row breaks one of :data:`RULES` (``detail``: e.g. ``messages[2].role='bot'``)."""

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(f"{rule}: {detail}")
        self.rule = rule
        self.detail = detail


class ChatFormatError(ValueError):
    """A row or a file breaks a rule, in one line: ``where [rule] detail — excerpt`` (``where``: ``file:line``)."""

    def __init__(self, where: str, rule: str, detail: str, excerpt: str = "") -> None:
        tail = f" — {excerpt}" if excerpt else ""
        super().__init__(f"{where} [{rule}] {detail} ({RULES[rule]}){tail}")
        self.where, self.rule, self.detail, self.excerpt = where, rule, detail, excerpt


@dataclasses.dataclass(slots=True, eq=False)
class Unreadable:
    """A record that could not be decoded: the rule it breaks, why, and a short excerpt of its text."""

    rule: str
    reason: str
    excerpt: str


def excerpt(text: str | bytes) -> str:
    r"""A short, single-line excerpt of a record; control characters written as ``\xNN`` (no terminal escapes)."""
    if isinstance(text, bytes):
        text = text[: _EXCERPT_CHARS * 4].decode("utf-8", errors="replace")
    text = _CONTROL_CHARACTERS.sub(lambda m: f"\\x{ord(m[0]):02x}", " ".join(text[: _EXCERPT_CHARS * 4].split()))
    return text if len(text) <= _EXCERPT_CHARS else text[: _EXCERPT_CHARS - 1] + "…"
