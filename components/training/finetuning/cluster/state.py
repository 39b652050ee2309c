"""What one :func:`~.runner.run_job` call knows: its settings (frozen) and everything it learns (:class:`JobState`)."""

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
    """Seconds the cleanup after SIGTERM may take before SIGKILL: the pod's grace period (``None``: 30 s) less a margin.

    At least half the grace period, at least 1 s.
    """
    grace = DEFAULT_TERMINATION_GRACE_SECONDS if grace_seconds is None else float(grace_seconds)
    return max(grace - TERMINATION_MARGIN_SECONDS, grace / 2, 1.0)


def check_seconds(name: str, value: Any, zero_means: str = "") -> None:
    """Refuses ``value`` unless it is a number of seconds >= 0 (``zero_means`` says what 0 means; ``""``: > 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or not (value or zero_means):
        rule = f">= 0 (0 = {zero_means})" if zero_means else "> 0"
        raise ValueError(f"{name}={value!r}: must be a number of seconds {rule}")


@dataclasses.dataclass(frozen=True)
class Deadlines:
    """How long the run and each of its parts may take.

    Attributes:
        start_timeout_seconds: How long the pods may take to start running (0: no limit).
        timeout_seconds: How long the whole run may take, from submission (0: no limit).
        api_outage_tolerance_seconds: How long following rides out an unreachable or erroring API (0: as long as
            ``timeout_seconds`` allows); then the step fails with ``ApiOutageTooLong``, the job left running.
        timeout_counts_paused_time: Whether time the running job spends suspended by a user (paused from the
            dashboard) counts against ``timeout_seconds``; if not, a pause stops the clock and is waited out.
        cleanup_timeout_seconds: How long the diagnosis, and then the cleanup, may take after the job failed or
            timed out (and the delete of ``delete_on_success``).
        cancel_timeout_seconds: How long the cleanup after SIGTERM may take (:func:`cancel_budget` of the
            launcher pod's termination grace period).
    """

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
    """What happens to the job when it ends.

    Attributes:
        cleanup_policy: ``delete``, ``keep`` or ``suspend`` (:data:`CLEANUP_POLICIES`), applied when the job failed
            or exceeded its timeouts, or the run was cancelled; never for the launcher's own trouble (API outage,
            refused request).
        delete_on_success: Delete the job after it completes.
        active_deadline_served: Whether the TrainJob API serves ``spec.activeDeadlineSeconds``; where it does not, a
            job that exceeds ``timeout_seconds`` under ``cleanup_policy=keep`` is suspended rather than left running
            (the Trainer would have stopped it).
        log_tail_lines: Log lines of the failed container to read into the diagnosis.
    """

    cleanup_policy: str
    delete_on_success: bool
    active_deadline_served: bool = True
    log_tail_lines: int = 20

    def __post_init__(self) -> None:
        if self.cleanup_policy not in CLEANUP_POLICIES:
            raise ValueError(f"cleanup_policy={self.cleanup_policy!r}: must be one of {list(CLEANUP_POLICIES)}")


@dataclasses.dataclass(frozen=True)
class ApiOptions:
    """How the run talks to the Kubernetes API.

    Attributes:
        connect_timeout_seconds: TCP connect timeout of every request.
        read_timeout_seconds: Read timeout of every request but watches (those wait one window plus a margin); a
            request is also never given longer than what is left of the start or total timeout.
        attempts: Attempts per API call on transient errors (5xx, 429, connection errors) outside following
            (runtime check, diagnosis); following and cleanup retry until their deadlines instead.
        use_watch: Follow with watch requests, or with GET polling.
        poll_interval_seconds: Length of one watch request / poll; steady state is one API request per interval.
        outage_policy: The backoff of requests retried until a deadline, through an outage or a cleanup (capped
            exponential with jitter; tests scale it down with their timings).
    """

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
    """Where the training code's progress records are read from.

    Attributes:
        file: The JSONL metrics file the training code writes on the shared volume (``""``: none).
        normalizer: Maps the raw records read so far to step records (e.g. ``metrics.normalize_records`` for Training
            Hub's layouts); ``None``: the records with a numeric ``step``.
    """

    file: str = ""
    normalizer: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None


@dataclasses.dataclass(frozen=True)
class JobSettings:
    """How :func:`~.runner.run_job` submits, follows and cleans up: built once by the caller, validated by each group.

    Attributes:
        deadlines: How long the run and its parts may take.
        policy: What happens to the job when it ends.
        api: How to talk to the Kubernetes API.
        metrics: Where progress records come from.
        launcher_pod: ``(namespace, name)`` of the launcher's own pod: after SIGTERM a ``DisruptionTarget``
            condition on it (evicted, preempted, node shutdown) means the launcher is disrupted, not the run
            cancelled, and the job is left running (:func:`~.launcher_pod.disruption`).
        log: Where progress and diagnosis lines go.
        clock: Monotonic clock in seconds (tests inject a fake one).
        sleep: Sleep function (tests inject a fake one).
    """

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
    """What one run knows about its job, updated as it goes.

    Attributes:
        started_at: ``clock()`` time of the submission; ``timeout_seconds`` counts from here.
        start_clock_at: ``start_timeout_seconds`` counts from here (reset while Kueue holds the job suspended).
        job: The job's last known state (``None`` until created or read).
        uid: The uid of the job this run created or adopted (``""`` until then): the only job it follows, reports,
            patches or deletes (every delete and patch carries it as a precondition).
        replaced_by: The uid of another job found under the name after ours was gone (``""``: none seen).
        submitted: A create was sent: the job may exist and is this run/task's.
        reattached: An existing job of this run/task is followed instead of a new one.
        started: Training has started (a pod ran).
        reported: Pod problems already logged while waiting.
        last_line: The last progress line logged.
        queue_state: ``suspended`` or ``admitted`` by Kueue (``""``: not queued).
        paused_since: When a user's pause began (``None``: not paused).
        paused_total: Seconds of pauses that ended.
        outage: The ongoing API outage (``None``: the API answers).
        last_phase: The job's phase when last seen, for the outage lines.
        metrics: The tail of the training code's metrics file (progress lines).
        cancelled_at: ``clock()`` time of the SIGTERM (the cleanup's budget counts from it), ``None`` before.
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
    """When the run must end: ``timeout_seconds`` from submission, ``start_timeout_seconds`` until pods run.

    ``start=False`` leaves the start timeout out (following through an outage: whether the pods started is judged on
    what the API says once it answers again, never on its silence).
    """
    found = []
    deadlines = settings.deadlines
    if deadlines.timeout_seconds:
        at = state.started_at + deadlines.timeout_seconds + paused_seconds(state, settings)  # an uncounted pause
        found.append(Deadline(at, f"timeout_seconds={deadlines.timeout_seconds:g}"))
    if start and deadlines.start_timeout_seconds and not state.started:
        reason = f"start_timeout_seconds={deadlines.start_timeout_seconds:g}"
        found.append(Deadline(state.start_clock_at + deadlines.start_timeout_seconds, reason))
    return min(found, key=lambda deadline: deadline.at) if found else None
