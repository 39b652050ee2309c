"""One retry policy (on ``tenacity``) for calls whose client has none: bounded attempts, jittered backoff, deadline.

Only :func:`is_transient` failures are retried by default; ``Retry-After`` is honoured up to a bound; no wait passes
the deadline; :class:`GaveUp` carries the last error for the caller's own one-line message.
"""

from __future__ import annotations

import dataclasses
import json
import random
import socket
import ssl
import time
import urllib.error
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import tenacity

T = TypeVar("T")
#: HTTP statuses that mean "try again later": request timeout, throttled, server errors a proxy or server recovers from.
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries; waits from ``initial_delay_s`` growing by ``factor`` to ``max_delay_s``, plus ``jitter``.

    A ``Retry-After`` longer than ``max_retry_after_s`` is cut to it.
    """

    attempts: int = 5
    initial_delay_s: float = 1.0
    max_delay_s: float = 30.0
    factor: float = 2.0
    jitter: float = 0.1
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise ValueError(f"RetryPolicy attempts={self.attempts!r}: must be an integer >= 1")
        for name in ("initial_delay_s", "max_delay_s", "jitter", "max_retry_after_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"RetryPolicy {name}={getattr(self, name)!r}: must be >= 0")
        if self.factor < 1:
            raise ValueError(f"RetryPolicy factor={self.factor!r}: must be >= 1")

    def delay_s(self, retry_index: int) -> float:
        """The wait before retry number ``retry_index`` (0-based), jitter included."""
        base = min(self.max_delay_s, self.initial_delay_s * self.factor**retry_index)
        return base * (1.0 + self.jitter * random.random())


class GaveUp(Exception):
    """Every try failed transiently (``reason`` ``"attempts"``) or the deadline came first (``"deadline"``)."""

    def __init__(self, last: BaseException, attempts: int, reason: str) -> None:
        super().__init__(f"gave up after {attempts} attempt(s) ({reason}): {describe(last)}")
        self.last, self.attempts, self.reason = last, attempts, reason


def status_of(error: BaseException) -> int | None:
    """The HTTP status an error carries (``status``, ``code``, ``status_code`` or its response's), if any."""
    answered = getattr(getattr(error, "response", None), "status_code", None)  # requests/httpx responses
    for value in (*(getattr(error, name, None) for name in ("status", "code", "status_code")), answered):
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def retry_after_s(error: BaseException) -> float | None:
    """The wait a ``Retry-After`` header of the error's answer asks for (delta-seconds or an HTTP date), if any."""
    import urllib3

    holders = (getattr(error, "response", None), error)
    headers = next((h for h in (getattr(o, "headers", None) for o in holders) if hasattr(h, "get")), None)
    value = (headers.get("Retry-After") or headers.get("retry-after")) if headers is not None else None
    try:
        return float(urllib3.util.Retry().parse_retry_after(value)) if isinstance(value, str) and value else None
    except urllib3.exceptions.InvalidHeader:
        return None


def error_chain(error: BaseException) -> Iterable[BaseException]:
    """The error, the errors it wraps (``reason``, ``os_error``, ``__cause__``, ``__context__``), depth-first."""
    seen: set[int] = set()
    stack = [error]
    while stack:
        current = stack.pop()
        if isinstance(current, BaseException) and id(current) not in seen:
            seen.add(id(current))
            yield current
            stack += [getattr(current, "reason", None), getattr(current, "os_error", None)]
            stack += [current.__cause__, current.__context__]


def is_tls_error(error: BaseException) -> bool:
    """Whether the error is (or wraps) a TLS failure, e.g. an unverified certificate: final, never retried."""
    return any(isinstance(c, ssl.SSLError) or "CERTIFICATE_VERIFY_FAILED" in str(c) for c in error_chain(error))


def is_transient(error: BaseException, statuses: frozenset[int] = TRANSIENT_STATUSES) -> bool:
    """Whether a failed call is worth retrying: an answer with one of ``statuses``, or no answer (never TLS)."""
    status = status_of(error)
    if status is not None:
        return status in statuses
    if is_tls_error(error):
        return False
    if isinstance(error, (ConnectionError, TimeoutError, socket.gaierror)):
        return True
    if isinstance(error, urllib.error.URLError):
        return not isinstance(error, urllib.error.HTTPError)
    module = type(error).__module__.split(".")[0]
    if module == "urllib3":
        import urllib3

        return isinstance(error, urllib3.exceptions.HTTPError)
    if module == "aiohttp":
        import aiohttp

        return isinstance(error, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError))
    return False


def answer_message(error: BaseException) -> str:
    """The server's own words in an error's answer: its JSON body's ``message``, else the body (500 characters)."""
    body = getattr(error, "body", None) or ""
    try:
        return str(json.loads(body).get("message", body))[:500]
    except (ValueError, AttributeError, TypeError):
        return str(body)[:500]


def describe(error: BaseException) -> str:
    """A short one-line description of an error: ``HTTP 503`` or ``ReadTimeoutError: ...``."""
    status, text = status_of(error), " ".join(str(error).split())
    if status is not None:
        return f"HTTP {status}"
    return f"{type(error).__name__}: {text[:300]}" if text else type(error).__name__


def single_try_transport() -> Any:
    """A urllib3 ``Retry`` trying each request once (redirects followed), for clients this policy retries."""
    import urllib3

    return urllib3.util.Retry(total=None, connect=0, read=0, status=0, other=0, redirect=5)


def call_with_retries(
    func: Callable[[], T],
    policy: RetryPolicy = RetryPolicy(),
    *,
    retryable: Callable[[BaseException], bool] = is_transient,
    on_retry: Callable[[int, float, BaseException], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    deadline: float | None = None,
) -> T:
    """Calls ``func()`` until it succeeds, fails for good, or the policy or ``deadline`` (``clock`` time) says stop.

    ``on_retry(attempt, wait_s, error)`` runs before each wait; the last try is made at the deadline.

    Raises:
        GaveUp: Every try failed with a retryable error, or the try at the deadline failed too.
    """

    def asked_s(state: tenacity.RetryCallState) -> float | None:  # the bounded Retry-After
        asked = retry_after_s(state.outcome.exception()) if state.outcome is not None else None
        return None if asked is None else min(asked, policy.max_retry_after_s)

    def wait(state: tenacity.RetryCallState) -> float:  # cut to end at the deadline: the last try is made at it
        wait_s = max(policy.delay_s(state.attempt_number - 1), asked_s(state) or 0.0)
        return wait_s if deadline is None else min(wait_s, max(deadline - clock(), 0.0))

    def past_deadline(state: tenacity.RetryCallState) -> bool:  # or the server asks to wait past it
        remaining = float("inf") if deadline is None else deadline - clock()
        return remaining <= 0 or (asked_s(state) or 0.0) > remaining

    def before_sleep(state: tenacity.RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            on_retry(state.attempt_number, state.upcoming_sleep, state.outcome.exception())

    stop = tenacity.stop_after_attempt(policy.attempts) | past_deadline
    retry = tenacity.retry_if_exception(retryable)
    try:
        return tenacity.Retrying(sleep=sleep, stop=stop, wait=wait, retry=retry, before_sleep=before_sleep)(func)
    except tenacity.RetryError as error:
        state = error.last_attempt
        reason = "attempts" if state.attempt_number >= policy.attempts else "deadline"
        raise GaveUp(state.exception(), state.attempt_number, reason) from None
