"""Following a submitted job: one watch (or GET) per ``poll_interval_seconds`` until it ends or a timeout expires.

Only the job with this run's uid is followed; every request rides out API outages (:func:`through_outage`).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any, TypeVar

from components._common.retry import RetryPolicy
from components.training.finetuning.cluster import diagnosis as diagnosis_module
from components.training.finetuning.cluster.api import MIN_TIMEOUT_SECONDS, Deadline, Retry, failure_text
from components.training.finetuning.cluster.errors import ApiOutageTooLong, ApiUnavailable, JobError
from components.training.finetuning.cluster.job_client import JobClient, uid_of
from components.training.finetuning.cluster.job_kinds import queue_name
from components.training.finetuning.cluster.progress import format_duration, progress_line, trainer_status
from components.training.finetuning.cluster.state import (
    JobSettings,
    JobState,
    Outage,
    paused_seconds,
    run_deadline,
)

T = TypeVar("T")


def tolerance_deadline(state: JobState, settings: JobSettings) -> Deadline | None:
    """When an outage (ongoing, or starting with the next request) exceeds ``api_outage_tolerance_seconds``."""
    tolerance = settings.deadlines.api_outage_tolerance_seconds
    if not tolerance:
        return None
    since = state.outage.since if state.outage is not None else settings.clock()
    return Deadline(since + tolerance, f"api_outage_tolerance_seconds={tolerance:g}")


def find_job_command(client: JobClient) -> str:
    """``kubectl get trainjob <name> -n <namespace>``: how a user finds the job the step left running."""
    return f"kubectl get {client.kind.kind.lower()} {client.name} -n {client.namespace}"


def find_it(client: JobClient) -> str:
    """How a user finds the job the step left running, re-attaches to it, or stops it (one sentence)."""
    return (
        f"Find it with `{find_job_command(client)}`; retrying this task re-attaches to it (no second job); "
        f"`kubectl delete {client.kind.kind.lower()} {client.name} -n {client.namespace}` stops it"
    )


def _began(client: JobClient, state: JobState, settings: JobSettings, reason: str) -> None:
    if state.outage is not None:
        return
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    state.outage = Outage(settings.clock(), reason)
    limit = (
        f"up to api_outage_tolerance_seconds={settings.deadlines.api_outage_tolerance_seconds:g}"
        if settings.deadlines.api_outage_tolerance_seconds
        else "as long as the run's timeouts allow"
    )
    client.say(
        f"Kubernetes API unreachable since {now} ({state.outage.reason}); job {client.namespace}/{client.name} last "
        f"seen {state.last_phase}; still following ({limit}, retrying with backoff)"
    )


def _ended(client: JobClient, state: JobState, settings: JobSettings) -> None:
    if state.outage is None:
        return
    seconds = settings.clock() - state.outage.since
    state.outage = None
    client.say(f"Kubernetes API reachable again after {seconds:.0f}s ({format_duration(seconds)}); following on")


def too_long(client: JobClient, state: JobState, settings: JobSettings, last: str) -> ApiOutageTooLong:
    """The error ending the step after an outage longer than the tolerance; it says the job keeps running."""
    since = state.outage.since if state.outage is not None else settings.clock()
    seconds = settings.clock() - since
    kind = client.kind.kind
    where = (
        f"{kind} {client.namespace}/{client.name} was NOT deleted: it keeps running on its own (last seen "
        f"{state.last_phase})"
        if state.job is not None
        else f"{kind} {client.namespace}/{client.name} may have been created (the create got no answer); nothing was "
        "deleted"
    )
    tolerance = settings.deadlines.api_outage_tolerance_seconds
    return ApiOutageTooLong(
        f"the Kubernetes API was unreachable for {seconds:.0f}s, longer than "
        f"api_outage_tolerance_seconds={tolerance:g} (last: {last}). {where}. {find_it(client)}"
    )


def through_outage(
    client: JobClient,
    state: JobState,
    settings: JobSettings,
    request: Callable[[Retry], T],
    *,
    start_timeout_counts: bool = False,
) -> T:
    """Makes ``request`` (given its :class:`~.api.Retry`) until the API answers, logging an outage's start and end.

    ``start_timeout_counts``: the start timeout ends the retries too (the create).

    Raises:
        ApiOutageTooLong: The outage outlasted ``api_outage_tolerance_seconds`` (the job is left running).
        ApiUnavailable: The run's own deadline came first (``error.deadline``): the caller ends the run.
    """
    tolerance = tolerance_deadline(state, settings)
    own = run_deadline(state, settings, start=start_timeout_counts)
    deadlines = [deadline for deadline in (own, tolerance) if deadline is not None]
    retry = Retry(
        policy=settings.api.outage_policy,
        on_retry=lambda number, delay, error: _began(client, state, settings, failure_text(error)),
        deadline=min(deadlines, key=lambda deadline: deadline.at) if deadlines else None,
    )
    try:
        result = request(retry)
    except ApiUnavailable as error:
        _began(client, state, settings, error.last)  # (no retry was logged when the deadline was that close)
        if tolerance is not None and error.deadline is tolerance:
            raise too_long(client, state, settings, error.last) from None
        raise
    _ended(client, state, settings)
    return result


#: Optional reads (pods while waiting) are tried once per poll: the next poll is their retry.
ONE_TRY = RetryPolicy(attempts=1)
_PODS_UNREADABLE = "pods unreadable"


def follow(client: JobClient, state: JobState, settings: JobSettings) -> str:
    """Follows the job to its outcome: ``Complete``, ``Failed``, ``Deleted``, ``Timeout`` or ``StartTimeout``."""
    assert state.job is not None
    while True:
        phase = client.kind.phase(state.job)
        if phase in ("Complete", "Failed"):
            report(client, state, phase)
            return phase
        paused = note_pause(client, state, settings, phase)
        if not state.started:
            observe_queue(client, state, settings)
            state.started = check_started(client, state, settings, phase)
        state.last_phase = "Running" if state.started and phase == "Pending" else phase
        report(client, state, state.last_phase)
        elapsed = settings.clock() - state.started_at - paused_seconds(state, settings)
        start_elapsed = settings.clock() - state.start_clock_at
        deadlines = settings.deadlines
        if deadlines.timeout_seconds and elapsed >= deadlines.timeout_seconds:
            return "Timeout"
        if not state.started and deadlines.start_timeout_seconds and start_elapsed >= deadlines.start_timeout_seconds:
            return "StartTimeout"
        window = settings.api.poll_interval_seconds
        own = run_deadline(state, settings)
        if own is not None and not (paused and not deadlines.timeout_counts_paused_time):  # (a stopped clock: none)
            window = min(window, max(own.at - settings.clock(), 0.001))
        try:
            job = wait_for_change(client, state, settings, window)
        except ApiUnavailable as error:  # the API stayed silent until the run's own deadline: let the loop end it
            if error.deadline is not None:
                settings.sleep(max(error.deadline.at - settings.clock(), 0.0))
            continue
        if job is None or replaced(client, state, job):
            return "Deleted"
        state.job = job


def replaced(client: JobClient, state: JobState, job: dict[str, Any]) -> bool:
    """Whether ``job`` is another job (another uid) under our job's name: ours is gone (``state.replaced_by``)."""
    other = uid_of(job)
    if not state.uid or not other or other == state.uid:
        return False
    state.replaced_by = other
    labels = (job.get("metadata") or {}).get("labels") or {}
    client.say(
        f"this run's {client.kind.kind} (uid {state.uid}) is gone: {client.namespace}/{client.name} now holds another "
        f"job (uid {other}, labels {labels}); it is not followed, reported, patched or deleted by this run"
    )
    return True


