"""The one retry policy honours ``Retry-After`` (seconds or an HTTP date), bounded, whatever client raised the error."""

from __future__ import annotations

import email.utils
import urllib.error
from types import SimpleNamespace

import pytest

from components._common.retry import GaveUp, RetryPolicy, call_with_retries, retry_after_s


def _http_error(status: int, retry_after: str) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("http://127.0.0.1/x", status, "busy", {"Retry-After": retry_after}, None)


def test_retry_after_is_read_from_urllib_and_httpx_errors():
    assert retry_after_s(_http_error(429, "7")) == 7.0
    httpx_like = SimpleNamespace(response=SimpleNamespace(status_code=503, headers={"Retry-After": "3"}))
    assert retry_after_s(httpx_like) == 3.0
    later = email.utils.formatdate(1_000_010.0, usegmt=True)
    assert retry_after_s(_http_error(503, later), now=lambda: 1_000_000.0) == pytest.approx(10.0)
    assert retry_after_s(_http_error(503, "soon")) is None and retry_after_s(ValueError("x")) is None


def test_the_wait_is_the_longer_of_backoff_and_retry_after_bounded_by_the_policy():
    waits: list[float] = []
    answers = iter([_http_error(429, "7"), _http_error(503, "3600"), _http_error(503, "")])

    def call() -> str:
        error = next(answers, None)
        if error is not None:
            raise error
        return "done"

    policy = RetryPolicy(attempts=4, initial_delay_s=0.5, jitter=0.0, max_retry_after_s=30.0)
    assert call_with_retries(call, policy, sleep=waits.append) == "done"
    assert waits == [7.0, 30.0, 2.0]  # Retry-After 7; 3600 cut to 30; none: the backoff 0.5 * 2**2


def test_a_retry_after_past_the_deadline_gives_up_at_once():
    clock = iter(range(0, 1000)).__next__
    with pytest.raises(GaveUp) as gave_up:
        call_with_retries(
            lambda: (_ for _ in ()).throw(_http_error(429, "50")),
            RetryPolicy(attempts=5, jitter=0.0, max_retry_after_s=60.0),
            sleep=lambda seconds: None,
            clock=lambda: float(clock()),
            deadline=20.0,
        )
    assert gave_up.value.reason == "deadline" and gave_up.value.attempts == 1
