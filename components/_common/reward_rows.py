"""GRPO's prompt rows: a prompt and what a verifiable reward checks the completion against (standard library only).

The two formats Training Hub 0.11.2's GRPO reads: ``reward_answer`` (``question`` or a ``messages`` prompt ending on
a user turn, and ``ground_truth``) and ``reward_tool_call`` (``question``, ``tools``, ``target_tool_name``,
``target_arguments``). The rules are named like the chat rows' (:data:`~components._common.chat_errors.RULES`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REWARD_ANSWER = "reward_answer"
REWARD_TOOL_CALL = "reward_tool_call"
#: The dataset step's ``input_format`` values of GRPO's prompt rows (never converted to chat).
REWARD_FORMATS = (REWARD_ANSWER, REWARD_TOOL_CALL)
_TOOL_CALL_KEYS = ("question", "tools", "target_tool_name", "target_arguments")
_PROMPT_ROLES = ("system", "user", "assistant", "tool")


class RewardRowError(ValueError):
    """A reward row file breaks a rule: ``file:line [rule] detail`` in one line."""


def reward_row_format(row: object) -> str | None:
    """The reward format a row looks like by its keys, or ``None``."""
    if type(row) is not dict:
        return None
    if "target_tool_name" in row:
        return REWARD_TOOL_CALL
    if "ground_truth" in row:
        return REWARD_ANSWER
    return None


def _check_prompt(row: dict) -> tuple[str, str] | None:
    question = row.get("question")
    if question is not None:
        if type(question) is not str or not question.strip():
            return "prompt_missing", f"`question` is {question!r:.60}"
        return None
    messages = row.get("messages")
    if type(messages) is not list or not messages:
        return "prompt_missing", "neither a `question` string nor a non-empty `messages` list"
    for index, message in enumerate(messages):
        if type(message) is not dict or message.get("role") not in _PROMPT_ROLES:
            return "prompt_missing", f"messages[{index}] is not a message with a role of {', '.join(_PROMPT_ROLES)}"
        content = message.get("content")
        if type(content) is not str or not content.strip():
            return "prompt_missing", f"messages[{index}].content is not a non-empty string"
    if messages[-1]["role"] != "user":
        return "prompt_missing", f"the prompt ends on a {messages[-1]['role']} turn, not a user turn"
    return None


def check_reward_row(row: object, row_format: str) -> tuple[str, str] | None:
    """Checks one row of ``row_format``; ``None`` when usable, else ``(rule, detail)``."""
    if type(row) is not dict:
        return "not_an_object", f"row is {type(row).__name__}"
    if row_format == REWARD_TOOL_CALL:
        missing = [key for key in _TOOL_CALL_KEYS if key not in row]
        if missing:
            return "missing_field", f"no `{missing[0]}` key (a {REWARD_TOOL_CALL} row has {', '.join(_TOOL_CALL_KEYS)})"
        problem = _check_prompt({"question": row["question"]})
        if problem is not None:
            return problem
        tools, name, arguments = row["tools"], row["target_tool_name"], row["target_arguments"]
        if type(tools) is not list or not all(type(tool) is dict for tool in tools):
            return "tool_call_invalid", f"`tools` is {type(tools).__name__}, not a list of objects"
        if type(name) is not str or not name.strip():
            return "tool_call_invalid", f"`target_tool_name` is {name!r:.60}"
        if type(arguments) is not dict:
            return "tool_call_invalid", f"`target_arguments` is {type(arguments).__name__}, not an object"
        if type(row.get("system_prompt", "")) is not str:
            return "field_not_string", "`system_prompt` is not a string"
        return None
    if "ground_truth" not in row:
        return "missing_field", f"no `ground_truth` key (a {REWARD_ANSWER} row has `question` and `ground_truth`)"
    problem = _check_prompt(row)
    if problem is not None:
        return problem
    truth = row["ground_truth"]
    if type(truth) is bool or not isinstance(truth, (str, int, float)) or not str(truth).strip():
        return "ground_truth_invalid", f"`ground_truth` is {truth!r:.60}"
    return None


def prompt_messages(row: dict) -> list[dict[str, str]]:
    """The chat prompt: ``messages``, else the system prompt (tool-call rows) and ``question``."""
    if "question" not in row:
        return [{"role": message["role"], "content": message["content"]} for message in row["messages"]]
    system = row.get("system_prompt", "") if reward_row_format(row) == REWARD_TOOL_CALL else ""
    messages = [{"role": "system", "content": system}] if system.strip() else []
    return [*messages, {"role": "user", "content": row["question"]}]


def iter_reward_rows(path: Path, label: str = "dataset") -> Iterator[dict[str, Any]]:
    """Yields the checked rows of a reward JSONL file, streaming; the format is the first row's.

    Raises:
        RewardRowError: A line is not JSON, a row breaks a rule or is of the other format, or the file holds no row.
    """
    from components._common.chat_errors import RULES

    row_format = None
    count = 0
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{label} {path}:{number}"
            try:
                row = json.loads(line)
            except ValueError as error:
                raise RewardRowError(f"{where} [invalid_json] {error}") from None
            row_format = row_format or reward_row_format(row) or REWARD_ANSWER
            problem = check_reward_row(row, row_format)
            if problem is not None:
                rule, detail = problem
                raise RewardRowError(f"{where} [{rule}] {detail} ({RULES[rule]})")
            count += 1
            yield row
    if not count:
        raise RewardRowError(f"{label} {path} [no_rows] holds no reward rows ({RULES['no_rows']})")


def load_reward_rows(path: Path, label: str = "dataset") -> list[dict[str, Any]]:
    """Every checked row of a reward JSONL file (:func:`iter_reward_rows`)."""
    return list(iter_reward_rows(path, label))
