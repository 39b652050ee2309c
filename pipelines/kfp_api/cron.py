"""Cron expressions of recurring runs, checked with ``croniter`` as the KFP scheduler (robfig/cron) reads them.

6 fields with seconds, or a descriptor (``@daily``, ``@every 1h30m``). The message names the wrong field, or the
6-field expression a 5-field (crontab) one probably means. The few expressions croniter accepts and robfig/cron
refuses (day-of-week ``7``, a range ``5-1``) are refused by the KFP API server itself.
"""

from __future__ import annotations

import re

_FIELDS = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
#: Allowed values of each field, for the message.
_ALLOWED = ("0-59", "0-59", "0-23", "1-31", "1-12 or JAN-DEC", "0-6 or SUN-SAT")
#: A valid expression whose fields are swapped one at a time for the user's, to find the wrong one.
_PROBE = ("0", "0", "0", "1", "1", "*")
_DESCRIPTORS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
#: ``@every <Go duration>`` (robfig/cron), e.g. ``@every 1h30m``; croniter does not know it.
_GO_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+")
_FORMAT = (
    "KFP cron has 6 fields: second minute hour day-of-month month day-of-week, e.g. '0 0 2 * * *' (02:00 daily), "
    "or a descriptor such as @daily or '@every 6h'"
)


def _parses(fields: list[str] | tuple[str, ...]) -> bool:
    from croniter import CroniterError, croniter

    try:
        croniter.expand(" ".join(fields), second_at_beginning=True)
    except (CroniterError, ValueError):
        return False
    return True


def validate_cron(expression: str) -> str:
    """``expression`` stripped, once checked as the KFP scheduler reads it (6 fields with seconds, or a descriptor).

    Raises:
        ValueError: The expression, the field that is wrong and what it allows (for 5 fields: the 6-field guess).
    """
    expression = expression.strip()
    if expression.startswith("@"):
        return _validate_descriptor(expression)
    fields = expression.split()
    if len(fields) == 5:
        raise ValueError(
            f"cron {expression!r} has 5 fields, but {_FORMAT}; did you mean '0 {expression}'? "
            "(KFP would read a 5-field expression as starting with seconds)"
        )
    if len(fields) != 6:
        raise ValueError(f"cron {expression!r} has {len(fields)} fields, but {_FORMAT}")
    if _parses(fields):
        return expression
    for index, (name, allowed) in enumerate(zip(_FIELDS, _ALLOWED)):
        probe = list(_PROBE)
        probe[index] = fields[index]
        if not _parses(probe):
            raise ValueError(
                f"cron {expression!r}: {name} field {fields[index]!r} is not valid (values {allowed}, '*', '?', "
                f"ranges a-b, steps */n, lists a,b); {_FORMAT}"
            )
    raise ValueError(f"cron {expression!r}: the fields do not combine into a schedule; {_FORMAT}")


def _validate_descriptor(expression: str) -> str:
    if expression.lower() in _DESCRIPTORS:
        return expression
    keyword, _, duration = expression.partition(" ")
    if keyword.lower() == "@every" and _GO_DURATION.fullmatch(duration.strip()) and re.search(r"[1-9]", duration):
        return expression
    raise ValueError(
        f"cron {expression!r}: unknown descriptor; use one of {', '.join(sorted(_DESCRIPTORS))} or "
        "'@every <duration>' (e.g. '@every 1h30m')"
    )
