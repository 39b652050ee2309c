"""What one :func:`~.runner.run_job` call knows: its settings (frozen) and what it learns (:class:`JobState`)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from components._common.retry import RetryPolicy
from components.training.finetuning.cluster.api import (
    DEFAULT_CONNECT_TIMEOUT_SECONDS,
    DEFAULT_READ_TIMEOUT_SECONDS,
    UNTIL_DEADLINE,
    Deadline,
)
from components.training.finetuning.cluster.progress import MetricsTail

#: The default termination grace period of a pod (``terminationGracePeriodSeconds``).
DEFAULT_TERMINATION_GRACE_SECONDS = 30.0
#: Left of the grace period after the cleanup's budget, for the exit itself (logs flushed, the error written).
TERMINATION_MARGIN_SECONDS = 5.0
#: Requests while the API is unreachable: capped exponential backoff with jitter, until a deadline (never a count).
OUTAGE_POLICY = RetryPolicy(attempts=UNTIL_DEADLINE, initial_delay_s=1.0, max_delay_s=30.0, jitter=0.1)
#: What :class:`JobPolicy` may do with a job that failed, timed out or was cancelled.
CLEANUP_POLICIES = ("delete", "keep", "suspend")


def cancel_budget(grace_seconds: float | None) -> float:
    """Seconds the cleanup after SIGTERM may take: the grace period (``None``: 30 s) less a margin; >= half, >= 1 s."""
    grace = DEFAULT_TERMINATION_GRACE_SECONDS if grace_seconds is None else float(grace_seconds)
    return max(grace - TERMINATION_MARGIN_SECONDS, grace / 2, 1.0)


def check_seconds(name: str, value: Any, zero_means: str = "") -> None:
    """Refuses ``value`` unless it is a number of seconds >= 0 (``zero_means`` says what 0 means; ``""``: > 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or not (value or zero_means):
        rule = f">= 0 (0 = {zero_means})" if zero_means else "> 0"
        raise ValueError(f"{name}={value!r}: must be a number of seconds {rule}")


@dataclasses.dataclass(frozen=True)
class Deadlines:
    """How long the run, its start, an API outage and each cleanup may take (0: no limit where allowed)."""

    start_timeout_seconds: float
    timeout_seconds: float
    api_outage_tolerance_seconds: float
    timeout_counts_paused_time: bool
    cleanup_timeout_seconds: float = 60.0
    cancel_timeout_seconds: float = cancel_budget(None)

    def __post_init__(self) -> None:
        for name, zero_means in (
            ("start_timeout_seconds", "no limit"),
            ("timeout_seconds", "no limit"),
            ("api_outage_tolerance_seconds", "as long as timeout_seconds allows"),
            ("cleanup_timeout_seconds", ""),
            ("cancel_timeout_seconds", ""),
        ):
            check_seconds(name, getattr(self, name), zero_means)


@dataclasses.dataclass(frozen=True)
class JobPolicy:
    """What happens to the job when it ends (without ``active_deadline_served``, ``keep`` past the timeout suspends)."""

    cleanup_policy: str
    delete_on_success: bool
    active_deadline_served: bool = True
    log_tail_lines: int = 20

    def __post_init__(self) -> None:
        if self.cleanup_policy not in CLEANUP_POLICIES:
            raise ValueError(f"cleanup_policy={self.cleanup_policy!r}: must be one of {list(CLEANUP_POLICIES)}")


@dataclasses.dataclass(frozen=True)
class ApiOptions:
    """How the run talks to the Kubernetes API: timeouts, tries, watch or GET polling, one request per interval."""

    connect_timeout_seconds: float = DEFAULT_CONNECT_TIMEOUT_SECONDS
    read_timeout_seconds: float = DEFAULT_READ_TIMEOUT_SECONDS
    attempts: int = 5
    use_watch: bool = True
    poll_interval_seconds: float = 10.0
    outage_policy: RetryPolicy = OUTAGE_POLICY

    def __post_init__(self) -> None:
        for name in ("connect_timeout_seconds", "read_timeout_seconds", "poll_interval_seconds"):
            check_seconds(name, getattr(self, name))
        if self.attempts < 1:
            raise ValueError(f"attempts={self.attempts!r}: must be >= 1")


@dataclasses.dataclass(frozen=True)
class MetricsSource:
    """The training code's JSONL metrics file (``""``: none) and the normalizer of its raw records."""

    file: str = ""
    normalizer: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None


@dataclasses.dataclass(frozen=True)
class JobSettings:
    """How :func:`~.runner.run_job` submits, follows and cleans up; ``launcher_pod``: ``(namespace, name)``."""

    deadlines: Deadlines
    policy: JobPolicy
    api: ApiOptions = ApiOptions()
    metrics: MetricsSource = MetricsSource()
    launcher_pod: tuple[str, str] = ("", "")
    log: Callable[[str], None] = print
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@dataclasses.dataclass
class Outage:
    """The API is unreachable (or erroring) since ``since`` (``clock()`` time); ``reason``: the first failure."""

    since: float
    reason: str


@dataclasses.dataclass
class JobState:
    """What one run knows about its job, updated as it goes (``clock()`` times; ``uid``: the only job it touches).

    ``start_clock_at`` is reset while Kueue holds the job suspended; ``replaced_by`` is another job's uid found under
    the name; ``reported`` holds the pod problems already logged.
    """

    started_at: float
    start_clock_at: float
    job: dict[str, Any] | None = None
    uid: str = ""
    replaced_by: str = ""
    submitted: bool = False
    reattached: bool = False
    started: bool = False
    reported: set[str] = dataclasses.field(default_factory=set)
    last_line: str = ""
    queue_state: str = ""
    paused_since: float | None = None
    paused_total: float = 0.0
    outage: Outage | None = None
    last_phase: str = "Pending"
    metrics: MetricsTail = dataclasses.field(default_factory=lambda: MetricsTail(""))
    cancelled_at: float | None = None

    @property
    def resource_version(self) -> str:
        """The resourceVersion of the job's last known state, where a watch resumes (``""``: none)."""
        return str(((self.job or {}).get("metadata") or {}).get("resourceVersion") or "")


def paused_seconds(state: JobState, settings: JobSettings) -> float:
    """Time spent paused that does not count against ``timeout_seconds`` (0 when pauses count)."""
    if settings.deadlines.timeout_counts_paused_time:
        return 0.0
    ongoing = settings.clock() - state.paused_since if state.paused_since is not None else 0.0
    return state.paused_total + ongoing


def run_deadline(state: JobState, settings: JobSettings, start: bool = True) -> Deadline | None:
    """When the run must end: ``timeout_seconds``, or (``start``) ``start_timeout_seconds`` until pods run."""
    found = []
    deadlines = settings.deadlines
    if deadlines.timeout_seconds:
        at = state.started_at + deadlines.timeout_seconds + paused_seconds(state, settings)
        found.append(Deadline(at, f"timeout_seconds={deadlines.timeout_seconds:g}"))
    if start and deadlines.start_timeout_seconds and not state.started:
        reason = f"start_timeout_seconds={deadlines.start_timeout_seconds:g}"
        found.append(Deadline(state.start_clock_at + deadlines.start_timeout_seconds, reason))
    return min(found, key=lambda deadline: deadline.at) if found else None
