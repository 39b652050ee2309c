"""What one :func:`~.runner.run_job` call knows: its settings (frozen) and everything it learns (:class:`JobState`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from components._common.retry import RetryPolicy
from components.training.finetuning.cluster.api import UNTIL_DEADLINE, Deadline
from components.training.finetuning.cluster.progress import MetricsTail

#: The default termination grace period of a pod (``terminationGracePeriodSeconds``).
DEFAULT_TERMINATION_GRACE_SECONDS = 30.0
#: Left of the grace period after the cleanup's budget, for the exit itself (logs flushed, the error written).
TERMINATION_MARGIN_SECONDS = 5.0
#: Requests while the API is unreachable: capped exponential backoff with jitter, until a deadline (never a count).
OUTAGE_POLICY = RetryPolicy(attempts=UNTIL_DEADLINE, initial_delay_s=1.0, max_delay_s=30.0, jitter=0.1)


def cancel_budget(grace_seconds: float | None) -> float:
    """Seconds the cleanup after SIGTERM may take: the pod's grace period less a margin (``None``: the default 30 s).

    Kubernetes sends SIGKILL ``terminationGracePeriodSeconds`` after SIGTERM; the cleanup uses what is left before it
    minus :data:`TERMINATION_MARGIN_SECONDS` (at least half the grace period, at least 1 s).
    """
    grace = DEFAULT_TERMINATION_GRACE_SECONDS if grace_seconds is None else float(grace_seconds)
    return max(grace - TERMINATION_MARGIN_SECONDS, grace / 2, 1.0)


@dataclasses.dataclass(frozen=True)
class FollowSettings:
    """How :func:`~.runner.run_job` submits, follows and cleans up: its keyword arguments, validated there.

    Each field is the ``run_job`` argument of the same name (times in seconds, without the ``_seconds`` suffix;
    ``attempts`` is ``api_attempts``), described once in ``run_job``'s docstring.
    """

    start_timeout: float
    timeout: float
    cleanup_policy: str
    api_outage_tolerance: float
    delete_on_success: bool
    metrics_file: str
    poll_interval: float
    log: Callable[[str], None]
    use_watch: bool
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    attempts: int
    log_tail_lines: int
    connect_timeout: float
    read_timeout: float
    cleanup_timeout: float
    metrics_normalizer: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None
    timeout_counts_paused_time: bool
    cancel_timeout: float
    outage_policy: RetryPolicy
    launcher_pod: tuple[str, str]


@dataclasses.dataclass
class Outage:
    """The API is unreachable (or erroring) since ``since``.

    Attributes:
        since: ``clock()`` time of the first failure.
        reason: The first failure, one line.
    """

    since: float
    reason: str


@dataclasses.dataclass
class JobState:
    """What one run knows about its job, updated as it goes (see the module docstring).

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


def paused_seconds(state: JobState, settings: FollowSettings) -> float:
    """Time spent paused that does not count against ``timeout_seconds`` (0 when pauses count)."""
    if settings.timeout_counts_paused_time:
        return 0.0
    ongoing = settings.clock() - state.paused_since if state.paused_since is not None else 0.0
    return state.paused_total + ongoing


def run_deadline(state: JobState, settings: FollowSettings, start: bool = True) -> Deadline | None:
    """When the run must end: ``timeout_seconds`` from submission, ``start_timeout_seconds`` until pods run.

    Args:
        state: The run's state.
        settings: Its settings.
        start: Whether the start timeout counts. Following through an API outage leaves it out: whether the pods
            started is judged on what the API says once it answers again, never on its silence.
    """
    found = []
    if settings.timeout:
        at = state.started_at + settings.timeout + paused_seconds(state, settings)  # an uncounted pause moves it
        found.append(Deadline(at, f"timeout_seconds={settings.timeout:g}"))
    if start and settings.start_timeout and not state.started:
        reason = f"start_timeout_seconds={settings.start_timeout:g}"
        found.append(Deadline(state.start_clock_at + settings.start_timeout, reason))
    return min(found, key=lambda deadline: deadline.at) if found else None
