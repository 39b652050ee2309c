"""The row rules of a chat dataset: every row must hold a usable ``messages`` conversation.

A row is a JSON object whose ``messages`` value is a non-empty list of message objects. Each message has a ``role``
in :data:`ROLES` and a non-empty string ``content``; a system message may only come first; at least one assistant
turn is present; the conversation does not end on a user turn unless that is allowed. Unknown keys, on the row or
on a message, are kept as they are.
"""

from __future__ import annotations

#: Roles a chat message may have.
ROLES = frozenset({"system", "user", "assistant", "tool"})

#: Every rule a row can break, by name, with what it requires (used in errors, reports and metrics).
RULES: dict[str, str] = {
    "invalid_json": "each line/record must be valid JSON",
    "not_an_object": "each row must be a JSON object",
    "missing_field": "the fields of the input format must be present",
    "field_not_string": "the text fields of the input format must be strings",
    "messages_not_list": "`messages` must be a list",
    "messages_empty": "`messages` must not be empty",
    "message_not_object": "each message must be an object",
    "role_invalid": "each message `role` must be one of system, user, assistant, tool",
    "content_not_string": "each message `content` must be a string",
    "content_empty": "each message `content` must be non-empty (not only whitespace)",
    "system_not_first": "a system message may only be the first message",
    "no_assistant_turn": "a conversation needs at least one assistant message",
    "trailing_user": "a conversation must not end on a user message (see allow_trailing_user)",
}


class RowError(ValueError):
    """A row breaks one of :data:`RULES`.

    Attributes:
        rule: The rule's name, a key of :data:`RULES`.
        detail: What exactly is wrong, e.g. ``messages[2].role='bot'``.
    """

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(f"{rule}: {detail}")
        self.rule = rule
        self.detail = detail


def check_messages(messages: object, allow_trailing_user: bool = False) -> tuple[str, str] | None:
    """Checks a ``messages`` value against the conversation rules.

    Args:
        messages: The value of a row's ``messages`` key.
        allow_trailing_user: Accept conversations whose last message is a user turn.

    Returns:
        ``None`` when the conversation is usable, else ``(rule, detail)`` for the first rule it breaks.
    """
    if type(messages) is not list:
        return "messages_not_list", f"messages is {type(messages).__name__}, not a list"
    if not messages:
        return "messages_empty", "messages is []"
    has_assistant = False
    for index, message in enumerate(messages):
        if type(message) is not dict:
            return "message_not_object", f"messages[{index}] is {type(message).__name__}"
        role = message.get("role")
        if type(role) is not str or role not in ROLES:
            return "role_invalid", f"messages[{index}].role={role!r}"
        content = message.get("content")
        if type(content) is not str:
            return "content_not_string", f"messages[{index}].content is {type(content).__name__}"
        if not content or content.isspace():
            return "content_empty", f"messages[{index}].content={content!r}"
        if role == "assistant":
            has_assistant = True
        elif role == "system" and index:
            return "system_not_first", f"messages[{index}] is a system message"
    if not has_assistant:
        return "no_assistant_turn", f"no assistant message among {len(messages)}"
    if not allow_trailing_user and messages[-1]["role"] == "user":
        return "trailing_user", f"messages[{len(messages) - 1}] (the last) is a user message"
    return None


def check_row(row: object, allow_trailing_user: bool = False) -> tuple[str, str] | None:
    """Checks a row in ``messages`` form.

    Args:
        row: A decoded row.
        allow_trailing_user: Accept conversations whose last message is a user turn.

    Returns:
        ``None`` when the row is usable, else ``(rule, detail)`` for the first rule it breaks.
    """
    if type(row) is not dict:
        return "not_an_object", f"row is {type(row).__name__}"
    if "messages" not in row:
        return "missing_field", "no `messages` key"
    return check_messages(row["messages"], allow_trailing_user)
