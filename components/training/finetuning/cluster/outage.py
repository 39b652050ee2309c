"""Riding out an unreachable or erroring Kubernetes API while a job runs: the job does not need its launcher.

Every request while following (and the create) goes through :func:`through_outage`: transient failures are retried
with backoff (:data:`.state.OUTAGE_POLICY`) within the run's deadlines and ``api_outage_tolerance_seconds``; one line
when the API becomes unreachable, one when it answers again. Past the tolerance: :class:`~.errors.ApiOutageTooLong`,
the job never deleted for it.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TypeVar

from components.training.finetuning.cluster.api import Deadline, Retry, failure_text
from components.training.finetuning.cluster.errors import ApiOutageTooLong, ApiUnavailable
from components.training.finetuning.cluster.job_client import JobClient
from components.training.finetuning.cluster.progress import format_duration
from components.training.finetuning.cluster.state import JobSettings, JobState, Outage, run_deadline

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
    """Makes ``request`` (given the :class:`~.api.Retry` for its API call) until the API answers.

    The retries end at ``timeout_seconds``, at the tolerance, and at ``start_timeout_seconds`` only with
    ``start_timeout_counts`` (the create: while following, the job may well have started unseen).

    Raises:
        ApiOutageTooLong: The outage outlasted ``api_outage_tolerance_seconds`` (the job is left running).
        ApiUnavailable: The run's own deadline came first (``error.deadline``): the caller ends the run.
        JobApiError: A final answer (e.g. 403), from ``request``.
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
