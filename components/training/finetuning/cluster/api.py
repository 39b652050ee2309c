"""Every Kubernetes API request of ``train_model``: deadlines, retries and the errors they end in.

:class:`Api` wraps the official client's ``CustomObjectsApi`` / ``CoreV1Api``. Each request carries
``_request_timeout=(connect, read)`` (the official client waits forever without one), the read timeout cut to what is
left of the current deadline (:meth:`Api.deadline`), so that a request blocked on an API that accepts connections but
never answers cannot outlive ``start_timeout_seconds`` / ``timeout_seconds``. Transient failures (no answer, 408, 429,
500, 502, 503, 504) are retried by the shared policy (:mod:`components._common.retry`: bounded attempts, exponential
backoff with jitter, never past the deadline); any other answer is raised at once for the caller to judge (404 and 409
mean something; 403/422 become :class:`JobApiError` with the API's own message). urllib3's own retries are turned
off so that the deadline holds (they would repeat a timed-out read three more times).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterator
from typing import Any

from components._common.retry import (
    GaveUp,
    RetryPolicy,
    call_with_retries,
    describe,
    is_transient,
    single_try_transport,
)
from components.training.finetuning.cluster.errors import JobApiError

#: What every request waits at most, unless a deadline is closer: TCP connect, then each read of the answer.
DEFAULT_CONNECT_TIMEOUT_SECONDS = 10.0
DEFAULT_READ_TIMEOUT_SECONDS = 30.0
#: The shortest connect and read timeout a request is given, also at its deadline (the poll that decides whether the
#: job finished in time is sent at the deadline): a request outlives its deadline by at most twice this.
MIN_TIMEOUT_SECONDS = 1.0


@dataclasses.dataclass(frozen=True)
class Deadline:
    """A ``clock()`` time no request may outlive, and what it comes from (named in errors)."""

    at: float
    reason: str


def api_message(error: Exception) -> str:
    """The API server's own message of an ``ApiException`` (the Status body's ``message``), else its text."""
    body = getattr(error, "body", None)
    try:
        message = json.loads(body).get("message") if body else None
    except (TypeError, ValueError, AttributeError):
        message = None
    status = getattr(error, "status", "")
    return f"HTTP {status} {getattr(error, 'reason', '') or ''}: {message or body or error}".strip()


def failure_text(error: BaseException) -> str:
    """One line for a failed request: the API's message for an answer, the error's type and text for none."""
    return api_message(error) if getattr(error, "body", None) is not None else describe(error)


def rejected(what: str, error: Exception) -> JobApiError:
    """The error for an answer that is final (e.g. 403, 422): what was done and the API's message."""
    hint = "; `kfp-finetune doctor` lists every permission it lacks (rbac.yaml)" if status_of(error) == 403 else ""
    return JobApiError(f"{what} was rejected by the Kubernetes API: {api_message(error)}{hint}")


def status_of(error: Exception) -> int | None:
    """The HTTP status of an ``ApiException`` (None for other errors)."""
    return getattr(error, "status", None)


def disable_transport_retries(api_client: Any) -> None:
    """Turns urllib3's own retries off for ``api_client`` (this layer retries, within its deadline)."""
    api_client.configuration.retries = single_try_transport()
    pool_manager = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    if pool_manager is not None and hasattr(pool_manager, "connection_pool_kw"):
        pool_manager.connection_pool_kw["retries"] = api_client.configuration.retries
        pool_manager.clear()


class Api:
    """The requests the job runner makes: each with a (connect, read) timeout, retried within bounds.

    Args:
        api_client: A ``kubernetes.client.ApiClient``.
        sleep: Sleep between retries (tests inject a fake one).
        log: Where retry lines go.
        attempts: Tries per request on transient failures.
        clock: The monotonic clock deadlines are measured on.
        connect_timeout: TCP connect timeout of every request, in seconds.
        read_timeout: Read timeout of every request (watches: the window plus a margin), in seconds.
    """

    def __init__(
        self,
        api_client: Any,
        sleep: Callable[[float], None],
        log: Callable[[str], None],
        attempts: int,
        *,
        clock: Callable[[], float] | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
        read_timeout: float = DEFAULT_READ_TIMEOUT_SECONDS,
    ):
        import time

        from kubernetes import client

        disable_transport_retries(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.sleep = sleep
        self.log = log
        self.clock = clock or time.monotonic
        self.policy = RetryPolicy(attempts=attempts, initial_delay_s=1.0, max_delay_s=30.0)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        #: Returns the current deadline (None: none); the job runner sets it to its timeouts.
        self.deadline: Callable[[], Deadline | None] = lambda: None

    @property
    def attempts(self) -> int:
        """Tries per request on transient failures."""
        return self.policy.attempts

    def remaining(self) -> float | None:
        """Seconds left before the current deadline (None: no deadline)."""
        deadline = self.deadline()
        return None if deadline is None else deadline.at - self.clock()

    def request_timeout(self, read: float | None = None) -> tuple[float, float]:
        """The ``(connect, read)`` timeout of the next request: the defaults (or ``read``), cut to the deadline."""
        connect, read = self.connect_timeout, self.read_timeout if read is None else read
        remaining = self.remaining()
        if remaining is not None:
            remaining = max(remaining, MIN_TIMEOUT_SECONDS)
            connect, read = min(connect, remaining), min(read, remaining)
        return (connect, read)

    @contextlib.contextmanager
    def budget(self, seconds: float, reason: str) -> Iterator[None]:
        """Within the block, requests have a fresh deadline ``seconds`` from now (e.g. for cleanup after a timeout)."""
        previous = self.deadline
        fixed = Deadline(self.clock() + seconds, reason)
        self.deadline = lambda: fixed
        try:
            yield
        finally:
            self.deadline = previous

    def call(self, what: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Calls ``func`` with a request timeout; retries transient failures; re-raises other ``ApiException``.

        Raises:
            JobApiError: Transient failures on every attempt, or no answer before the deadline.
            kubernetes.client.ApiException: Any other answer (the caller judges 404, 409, 403...).
        """
        deadline = self.deadline()
        requested = kwargs.pop("_request_timeout", None)  # a caller's own timeout wins (e.g. doctor's probes)

        def attempt() -> Any:
            return func(*args, _request_timeout=requested or self.request_timeout(), **kwargs)

        def on_retry(number: int, delay: float, error: BaseException) -> None:
            self.log(f"{what}: {failure_text(error)}; retry {number}/{self.attempts - 1} in {delay:.1f}s")

        try:
            return call_with_retries(
                attempt,
                self.policy,
                retryable=is_transient,
                on_retry=on_retry,
                sleep=self.sleep,
                clock=self.clock,
                deadline=None if deadline is None else deadline.at,
            )
        except GaveUp as gave_up:
            last = failure_text(gave_up.last)
            if gave_up.reason == "attempts":
                raise JobApiError(f"{what}: failed {gave_up.attempts} times, last: {last}") from None
            assert deadline is not None
            raise JobApiError(
                f"{what}: the Kubernetes API did not answer before {deadline.reason} "
                f"({gave_up.attempts} attempt(s), last: {last})"
            ) from None
