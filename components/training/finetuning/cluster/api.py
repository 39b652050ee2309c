"""Every Kubernetes API request of ``train_model``: a ``(connect, read)`` timeout cut to the deadline, retries.

Transient failures are retried by :mod:`components._common.retry`, never past the deadline; urllib3's are off.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

from components._common.retry import (
    GaveUp,
    RetryPolicy,
    call_with_retries,
    describe,
    is_transient,
    single_try_transport,
    status_of,
)
from components.training.finetuning.cluster.errors import ApiUnavailable, JobApiError, JobError

#: What every request waits at most unless a deadline is closer: TCP connect, then each read.
DEFAULT_CONNECT_TIMEOUT_SECONDS = 10.0
DEFAULT_READ_TIMEOUT_SECONDS = 30.0
#: The shortest timeout a request is given, also at its deadline: it outlives the deadline by at most twice this.
MIN_TIMEOUT_SECONDS = 1.0
#: Tries of a request retried until a deadline rather than a count (outages, cleanup): the deadline comes first.
UNTIL_DEADLINE = 10**9


@dataclasses.dataclass(frozen=True)
class Deadline:
    """A ``clock()`` time no request may outlive, and what it comes from (named in errors)."""

    at: float
    reason: str


@dataclasses.dataclass(frozen=True)
class Retry:
    """How one request is retried where not by the :class:`Api`'s own policy and deadline (``None``: the Api's)."""

    policy: RetryPolicy | None = None
    on_retry: Callable[[int, float, BaseException], None] | None = None
    deadline: Deadline | None = None


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
    """One line for a failed request: the API's message for an answer, ours for ours, else the error's type and text."""
    if isinstance(error, JobError):
        return str(error)
    return api_message(error) if getattr(error, "body", None) is not None else describe(error)


def rejected(what: str, error: Exception) -> JobApiError:
    """The error for an answer that is final (e.g. 403, 422): what was done and the API's message."""
    hint = "; `kfp-finetune doctor` lists every permission it lacks (rbac.yaml)" if status_of(error) == 403 else ""
    return JobApiError(f"{what} was rejected by the Kubernetes API: {api_message(error)}{hint}")


class Api:
    """The job runner's requests, each with a (connect, read) timeout and ``attempts`` tries; no run state."""

    def __init__(
        self,
        api_client: Any,
        sleep: Callable[[float], None],
        log: Callable[[str], None],
        attempts: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
        read_timeout: float = DEFAULT_READ_TIMEOUT_SECONDS,
    ):
        from kubernetes import client

        api_client.configuration.retries = single_try_transport()  # urllib3's own retries off: this layer retries
        pool_manager = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
        if pool_manager is not None and hasattr(pool_manager, "connection_pool_kw"):
            pool_manager.connection_pool_kw["retries"] = api_client.configuration.retries
            pool_manager.clear()
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.sleep = sleep
        self.log = log
        self.clock = clock
        self.policy = RetryPolicy(attempts=attempts, initial_delay_s=1.0, max_delay_s=30.0)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._deadline: Callable[[], Deadline | None] = lambda: None

    def bounded(self, deadline: Deadline | Callable[[], Deadline | None] | None) -> Api:
        """A copy whose requests never outlive ``deadline`` (fixed, or a function returning the current one)."""
        bound = copy.copy(self)
        bound._deadline = deadline if callable(deadline) else (lambda: deadline)
        return bound

    def request_timeout(self, read: float | None = None, deadline: Deadline | None = None) -> tuple[float, float]:
        """The ``(connect, read)`` timeout of the next request: the defaults (or ``read``), cut to the deadline."""
        connect, read = self.connect_timeout, self.read_timeout if read is None else read
        deadline = deadline or self._deadline()
        if deadline is not None:
            remaining = max(deadline.at - self.clock(), MIN_TIMEOUT_SECONDS)
            connect, read = min(connect, remaining), min(read, remaining)
        return (connect, read)

    def call(self, what: str, func: Callable[..., Any], *args: Any, retry: Retry | None = None, **kwargs: Any) -> Any:
        """Calls ``func(*args, **kwargs)`` with a request timeout (a caller's own wins); retries transient failures.

        Raises:
            ApiUnavailable: Transient failures on every attempt, or no answer before the deadline.
        """
        retry = retry or Retry()
        deadline = retry.deadline or self._deadline()
        policy = retry.policy or self.policy
        requested = kwargs.pop("_request_timeout", None)
        began = self.clock()

        def attempt() -> Any:
            return func(*args, _request_timeout=requested or self.request_timeout(deadline=deadline), **kwargs)

        def on_retry(number: int, delay: float, error: BaseException) -> None:
            self.log(f"{what}: {failure_text(error)}; retry {number}/{policy.attempts - 1} in {delay:.1f}s")

        try:
            return call_with_retries(
                attempt,
                policy,
                retryable=is_transient,
                on_retry=retry.on_retry or on_retry,
                sleep=self.sleep,
                clock=self.clock,
                deadline=None if deadline is None else deadline.at,
            )
        except GaveUp as gave_up:
            last = failure_text(gave_up.last)
            if gave_up.reason == "attempts":
                raise ApiUnavailable(f"{what}: failed {gave_up.attempts} times, last: {last}", None, last) from None
            assert deadline is not None
            raise ApiUnavailable(
                f"{what}: the Kubernetes API did not answer before {deadline.reason} "
                f"({gave_up.attempts} attempt(s) in {self.clock() - began:.1f}s, last: {last})",
                deadline,
                last,
            ) from None

    def read_json(self, what: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """:meth:`call` of a client method unparsed (``_preload_content=False``), its answer read as JSON."""
        return json.loads(self.call(what, func, *args, _preload_content=False, **kwargs).data)