def observe_queue(client: JobClient, state: JobState, settings: JobSettings) -> None:
    """Logs a Kueue-queued job's state when it changes; while Kueue holds it suspended the start timeout waits."""
    queue = queue_name(state.job or {})
    if not queue:
        return
    suspended = client.kind.is_suspended(state.job or {})
    if suspended:
        state.start_clock_at = settings.clock()  # start_timeout_seconds counts from admission
    queue_state = "suspended" if suspended else "admitted"
    if queue_state != state.queue_state:
        state.queue_state = queue_state
        waiting = "suspended, waiting for Kueue to admit it (start_timeout_seconds counts from admission)"
        client.say(f"Kueue LocalQueue {queue!r}: " + (waiting if suspended else "admitted"))


def note_pause(client: JobClient, state: JobState, settings: JobSettings, phase: str) -> bool:
    """Whether a started job is paused now (a user suspended it); logs when a pause begins and ends (one line each)."""
    paused = state.started and (phase == "Suspended" or client.kind.is_suspended(state.job or {}))
    now = settings.clock()
    if paused and state.paused_since is None:
        state.paused_since = now
        counted = "counts" if settings.deadlines.timeout_counts_paused_time else "does not count"
        client.say(
            "paused: the job was suspended (its pods stop after a just-in-time checkpoint); waiting for it to be "
            f"resumed (the pause {counted} against timeout_seconds)"
        )
    elif not paused and state.paused_since is not None:
        state.paused_total += now - state.paused_since
        client.say(f"resumed after a pause of {format_duration(now - state.paused_since)}: following the resumed run")
        state.paused_since = None
    return paused


