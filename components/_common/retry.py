"""One retry policy for every outbound call: bounded attempts, exponential backoff with jitter, transient errors only.

Built on ``tenacity``. Only :func:`is_transient` failures are retried; a ``Retry-After`` is honoured up to
:attr:`RetryPolicy.max_retry_after_s`; no wait passes the deadline. Then :class:`GaveUp` says why, with the last
error, so that each caller words its own one-line message.
"""

from __future__ import annotations

import dataclasses
import email.utils
import json
import random
import ssl
import time
import urllib.error
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import tenacity

T = TypeVar("T")
#: HTTP statuses that mean "try again later": request timeout, throttled, server errors a proxy or server recovers from.
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry one call.

    Attributes:
        attempts: Total tries (1 = no retry).
        initial_delay_s: Wait before the second try.
        max_delay_s: Upper bound of one wait (before jitter).
        factor: Growth of the wait from one try to the next.
        jitter: Each wait is lengthened by a random fraction of itself, up to this (0.1 = up to +10%).
        max_retry_after_s: The longest ``Retry-After`` honoured (a longer one is cut to this).
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
    """Every try of a call failed transiently, or the deadline came first.

    Attributes:
        last: The last error.
        attempts: How many tries were made.
        reason: ``"attempts"`` (all tries used) or ``"deadline"`` (the last try was made at the deadline, or the
            server asked to wait past it).
    """

    def __init__(self, last: BaseException, attempts: int, reason: str) -> None:
        super().__init__(f"gave up after {attempts} attempt(s) ({reason}): {describe(last)}")
        self.last = last
        self.attempts = attempts
        self.reason = reason


def status_of(error: BaseException) -> int | None:
    """The HTTP status an error carries (``status``, ``code``, ``status_code`` or its response's), if any."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):  # botocore
        answered = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    else:  # httpx and requests responses (huggingface_hub's errors)
        answered = getattr(response, "status_code", None)
    for value in (*(getattr(error, name, None) for name in ("status", "code", "status_code")), answered):
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def _headers(error: BaseException) -> Mapping[str, str] | None:
    """The response headers an error carries: ``headers``, ``response.headers`` or botocore's ``HTTPHeaders``."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        return (response.get("ResponseMetadata") or {}).get("HTTPHeaders")
    for holder in (response, error):
        headers = getattr(holder, "headers", None)
        if headers is not None and hasattr(headers, "get"):
            return headers
    return None


def retry_after_s(error: BaseException, now: Callable[[], float] = time.time) -> float | None:
    """The wait a ``Retry-After`` header of the error's answer asks for (delta-seconds or an HTTP date), if any."""
    headers = _headers(error)
    value = headers.get("Retry-After") or headers.get("retry-after") if headers is not None else None
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())


def error_chain(error: BaseException) -> Iterable[BaseException]:
    """The error, the errors it wraps (``reason``, ``os_error``, ``__cause__``, ``__context__``), depth-first."""
    seen: set[int] = set()
    stack = [error]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen or not isinstance(current, BaseException):
            continue
        seen.add(id(current))
        yield current
        stack += [getattr(current, "reason", None), getattr(current, "os_error", None)]
        stack += [current.__cause__, current.__context__]


def is_tls_error(error: BaseException) -> bool:
    """Whether the error is (or wraps) a TLS failure, e.g. an unverified certificate: final, never retried."""
    return any(
        isinstance(cause, ssl.SSLError) or "CERTIFICATE_VERIFY_FAILED" in str(cause) for cause in error_chain(error)
    )


def _is_transport_error(error: BaseException) -> bool:
    """No answer came: connection refused/reset/dropped, DNS failure or a timeout, in the stdlib or urllib3/aiohttp."""
    if isinstance(error, (ConnectionError, TimeoutError)):
        return True
    if isinstance(error, urllib.error.URLError) and not isinstance(error, urllib.error.HTTPError):
        return True
    module = type(error).__module__.split(".")[0]
    if module in ("httpx", "httpx2", "httpcore"):  # huggingface_hub's client
        return any(
            base.__name__ in ("TransportError", "ConnectError", "TimeoutException") for base in type(error).__mro__
        )
    if module == "botocore":
        from botocore.exceptions import ConnectionError as BotoConnectionError
        from botocore.exceptions import IncompleteReadError, ReadTimeoutError, ResponseStreamingError

        return isinstance(error, (BotoConnectionError, IncompleteReadError, ReadTimeoutError, ResponseStreamingError))
    if module == "urllib3":
        import urllib3

        return isinstance(error, urllib3.exceptions.HTTPError)
    if module == "aiohttp":
        import aiohttp

        return isinstance(error, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError))
    import socket

    return isinstance(error, socket.gaierror)


