"""The shared retry policy (``components/_common/retry.py``): what is retried, how often and for how long."""

import email.utils
import ssl
import time
import urllib.error
from types import SimpleNamespace

import pytest
import urllib3

from components._common.retry import (
    TRANSIENT_STATUSES,
    GaveUp,
    RetryPolicy,
    call_with_retries,
    is_transient,
    retry_after_s,
    single_try_transport,
)


class Answered(Exception):
    def __init__(self, status):
        super().__init__(f"HTTP {status}")
        self.status = status


class Flaky:
    """Fails with the given errors, one per call, then returns "done"."""

    def __init__(self, *errors):
        self.errors = list(errors)
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


class FakeTime:
    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.mark.parametrize("status", [*TRANSIENT_STATUSES, 400, 401, 403, 404, 409, 410, 422, 501])
def test_try_again_answers_are_transient_others_final(status):
    assert is_transient(Answered(status)) == (status in TRANSIENT_STATUSES)


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (ConnectionRefusedError(111, "refused"), True),
        (ConnectionResetError(104, "reset"), True),
        (TimeoutError("timed out"), True),
        (urllib3.exceptions.ReadTimeoutError(None, "/x", "Read timed out."), True),
        (urllib3.exceptions.MaxRetryError(None, "/x", urllib3.exceptions.NewConnectionError(None, "refused")), True),
        (urllib3.exceptions.ProtocolError("Connection aborted."), True),
        (urllib.error.URLError(ConnectionRefusedError(111, "refused")), True),
        (urllib3.exceptions.MaxRetryError(None, "/x", urllib3.exceptions.SSLError("CERTIFICATE_VERIFY_FAILED")), False),
        (urllib.error.URLError(ssl.SSLCertVerificationError("certificate verify failed")), False),
        (ValueError("a bug"), False),
        (KeyError("a bug"), False),
        (FileNotFoundError(2, "no such file"), False),
    ],
)
def test_no_answer_is_transient_tls_failures_and_other_errors_final(error, transient):
    assert is_transient(error) is transient


def test_transient_failures_are_retried_with_growing_jittered_waits_then_succeed():
    flaky = Flaky(Answered(503), Answered(429), ConnectionResetError(104, "reset"))
    clock = FakeTime()
    seen = []
    result = call_with_retries(
        flaky, RetryPolicy(attempts=5), sleep=clock.sleep, on_retry=lambda *args: seen.append(args[:2])
    )
    assert result == "done" and flaky.calls == 4
    assert [base for base, (s) in zip([1, 2, 4], clock.sleeps) if base <= s <= base * 1.1] == [1, 2, 4]
    assert [number for number, _ in seen] == [1, 2, 3]


def test_attempts_are_bounded_and_the_last_error_is_kept():
    flaky = Flaky(*[Answered(500)] * 10)
    clock = FakeTime()
    with pytest.raises(GaveUp) as gave_up:
        call_with_retries(flaky, RetryPolicy(attempts=3, max_delay_s=1.5), sleep=clock.sleep)
    assert (gave_up.value.attempts, gave_up.value.reason, gave_up.value.last.status) == (3, "attempts", 500)
    assert flaky.calls == 3 and len(clock.sleeps) == 2 and max(clock.sleeps) <= 1.5 * 1.1


def test_a_final_answer_is_raised_at_once():
    flaky = Flaky(Answered(403))
    with pytest.raises(Answered):
        call_with_retries(flaky, RetryPolicy(attempts=5), sleep=pytest.fail)
    assert flaky.calls == 1


def test_the_last_try_is_made_at_the_deadline_and_no_wait_passes_it():
    # Waits 1 and 2 (t=3); the next backoff (4, with jitter) would pass t=5: it is cut to 2, the last try is at t=5.
    flaky = Flaky(*[TimeoutError("timed out")] * 10)
    clock = FakeTime()
    tries_at = []

    def timed():
        tries_at.append(clock.now)
        return flaky()

    with pytest.raises(GaveUp) as gave_up:
        call_with_retries(timed, RetryPolicy(attempts=10), sleep=clock.sleep, clock=lambda: clock.now, deadline=5.0)
    assert gave_up.value.reason == "deadline" and flaky.calls == 4
    assert tries_at[-1] == pytest.approx(5.0) and clock.now == pytest.approx(5.0)


def test_a_call_that_succeeds_at_the_deadline_is_not_given_up():
    flaky = Flaky(*[TimeoutError("timed out")] * 3)
    clock = FakeTime()
    assert call_with_retries(flaky, RetryPolicy(attempts=10), sleep=clock.sleep, clock=lambda: clock.now, deadline=5)
    assert flaky.calls == 4 and clock.now == pytest.approx(5.0)


def _http_error(status: int, retry_after: str) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("http://127.0.0.1/x", status, "busy", {"Retry-After": retry_after}, None)


def test_retry_after_is_read_from_urllib_and_httpx_errors():
    assert retry_after_s(_http_error(429, "7")) == 7.0
    httpx_like = SimpleNamespace(response=SimpleNamespace(status_code=503, headers={"Retry-After": "3"}))
    assert retry_after_s(httpx_like) == 3.0
    later = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert retry_after_s(_http_error(503, later)) == pytest.approx(10.0, abs=1.0)
    assert retry_after_s(_http_error(503, "soon")) is None and retry_after_s(ValueError("x")) is None


def test_the_wait_is_the_longer_of_backoff_and_retry_after_bounded_by_the_policy():
    flaky, waits = Flaky(_http_error(429, "7"), _http_error(503, "3600"), _http_error(503, "")), []
    policy = RetryPolicy(attempts=4, initial_delay_s=0.5, jitter=0.0, max_retry_after_s=30.0)
    assert call_with_retries(flaky, policy, sleep=waits.append) == "done"
    assert waits == [7.0, 30.0, 2.0]  # Retry-After 7; 3600 cut to 30; none: the backoff 0.5 * 2**2


def test_a_retry_after_past_the_deadline_gives_up_at_once():
    clock = FakeTime()
    with pytest.raises(GaveUp) as gave_up:
        call_with_retries(
            Flaky(*[_http_error(429, "50")] * 5),
            RetryPolicy(attempts=5, jitter=0.0, max_retry_after_s=60.0),
            sleep=clock.sleep,
            clock=lambda: clock.now,
            deadline=20.0,
        )
    assert gave_up.value.reason == "deadline" and gave_up.value.attempts == 1 and clock.sleeps == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [({"attempts": 0}, "attempts=0"), ({"initial_delay_s": -1}, "initial_delay_s=-1"), ({"factor": 0.5}, "factor")],
)
def test_bad_policies_are_named(fields, message):
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**fields)


def test_transport_makes_one_try_and_keeps_the_error_shape():
    retry = single_try_transport()
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        retry.increment("GET", "/x", error=urllib3.exceptions.ReadTimeoutError(None, "/x", "Read timed out."))