def optional_pods(client: JobClient, state: JobState, settings: JobSettings) -> list[dict[str, Any]]:
    """The job's pods, an optional read: one try within a poll interval; a failure warns once and returns ``[]``."""
    cap = Deadline(
        settings.clock() + settings.api.poll_interval_seconds,
        f"poll_interval_seconds={settings.api.poll_interval_seconds:g}",
    )
    own = run_deadline(state, settings)
    deadline = cap if own is None or cap.at < own.at else own  # a slow answer never delays the next read of the job
    try:
        return client.list_pods(Retry(policy=ONE_TRY, deadline=deadline))
    except JobError as error:
        if _PODS_UNREADABLE not in state.reported:
            state.reported.add(_PODS_UNREADABLE)
            client.say(
                f"WARNING: {error}. Following the job's own status only: pod problems are not shown while it waits "
                "(the start is judged on the job's status)"
            )
        return []


def check_started(client: JobClient, state: JobState, settings: JobSettings, phase: str) -> bool:
    """Whether training has started (the job's status, the metrics file, a pod running); logs pod problems once."""
    if phase == "Running" or state.metrics.poll():
        return True
    pods = optional_pods(client, state, settings)
    for pod in pods:
        for cause in diagnosis_module.pod_causes(pod):
            if str(cause) not in state.reported:
                state.reported.add(str(cause))
                client.say(f"waiting: {cause}")
    statuses = [pod.get("status") or {} for pod in pods]
    return any(
        status.get("phase") in ("Running", "Succeeded")
        or any("running" in (container.get("state") or {}) for container in status.get("containerStatuses") or [])
        for status in statuses
    )


def report(client: JobClient, state: JobState, phase: str) -> None:
    """Logs a progress line when it changed."""
    line = progress_line(phase, trainer_status(state.job), state.metrics.poll())
    if line != state.last_line:
        state.last_line = line
        client.say(line)


def wait_for_change(client: JobClient, state: JobState, settings: JobSettings, window: float) -> dict[str, Any] | None:
    """Waits up to ``window`` seconds (one watch, or a sleep + GET): the job's newest state, ``None``: deleted."""
    if not settings.api.use_watch:
        settings.sleep(window)
        return through_outage(client, state, settings, client.get_job)
    # A watch's read timeout is twice its window (JobClient.watch): a window cut to a sliver by a deadline must still
    # leave the API MIN_TIMEOUT_SECONDS to answer, as every request gets, or its silence is taken for an outage (and
    # retried past the start timeout). Only a poll interval shorter than that makes shorter watches.
    window = max(window, min(settings.api.poll_interval_seconds, MIN_TIMEOUT_SECONDS / 2))
    began = settings.clock()
    seen = through_outage(client, state, settings, lambda retry: client.watch(window, state.resource_version, retry))
    if seen.deleted:
        return None
    if seen.expired:
        client.say(f"{seen.reason or 'watch expired (410 Gone)'}: relisting")
        return through_outage(client, state, settings, client.get_job)
    final = seen.job is not None and client.kind.phase(seen.job) in ("Complete", "Failed")
    spent = settings.clock() - began
    if not final and spent < window / 2:
        settings.sleep(window - spent)  # the watch ended early (dropped): keep to one request per window
    return seen.job or state.job
