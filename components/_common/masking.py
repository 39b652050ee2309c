"""Secrets masked: whatever a component prints, raises or writes never holds a secret (standard library only).

:func:`mask_text` masks every spelling of the known secrets, then :data:`PATTERNS` catch the ones it never saw;
:func:`masked` wraps a component's entry function (stdout, stderr, root logger, leaving exception).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import logging
import os
import re
import sys
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TextIO, TypeVar

#: Environment variables that hold secrets (mounted from Kubernetes secrets).
SECRET_ENV_VARS = tuple(
    "HF_TOKEN HUGGING_FACE_HUB_TOKEN AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN KUBERNETES_AUTH_TOKEN "
    "OCI_PULL_SECRET_MODEL_DOWNLOAD MODEL_REGISTRY_TOKEN MLFLOW_TRACKING_TOKEN MLFLOW_TRACKING_PASSWORD".split()
)
#: What a masked secret becomes.
MASK = "***"
#: Shorter values are not masked by value (masking "1" would garble every number).
MIN_SECRET_CHARS = 6
_SECRET_WORDS = r"token|password|passwd|secret|api[_-]?key|access[_-]?key(?:[_-]?id)?|credentials?"
_KEY = rf"(?:[\w-]*(?:{_SECRET_WORDS}))"
#: Query parameters of signed URLs that carry a signature or a credential (any case).
SIGNED_URL_PARAMETERS = tuple(
    "X-Amz-Signature X-Amz-Credential X-Amz-Security-Token X-Goog-Signature X-Goog-Credential AWSAccessKeyId "
    "Signature sig token access_token jwt hf_token api_key apikey key code password passwd secret client_secret "
    "refresh_token id_token auth".split()
)
_SIGNED = "|".join(re.escape(name) for name in SIGNED_URL_PARAMETERS)
#: An OCI digest after an ``@`` (``repo@sha256:<hex>``): a reference, not the end of a URL's userinfo.
_NOT_A_DIGEST = r"(?![a-z][a-z0-9+._-]*:[0-9a-f]{32,})"
#: Signed query parameters, ``user:password@`` userinfo, or a lone userinfo of 6 characters or more (a token).
URL_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)([?&](?:" + _SIGNED + r")=)(?!\*\*\*)[^&#\s'\"<>]+"), r"\1" + MASK),
    (re.compile(r"(?i)(://[^/\s:@'\"]*:)(?!\*\*\*@)[^\s'\"]+(@)" + _NOT_A_DIGEST), r"\1" + MASK + r"\2"),
    (re.compile(r"(?i)(://)[^/\s:@'\"]{6,}(@)"), r"\1" + MASK + r"\2"),
)


def _mask_basic_credentials(match: re.Match[str]) -> str:
    """``Basic <base64 of user:password>`` masked; other words after "basic" are left as they are."""
    try:
        decoded = base64.b64decode(match[2] + "=" * (-len(match[2]) % 4), validate=True)
    except ValueError:
        return match[0]
    return match[1] + MASK if b":" in decoded else match[0]


def token_like(value: str) -> bool:
    """Whether a value after a secret's key looks like a secret, not a word (``check``, ``required``)."""
    value = value.strip()
    if len(value) < MIN_SECRET_CHARS or value.startswith(MASK):
        return False
    if len(value) >= 16:
        return True
    has_digit = any(c.isdigit() for c in value)
    mixed_case = any(c.islower() for c in value) and any(c.isupper() for c in value)
    has_symbol = any(c in "-_./+=~" for c in value)  # a token's alphabet; ``<|pad|>`` is no secret
    return has_digit or mixed_case or has_symbol


def _mask_value(match: re.Match[str]) -> str:
    """Group 1 (the key) kept, group 2 (the value) masked when :func:`token_like`."""
    return match[1] + MASK if token_like(match[2]) else match[0]


#: Keys whose value (JSON, YAML, ``key=value``) is a secret when it looks like one.
_VALUE_KEY = rf"(?:[\w-]*(?:{_SECRET_WORDS}|auth))"
#: A PEM private-key block to its END line (JSON-escaped newlines too), or to the end of a text cut off.
PRIVATE_KEY_BLOCK = re.compile(
    r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----)(?:.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----)|[A-Za-z0-9+/=\s\\:,-]*)",
    re.DOTALL,
)

#: Secrets whose shape alone says what they are: masked everywhere, artifacts included.
UNMISTAKABLE_PATTERNS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (PRIVATE_KEY_BLOCK, r"\1" + MASK + r"\2"),  # a block cut off has no END: its group is ""
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"), MASK),  # GitHub tokens
    (re.compile(r"\bgl(?:pat|dt|rt|ptt|soat|ft|imt|cbt|oas|agent)-[A-Za-z0-9_-]{20,}"), MASK),  # GitLab tokens
)

#: Secrets never given by value: (regex, replacement).
PATTERNS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    *UNMISTAKABLE_PATTERNS,
    (re.compile(r"hf_[A-Za-z0-9]{16,}"), MASK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"), MASK),  # a JWT: header.payload.sig
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1" + MASK),
    (
        re.compile(
            r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?(?:(?:basic|bearer|token|digest)\s+)?)"
            r"(?!\*\*\*)(?!(?:basic|bearer|token|digest)\b)([^\s'\",;}]{4,})"
        ),
        _mask_value,
    ),
    (re.compile(r"(?i)(\bbasic\s+)([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"), _mask_basic_credentials),
    (re.compile(r"(?i)(--" + _KEY + r"(?:=|\s+))(?!-)(\S+)"), _mask_value),
    (re.compile(r"(?i)(\\?['\"]" + _VALUE_KEY + r"\\?['\"]\s*:\s*\\?['\"])([^'\"\\]+)"), _mask_value),
    (re.compile(r"(?i)(\b" + _VALUE_KEY + r"\s*[=:]\s*['\"]?)(?!\*\*\*)([^\s,;'\"}&]+)"), _mask_value),
    *URL_PATTERNS,
)