def is_transient(error: BaseException, statuses: frozenset[int] = TRANSIENT_STATUSES) -> bool:
    """Whether a failed call is worth retrying.

    True for an answer with one of ``statuses`` and for no answer at all (connection errors, timeouts); False for any
    other answer (4xx), TLS verification failures and everything else.
    """
    status = status_of(error)
    if status is not None:
        return status in statuses
    if is_tls_error(error):
        return False
    return _is_transport_error(error)


def answer_message(error: BaseException) -> str:
    """The server's own words in an error's answer: its JSON body's ``message``, else the body (500 characters)."""
    body = getattr(error, "body", None) or ""
    try:
        return str(json.loads(body).get("message", body))[:500]
    except (ValueError, AttributeError, TypeError):
        return str(body)[:500]


def describe(error: BaseException) -> str:
    """A short one-line description of an error: ``HTTP 503`` or ``ReadTimeoutError: ...``."""
    status = status_of(error)
    if status is not None:
        return f"HTTP {status}"
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}" if text else type(error).__name__


def single_try_transport() -> Any:
    """A urllib3 ``Retry`` that tries each request once (redirects still followed), for clients this policy retries.

    (urllib3's default would multiply a request's timeout by four.) Errors keep their shape (``MaxRetryError``).
    """
    import urllib3

    return urllib3.util.Retry(total=None, connect=0, read=0, status=0, other=0, redirect=5)


def _retrying_kwargs(
    policy: RetryPolicy,
    retryable: Callable[[BaseException], bool],
    on_retry: Callable[[int, float, BaseException], None] | None,
    deadline: float | None,
    clock: Callable[[], float],
) -> dict[str, Any]:
    def asked_s(state: tenacity.RetryCallState) -> float | None:  # the answer's Retry-After, bounded
        error = state.outcome.exception() if state.outcome is not None else None
        asked = retry_after_s(error) if error is not None else None
        return None if asked is None else min(asked, policy.max_retry_after_s)

    def wait(state: tenacity.RetryCallState) -> float:  # cut to end at the deadline: the last try is made at it
        delay = policy.delay_s(state.attempt_number - 1)
        asked = asked_s(state)
        wait_s = delay if asked is None else max(delay, asked)
        return wait_s if deadline is None else min(wait_s, max(deadline - clock(), 0.0))

    def past_deadline(state: tenacity.RetryCallState) -> bool:  # or the server asks to wait past it
        if deadline is None:
            return False
        remaining = deadline - clock()
        asked = asked_s(state)
        return remaining <= 0 or (asked is not None and asked > remaining)

    def before_sleep(state: tenacity.RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            on_retry(state.attempt_number, state.upcoming_sleep, state.outcome.exception())

    return {
        "stop": tenacity.stop_after_attempt(policy.attempts) | past_deadline,
        "wait": wait,
        "retry": tenacity.retry_if_exception(retryable),
        "before_sleep": before_sleep,
    }


def _gave_up(error: tenacity.RetryError, policy: RetryPolicy) -> GaveUp:
    state = error.last_attempt
    last = state.exception()
    reason = "attempts" if state.attempt_number >= policy.attempts else "deadline"
    return GaveUp(last, state.attempt_number, reason)


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
    """Calls ``func()`` (safe to repeat) until it succeeds, fails for good, or the policy or deadline says stop.

    Args:
        func: The call (no arguments: bind them with a lambda or ``functools.partial``).
        policy: Attempts and backoff.
        retryable: Which errors are retried (default :func:`is_transient`); any other error propagates at once.
        on_retry: Called before each wait with (attempt number, seconds to wait, error), e.g. to log a line.
        sleep: The sleep function (tests inject a fake one).
        clock: The monotonic clock the deadline is measured on.
        deadline: A ``clock()`` time no wait may pass: the last try is made at it (None: no deadline).

    Returns:
        What ``func`` returned.

    Raises:
        GaveUp: Every try failed with a retryable error, or the try at the deadline failed too.
        Exception: The first non-retryable error, unchanged.
    """
    retrying = tenacity.Retrying(sleep=sleep, **_retrying_kwargs(policy, retryable, on_retry, deadline, clock))
    try:
        return retrying(func)
    except tenacity.RetryError as error:
        raise _gave_up(error, policy) from None


async def call_with_retries_async(
    func: Callable[[], Awaitable[T]],
    policy: RetryPolicy = RetryPolicy(),
    *,
    on_retry: Callable[[int, float, BaseException], None] | None = None,
    deadline: float | None = None,
) -> T:
    """:func:`call_with_retries` (transient errors) for a coroutine function, waiting with asyncio.

    ``deadline``: a ``time.monotonic()`` time no wait may pass (each try's own timeout is the caller's).
    """
    retrying = tenacity.AsyncRetrying(**_retrying_kwargs(policy, is_transient, on_retry, deadline, time.monotonic))

    async def attempt() -> T:  # tenacity awaits only coroutine functions, not lambdas returning a coroutine
        return await func()

    try:
        return await retrying(attempt)
    except tenacity.RetryError as error:
        raise _gave_up(error, policy) from None
