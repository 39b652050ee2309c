"""The chat-format rules that every step applies: what a usable ``{"messages": [...]}`` row is; JSON by ``msgspec``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import msgspec

from components._common.chat_errors import ChatFormatError, RowError, Unreadable, excerpt
from components._common.chat_files import ARTIFACT_READ_LIMITS, iter_lines

#: Roles a chat message may have.
ROLES = frozenset({"system", "user", "assistant", "tool"})
#: What a row without ``messages`` lacks, and how a failed dataset's error begins (the RHOAI guide's strings).
MESSAGES_NOT_FOUND = "messages field not found (no `messages` key)"
EXPECTED_CHAT_FORMAT = "Expected chat format"


def message_text(content: object) -> str:
    """The text of a message ``content``: the string, or a list's text parts joined with newlines.

    Raises:
        RowError: ``content_not_string`` or ``content_part_invalid``.
    """
    if type(content) is str:
        return content
    if type(content) is not list:
        raise RowError("content_not_string", f"content is {type(content).__name__}")
    texts = []
    for index, part in enumerate(content):
        if type(part) is not dict or part.get("type") != "text" or type(part.get("text")) is not str:
            shown = part.get("type") if type(part) is dict else type(part).__name__
            raise RowError("content_part_invalid", f"content[{index}] is {shown!r}, not a text part")
        texts.append(part["text"])
    return "\n".join(texts)


def check_messages(
    messages: object, allow_trailing_user: bool = False, heldout: bool = False
) -> tuple[str, str] | None:
    """Checks ``messages`` against the conversation rules: ``None`` if usable, else ``(rule, detail)``.

    ``heldout`` adds ``last_not_assistant`` and ``no_user_turn`` (the last message is the reference answer).
    """
    if type(messages) is not list:
        return "messages_not_list", f"messages is {type(messages).__name__}, not a list"
    if not messages:
        return "messages_empty", "messages is []"
    has_assistant = has_user = False
    for index, message in enumerate(messages):
        if type(message) is not dict:
            return "message_not_object", f"messages[{index}] is {type(message).__name__}"
        role = message.get("role")
        if type(role) is not str or role not in ROLES:
            return "role_invalid", f"messages[{index}].role={role!r}"
        content = message.get("content")
        try:
            text = message_text(content)
        except RowError as error:
            return error.rule, f"messages[{index}].{error.detail}"
        if not text or text.isspace():
            return "content_empty", f"messages[{index}].content={content!r}"[:200]
        if role == "assistant":
            has_assistant = True
        elif role == "user":
            has_user = True
        elif role == "system" and index:
            return "system_not_first", f"messages[{index}] is a system message"
    last = len(messages) - 1
    if not has_assistant:
        return "no_assistant_turn", f"no assistant message among {len(messages)}"
    if heldout and messages[-1]["role"] != "assistant":
        return "last_not_assistant", f"messages[{last}] (the last) is a {messages[-1]['role']} message"
    if not allow_trailing_user and messages[-1]["role"] == "user":
        return "trailing_user", f"messages[{last}] (the last) is a user message"
    if heldout and not has_user:
        return "no_user_turn", f"no user message before messages[{last}]"
    return None


def check_row(row: object, allow_trailing_user: bool = False, heldout: bool = False) -> tuple[str, str] | None:
    """Checks a row in ``messages`` form (see :func:`check_messages`); ``None`` when usable, else ``(rule, detail)``."""
    if type(row) is not dict:
        return "not_an_object", f"row is {type(row).__name__}"
    if "messages" not in row:
        return "missing_field", MESSAGES_NOT_FOUND
    return check_messages(row["messages"], allow_trailing_user, heldout)


def normalize_row(row: dict) -> dict:
    """A checked ``row`` with every list-of-parts ``content`` joined into a string."""
    messages = row["messages"]
    if all(type(message["content"]) is str for message in messages):
        return row
    joined = [{**message, "content": message_text(message["content"])} for message in messages]
    return {**row, "messages": joined}


class _Message(msgspec.Struct, gc=False):
    role: Literal["system", "user", "assistant", "tool"]
    content: str


class _Row(msgspec.Struct, gc=False):
    messages: list[_Message]


_TYPED = msgspec.json.Decoder(_Row)
_ANY = msgspec.json.Decoder()
_ENCODE = msgspec.json.encode


def decode_json(data: bytes | str) -> object:
    """One JSON document's value, or an :class:`Unreadable` naming the rule it breaks (never raises)."""
    try:
        return _ANY.decode(data)
    except msgspec.DecodeError as error:
        if isinstance(data, bytes):  # bad bytes outside a string are a JSON error to msgspec: name the real cause
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as utf8_error:
                return _not_utf8(data, utf8_error)
        return Unreadable("invalid_json", f"invalid JSON: {error}", excerpt(data))
    except UnicodeDecodeError as error:
        return _not_utf8(data, error)
    except RecursionError:
        return Unreadable("nesting_too_deep", "JSON nested too deep to decode", excerpt(data))