#: Connection-string secrets (Azure keys, SAS signatures): ``AccountKey=...;``.
CONNECTION_STRING_SECRET = re.compile(
    r"(?i)\b(?:AccountKey|SharedAccessKey|SharedAccessSignature|Password|Pwd)=[^;\s]{4,}"
)


def looks_like_secret(value: str) -> bool:
    """Whether ``value`` holds something shaped like a secret (:data:`PATTERNS`, a connection string's key)."""
    return bool(CONNECTION_STRING_SECRET.search(value)) or mask_text(value, patterns=True) != value


_registered: set[str] = set()
T = TypeVar("T")


def register_secret(value: str | None) -> None:
    """Adds a secret this process read or was passed to what is masked from now on."""
    if value and len(value) >= MIN_SECRET_CHARS:
        _registered.add(value)


def _spellings(value: str) -> set[str]:
    """A secret as it may appear: itself, JSON-escaped, URL-quoted, and the string leaves of its JSON."""
    found = {value, json.dumps(value)[1:-1], urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value)}
    with contextlib.suppress(ValueError):
        found |= set(_json_leaves(json.loads(value)))
    return {item for item in found if len(item) >= MIN_SECRET_CHARS}


def _json_leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (Mapping, list)):
        for item in value.values() if isinstance(value, Mapping) else value:
            yield from _json_leaves(item)


@functools.lru_cache(maxsize=16)
def _all_spellings(values: frozenset[str]) -> tuple[str, ...]:
    spellings: set[str] = set()
    for value in values:
        spellings |= _spellings(value)
    return tuple(sorted(spellings, key=len, reverse=True))


def mask_text(text: str, extra: Iterable[str] = (), patterns: bool = True) -> str:
    """``text`` with every spelling of every known secret (and ``extra``) masked, then :data:`PATTERNS`.

    ``patterns=False`` applies only :data:`UNMISTAKABLE_PATTERNS` and :data:`URL_PATTERNS` (for artifacts, where a
    broader pattern could hit data such as ``"pad_token": "<|pad|>"``).
    """
    values = {os.environ.get(name, "") for name in SECRET_ENV_VARS} | _registered | set(extra)
    for value in _all_spellings(frozenset(value for value in values if len(value) >= MIN_SECRET_CHARS)):
        if value in text:
            text = text.replace(value, MASK)
    return _substitute(text, PATTERNS if patterns else (*UNMISTAKABLE_PATTERNS, *URL_PATTERNS))


def _substitute(text: str, patterns: Iterable[tuple[re.Pattern[str], Any]]) -> str:
    for pattern, replacement in patterns:
        text = pattern.sub(replacement, text)
    return text


def mask_url(text: str) -> str:
    """``text`` with signed-URL query parameters and URL userinfo masked (:data:`URL_PATTERNS`)."""
    return _substitute(text, URL_PATTERNS)


def mask_data(value: T, patterns: bool = True) -> T:
    """A copy of a JSON-like value with :func:`mask_text` applied to every string in it."""
    if isinstance(value, str):
        return mask_text(value, patterns=patterns)  # type: ignore[return-value]
    if isinstance(value, Mapping):
        return type(value)((key, mask_data(item, patterns)) for key, item in value.items())  # type: ignore[call-arg]
    if isinstance(value, (list, tuple)):
        return type(value)(mask_data(item, patterns) for item in value)  # type: ignore[return-value]
    return value


def mask_exception(error: BaseException) -> BaseException:
    """Masks the string arguments of an exception and of those it chains, in place; returns it."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        with contextlib.suppress(Exception):
            current.args = tuple(mask_text(a) if isinstance(a, str) else a for a in current.args)
        for attribute in ("msg", "reason", "detail", "message"):
            if isinstance(getattr(current, attribute, None), str):
                with contextlib.suppress(Exception):
                    setattr(current, attribute, mask_text(getattr(current, attribute)))
        current = current.__cause__ or current.__context__
    return error


def _mask_record(record: logging.LogRecord) -> bool:
    """A logging filter: masks the record's message (its arguments merged in) in place; keeps it."""
    with contextlib.suppress(Exception):
        record.msg, record.args = mask_text(record.getMessage()), ()
    return True


_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY-----")


class MaskingStream:
    """A text stream that masks each ``write``; nothing passes between a PEM BEGIN line and its END."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._in_private_key = False

    def write(self, text: str) -> int:
        """Writes ``text``, masked; returns the length of ``text`` as given."""
        given = len(text)
        if self._in_private_key:
            end = _PEM_END.search(text)
            if end is None:
                return given
            self._in_private_key = False
            text = text[end.start() :]
        begins = list(_PEM_BEGIN.finditer(text))
        if begins and not _PEM_END.search(text, begins[-1].end()):
            self._in_private_key = True
        self._stream.write(mask_text(text))
        return given

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def masked_output() -> Iterator[None]:
    """Within the block, stdout, stderr, the root logger's handlers and a leaving exception are masked."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = MaskingStream(sys.stdout), MaskingStream(sys.stderr)
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(_mask_record)
    try:
        yield
    except BaseException as error:
        raise mask_exception(error)
    finally:
        sys.stdout, sys.stderr = saved
        for handler in handlers:
            handler.removeFilter(_mask_record)


def masked(func: Callable[..., T]) -> Callable[..., T]:
    """Runs each call of a component's entry function within :func:`masked_output`."""
    return masked_output()(func)
