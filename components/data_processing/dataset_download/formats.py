"""Input formats (component README): their detection and conversion to chat ``messages`` rows, other keys kept."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable

from components._common.chat_errors import RowError
from components._common.chat_format import EXPECTED_CHAT_FORMAT, MESSAGES_NOT_FOUND
from components._common.reward_rows import REWARD_FORMATS, reward_row_format

#: Formats accepted by ``input_format`` besides ``auto``; the reward formats are GRPO's prompt rows, kept as they are.
FORMATS = ("messages", "alpaca", "sharegpt", "prompt_completion", *REWARD_FORMATS)
#: How many leading rows :func:`detect_format` looks at.
DETECTION_ROWS = 100
#: ShareGPT speaker names that are not chat roles, and the roles they become (others are kept: a role, or a reject).
SHAREGPT_ROLES = {
    "human": "user", "gpt": "assistant", "model": "assistant", "function_response": "tool", "observation": "tool",
}  # fmt: skip


def _text_field(row: dict, key: str, required: bool = True) -> str:
    """Returns ``row[key]`` as a string, raising :class:`RowError` when it is missing or not a string."""
    value = row.get(key)
    if value is None:
        if required:
            raise RowError("missing_field", f"no `{key}` key")
        return ""
    if type(value) is not str:
        raise RowError("field_not_string", f"`{key}` is {type(value).__name__}")
    return value


def _extras(row: dict, consumed: tuple[str, ...]) -> dict:
    return {key: value for key, value in row.items() if key not in consumed}


def from_alpaca(row: dict) -> dict:
    """Converts an alpaca row: system (optional), user = instruction + blank line + input, assistant = output."""
    instruction = _text_field(row, "instruction")
    extra_input = _text_field(row, "input", required=False)
    output = _text_field(row, "output")
    system = _text_field(row, "system", required=False)
    user = f"{instruction}\n\n{extra_input}" if extra_input.strip() else instruction
    messages = [{"role": "system", "content": system}] if system.strip() else []
    messages += [{"role": "user", "content": user}, {"role": "assistant", "content": output}]
    return {"messages": messages, **_extras(row, ("instruction", "input", "output", "system"))}


def from_sharegpt(row: dict) -> dict:
    """Converts a ShareGPT row: each ``{from, value}`` turn becomes ``{role, content}``, other turn keys kept."""
    turns = row.get("conversations")
    if turns is None:
        raise RowError("missing_field", "no `conversations` key")
    if type(turns) is not list:
        raise RowError("messages_not_list", f"conversations is {type(turns).__name__}, not a list")
    system = _text_field(row, "system", required=False)
    messages = [{"role": "system", "content": system}] if system.strip() else []
    for index, turn in enumerate(turns):
        if type(turn) is not dict:
            raise RowError("message_not_object", f"conversations[{index}] is {type(turn).__name__}")
        speaker = turn.get("from")
        role = SHAREGPT_ROLES.get(speaker, speaker) if isinstance(speaker, str) else speaker
        message = {"role": role, "content": turn.get("value")}
        message.update((key, value) for key, value in turn.items() if key not in ("from", "value"))
        messages.append(message)
    return {"messages": messages, **_extras(row, ("conversations", "system"))}


def _turns(row: dict, key: str, role: str) -> list:
    """A prompt/completion field as messages: a string becomes one ``role`` message, a list is taken as messages."""
    value = row.get(key)
    if value is None:
        raise RowError("missing_field", f"no `{key}` key")
    if type(value) is str:
        return [{"role": role, "content": value}]
    if type(value) is list:
        return list(value)
    raise RowError("field_not_string", f"`{key}` is {type(value).__name__}, not a string or a list of messages")


def from_prompt_completion(row: dict) -> dict:
    """Converts a prompt/completion row: prompt → user turn(s), completion → assistant turn(s)."""
    messages = _turns(row, "prompt", "user") + _turns(row, "completion", "assistant")
    return {"messages": messages, **_extras(row, ("prompt", "completion"))}


#: The converter of each format but ``messages`` (whose rows are kept as they are).
CONVERTERS: dict[str, Callable[[dict], dict]] = {
    "alpaca": from_alpaca,
    "sharegpt": from_sharegpt,
    "prompt_completion": from_prompt_completion,
}


#: The keys that make a row look like each format, in the order they are tried.
FORMAT_KEYS = {
    "messages": ("messages",),
    "sharegpt": ("conversations",),
    "alpaca": ("instruction", "output"),
    "prompt_completion": ("prompt", "completion"),
}


def row_format(row: object) -> str | None:
    """The format a single row looks like, judged by its keys, or ``None``."""
    if type(row) is not dict:
        return None
    if reward_row_format(row):  # before `messages`: a reward row's prompt may be messages
        return reward_row_format(row)
    return next((name for name, keys in FORMAT_KEYS.items() if all(key in row for key in keys)), None)


def detect_format(rows: Iterable[object], source: str = "the dataset") -> tuple[str, str]:
    """``(format, a sentence saying why)`` from the first :data:`DETECTION_ROWS` rows.

    Raises:
        ValueError: No row matches a known format, or the first rows look like different formats.
    """
    head = list(itertools.islice(rows, DETECTION_ROWS))
    looked = len(head)
    seen = dict(Counter(filter(None, map(row_format, head))))
    if not looked:
        raise ValueError(f"empty dataset: {source} has no readable rows")
    if not seen:
        raise ValueError(
            f"{EXPECTED_CHAT_FORMAT}: {MESSAGES_NOT_FOUND.split(' (')[0]} in the first {looked} rows of {source}, "
            "nor the keys of another known format (input_format='auto' knows messages | conversations | "
            "instruction+output | prompt+completion | ground_truth | target_tool_name); convert the data, or set "
            "input_format explicitly"
        )
    if len(seen) > 1:
        raise ValueError(
            f"input_format='auto': the first {looked} rows of {source} mix formats {seen}; set input_format explicitly"
        )
    chosen, count = next(iter(seen.items()))
    return chosen, f"auto-detected `{chosen}` ({count} of the first {looked} rows have its keys)"