def _not_utf8(data: bytes | str, error: UnicodeDecodeError) -> Unreadable:
    return Unreadable("invalid_utf8", f"not valid UTF-8 at byte {error.start} ({error.reason})", excerpt(data))


def encode_json(value: object) -> bytes:
    """One JSON document as compact UTF-8 bytes (no newline)."""
    return _ENCODE(value)


_NOT_FAST = (msgspec.DecodeError, UnicodeDecodeError, RecursionError, TypeError)  # TypeError: not bytes (a reject)


def fast_valid_lines(lines: list, allow_trailing_user: bool = False) -> list[bool]:
    """Whether each JSON line is certainly a usable row (string contents); ``False``: :func:`check_row` decides."""
    decode = _TYPED.decode
    verdicts = []
    for line in lines:
        try:
            messages = decode(line).messages
        except _NOT_FAST:
            verdicts.append(False)
            continue
        usable = False  # until an assistant turn is seen; None once a rule is broken
        for index, message in enumerate(messages):
            content = message.content
            if not content or content.isspace():
                usable = None
                break
            role = message.role
            if role == "assistant":
                usable = True
            elif role == "system" and index:
                usable = None
                break
        verdicts.append(usable is True and (allow_trailing_user or messages[-1].role != "user"))
    return verdicts


def iter_chat_file(
    path: Path, *, allow_trailing_user: bool, heldout: bool = False, label: str = "", require_rows: bool = True
) -> Iterator[tuple[int, dict]]:
    """Yields ``(line_number, row)`` for every row of a chat JSONL file (``.gz`` too), checked and normalized.

    ``label`` (e.g. ``train_dataset``) goes before the file name in errors; ``require_rows`` refuses an empty file.

    Raises:
        ChatFormatError: At the first row that breaks a rule (naming file, line and rule), or ``no_rows``.
    """
    where = f"{label} {path}" if label else str(path)
    rows = 0
    for line_number, line in iter_lines(path, ARTIFACT_READ_LIMITS):
        value = line if type(line) is Unreadable else decode_json(line)
        if type(value) is Unreadable:
            raise ChatFormatError(f"{where}:{line_number}", value.rule, value.reason, value.excerpt)
        problem = check_row(value, allow_trailing_user, heldout)
        if problem is not None:
            raise ChatFormatError(f"{where}:{line_number}", *problem, excerpt(line))
        rows += 1
        yield line_number, normalize_row(value)
    if not rows and require_rows:
        raise ChatFormatError(where, "no_rows", "the file holds no non-blank line")


def count_chat_rows(path: Path, *, allow_trailing_user: bool, heldout: bool = False, label: str = "") -> int:
    """Checks every row of a chat JSONL file (see :func:`iter_chat_file`) and returns how many there are."""
    return sum(1 for _ in iter_chat_file(path, allow_trailing_user=allow_trailing_user, heldout=heldout, label=label))
