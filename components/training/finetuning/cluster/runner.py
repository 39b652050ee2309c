"""Runs one job to its end: check the runtime, submit, follow, diagnose, clean up (never for the launcher's trouble)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from components.training.finetuning.cluster import runtimes
from components.training.finetuning.cluster.api import Api
from components.training.finetuning.cluster.errors import (
    ApiOutageTooLong,
    JobCancelled,
    JobIncomplete,
    LauncherDisrupted,
)
from components.training.finetuning.cluster.follow import follow
from components.training.finetuning.cluster.job_client import JobClient
from components.training.finetuning.cluster.job_kinds import JOB_KINDS, pods_and_logs_hint
from components.training.finetuning.cluster.launcher_pod import disruption
from components.training.finetuning.cluster.lifecycle import (
    append_note,
    clean_up,
    cleanup_budget,
    delete_job,
    diagnose,
    left_running_note,
    submit,
    wrap_up,
)
from components.training.finetuning.cluster.progress import MetricsTail, trainer_status
from components.training.finetuning.cluster.signals import Cancelled, cancel_on_signals, signals_ignored
from components.training.finetuning.cluster.state import JobSettings, JobState, run_deadline

__all__ = ["JobResult", "run_job"]


@dataclasses.dataclass(frozen=True)
class JobResult:
    """How a successful job run went; ``last_progress``: the last progress record seen (``{}``: none)."""

    name: str
    namespace: str
    reattached: bool
    duration_seconds: float
    last_progress: dict[str, Any]
    deleted: bool


def run(client: JobClient, state: JobState, settings: JobSettings) -> JobResult:
    """Check runtime, submit, follow; clean up per policy only for the job's failure or timeout, or a cancel."""
    try:
        with cancel_on_signals():
            if client.kind.checks_runtime:
                runtimes.check_runtime(client.api, client.manifest, client.say)
            submit(client, state, settings)
            settings.log(f"Job: {client.name}")  # the RHOAI guide's troubleshooting looks for `Job: <job-name>`
            settings.log(f"Namespace: {client.namespace}")
            settings.log(pods_and_logs_hint(client.manifest, client.namespace))
            outcome = follow(client, state, settings)
    except Cancelled as signal_name:
        state.cancelled_at = settings.clock()
        with signals_ignored():
            disrupted = disruption(client.api.bounded(None), *settings.launcher_pod) if state.submitted else ""
        if disrupted:
            client.say(f"{signal_name}: the launcher pod is being disrupted ({disrupted}), the run is not cancelled")
            raise LauncherDisrupted(
                f"the launcher pod {'/'.join(settings.launcher_pod)} got {signal_name} because it is being disrupted "
                f"(DisruptionTarget: {disrupted}), not because the run was cancelled.\n{left_running_note(client)}"
            ) from None
        client.say(
            f"cancelled ({signal_name}): applying cleanup_policy={settings.policy.cleanup_policy} within "
            f"{settings.deadlines.cancel_timeout_seconds:g} s (the pod's termination grace period less a margin)"
        )
        if not state.submitted:
            raise JobCancelled(diagnose(client, state, settings, "Cancelled")) from None
        raise wrap_up(client, state, settings, "Cancelled") from None
    except BaseException as error:
        if not state.submitted or isinstance(error, (ApiOutageTooLong, JobIncomplete)):  # (they say where it is)
            raise
        if state.job is None:  # the create was never confirmed: apply the policy to this run/task's job, if any
            policy = settings.policy.cleanup_policy
            client.say(
                f"stopped before the job was confirmed ({type(error).__name__}): applying cleanup_policy={policy}"
            )
            with signals_ignored():
                note = clean_up(client, state, settings, cleanup_budget(settings))
        else:
            client.say(f"stopped by an error ({type(error).__name__}); the job is left running, untouched")
            note = left_running_note(client)
        if note:
            append_note(error, note)
        raise
    if (
        outcome == "Timeout"
        and client.kind.kind == "TrainJob"
        and not settings.policy.active_deadline_served
        and settings.policy.cleanup_policy == "keep"
    ):
        # Without activeDeadlineSeconds (RHOAI 3.3-3.5) a kept job would go on holding its GPUs: suspend it.
        client.say(
            f"timeout_seconds={settings.deadlines.timeout_seconds:g} passed and this TrainJob API has no "
            "activeDeadlineSeconds: suspending the job (cleanup_policy=keep) so that its pods stop, as the Trainer's "
            "deadline would"
        )
        settings = dataclasses.replace(settings, policy=dataclasses.replace(settings.policy, cleanup_policy="suspend"))
    if outcome != "Complete":
        raise wrap_up(client, state, settings, outcome)
    deleted = False
    if settings.policy.delete_on_success:
        deleted = delete_job(client, state, settings, cleanup_budget(settings))
    return JobResult(
        name=client.name,
        namespace=client.namespace,
        reattached=state.reattached,
        duration_seconds=settings.clock() - state.started_at,
        last_progress=trainer_status(state.job) or dict(state.metrics.last),
        deleted=deleted,
    )


def run_job(api_client: Any, manifest: Mapping[str, Any], settings: JobSettings) -> JobResult:
    """Runs a job of one of :data:`~.job_kinds.JOB_KINDS` (its labels identify this run/task) to completion.

    Raises:
        ValueError: A manifest that is no job of a known kind.
        RuntimeNotFoundError: The runtime does not exist (the error lists those that do).
        JobConflictError: The name is taken by another run/task's job.
        JobApiError: A call was rejected or unanswered; :class:`ApiOutageTooLong` and :class:`LauncherDisrupted`
            leave the job running.
        JobFailed: The job failed or timed out (``.diagnosis``); :class:`JobCancelled` on SIGTERM/SIGINT.
    """
    metadata = manifest.get("metadata") or {}
    if manifest.get("kind") not in JOB_KINDS or not metadata.get("name") or not metadata.get("namespace"):
        raise ValueError(
            f"manifest: must be a {' or '.join(JOB_KINDS)} with metadata.name and metadata.namespace "
            f"(see build_trainjob / build_pytorchjob), got kind {manifest.get('kind')!r}"
        )
    started_at = settings.clock()
    state = JobState(
        started_at=started_at,
        start_clock_at=started_at,
        metrics=MetricsTail(settings.metrics.file, settings.metrics.normalizer),
    )
    api = Api(
        api_client,
        settings.sleep,
        settings.log,
        settings.api.attempts,
        clock=settings.clock,
        connect_timeout=settings.api.connect_timeout_seconds,
        read_timeout=settings.api.read_timeout_seconds,
    )
    client = JobClient(
        api=api.bounded(lambda: run_deadline(state, settings)),
        manifest=manifest,
        say=lambda message: settings.log(f"[{manifest['kind'].lower()} {metadata['name']}] {message}"),
    )
    return run(client, state, settings)
