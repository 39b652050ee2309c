"""Runs one TrainJob or PyTorchJob to its end: check the runtime, submit, follow, diagnose, clean up.

:func:`run_job` is the whole lifecycle for both kinds (a :class:`~.job_kinds.JobKind` holds what differs), composed of
a stateless :class:`~.job_client.JobClient`, one :class:`~.state.JobState` and the functions of :mod:`.runtimes`,
:mod:`.lifecycle` (submit, diagnose, clean up), :mod:`.follow` and :mod:`.outage`. **The job does not need its
launcher**: the cleanup policy applies only when the job failed or exceeded its own timeouts, or the run was cancelled
(SIGTERM from KFP, :mod:`.signals`); the launcher's own trouble never deletes it, and the error says where it runs.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

from components._common.retry import RetryPolicy
from components.training.finetuning.cluster import runtimes
from components.training.finetuning.cluster.api import Api
from components.training.finetuning.cluster.errors import ApiOutageTooLong, JobCancelled, LauncherDisrupted
from components.training.finetuning.cluster.follow import follow
from components.training.finetuning.cluster.job_client import JobClient
from components.training.finetuning.cluster.job_kinds import JOB_KINDS, pods_and_logs_hint
from components.training.finetuning.cluster.launcher_pod import disruption
from components.training.finetuning.cluster.lifecycle import (
    CLEANUP_POLICIES,
    append_note,
    clean_up,
    cleanup_budget,
    delete_job,
    diagnose,
    left_running_note,
    submit,
    wrap_up,
)
from components.training.finetuning.cluster.progress import MetricsTail
from components.training.finetuning.cluster.signals import Cancelled, cancel_on_signals, signals_ignored
from components.training.finetuning.cluster.state import (
    OUTAGE_POLICY,
    FollowSettings,
    JobState,
    cancel_budget,
    run_deadline,
)
from components.training.finetuning.pod import progress_server

__all__ = ["FollowSettings", "JobResult", "run_job"]


@dataclasses.dataclass(frozen=True)
class JobResult:
    """How a successful job run went (the cluster launchers' internal result; see ``run.TrainModelResult``).

    Attributes:
        name: The job's name.
        namespace: Its namespace.
        reattached: Whether an existing job of the same run/task was followed instead of creating one.
        duration_seconds: Time from submission to completion (by the injected clock).
        last_progress: The last progress record seen (metrics-file keys or trainerStatus fields), ``{}`` if none.
        deleted: Whether the job was deleted afterwards (``delete_on_success``).
    """

    name: str
    namespace: str
    reattached: bool
    duration_seconds: float
    last_progress: dict[str, Any]
    deleted: bool


def run(client: JobClient, state: JobState, settings: FollowSettings, deadline_served: bool = True) -> JobResult:
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
            f"cancelled ({signal_name}): applying cleanup_policy={settings.cleanup_policy} within "
            f"{settings.cancel_timeout:g} s (the pod's termination grace period less a margin)"
        )
        if not state.submitted:
            raise JobCancelled(diagnose(client, state, settings, "Cancelled")) from None
        raise wrap_up(client, state, settings, "Cancelled") from None
    except BaseException as error:
        if state.submitted and state.job is None and not isinstance(error, ApiOutageTooLong):
            # The create was sent but never confirmed before the start timeout: whatever exists was never seen
            # running; apply the policy to this run/task's job, if there is one.
            policy = settings.cleanup_policy
            client.say(
                f"stopped before the job was confirmed ({type(error).__name__}): applying cleanup_policy={policy}"
            )
            with signals_ignored():
                note = clean_up(client, state, settings, cleanup_budget(settings))
            if note:
                append_note(error, note)
        elif state.submitted and not isinstance(error, ApiOutageTooLong):
            client.say(f"stopped by an error ({type(error).__name__}); the job is left running, untouched")
            append_note(error, left_running_note(client))
        raise
    if (
        outcome == "Timeout"
        and client.kind.kind == "TrainJob"
        and not deadline_served
        and settings.cleanup_policy == "keep"
    ):
        # Where the API serves activeDeadlineSeconds the Trainer fails the job at the deadline; where it does not
        # (podTemplateOverrides, RHOAI 3.3-3.5) a kept job would go on holding its GPUs: suspend it instead.
        client.say(
            f"timeout_seconds={settings.timeout:g} passed and this TrainJob API has no activeDeadlineSeconds: "
            "suspending the job (cleanup_policy=keep) so that its pods stop, as the Trainer's deadline would"
        )
        settings = dataclasses.replace(settings, cleanup_policy="suspend")
    if outcome != "Complete":
        raise wrap_up(client, state, settings, outcome)
    deleted = False
    if settings.delete_on_success:
        deleted = delete_job(client, state, settings, cleanup_budget(settings))
    return JobResult(
        name=client.name,
        namespace=client.namespace,
        reattached=state.reattached,
        duration_seconds=settings.clock() - state.started_at,
        last_progress=progress_server.trainer_status(state.job) or dict(state.metrics.last),
        deleted=deleted,
    )


def run_job(
    api_client: Any,
    manifest: Mapping[str, Any],
    *,
    start_timeout_seconds: float,
    timeout_seconds: float,
    cleanup_policy: str,
    api_outage_tolerance_seconds: float,
    delete_on_success: bool = False,
    metrics_file: str = "",
    poll_interval_seconds: float = 10.0,
    log: Callable[[str], None] = print,
    use_watch: bool = True,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    api_attempts: int = 5,
    log_tail_lines: int = 20,
    connect_timeout_seconds: float = 10.0,
    read_timeout_seconds: float = 30.0,
    cleanup_timeout_seconds: float = 60.0,
    metrics_normalizer: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
    timeout_counts_paused_time: bool = False,
    cancel_timeout_seconds: float | None = None,
    outage_policy: RetryPolicy = OUTAGE_POLICY,
    launcher_pod: tuple[str, str] = ("", ""),
    active_deadline_served: bool = True,
) -> JobResult:
    """Runs a TrainJob or PyTorchJob to completion: check runtime, submit (or re-attach), follow, diagnose, clean up.

    The kind comes from the manifest (:data:`JOB_KINDS`): a ``PyTorchJob`` has no runtime to check, its phase is read
    by :func:`~..manifests.pytorchjob.pytorchjob_phase`, its pods by
    :func:`~..manifests.pytorchjob.pod_label_selector`, and it is suspended
    with ``spec.runPolicy.suspend``.

    Args:
        api_client: A ``kubernetes.client.ApiClient`` (see :func:`components._common.kube_auth.load_api_client`).
        manifest: The TrainJob (from :func:`~..manifests.trainjob.build_trainjob`) or PyTorchJob (from
            :func:`~..manifests.pytorchjob.build_pytorchjob`); its labels identify this run/task.
        start_timeout_seconds: How long the pods may take to start running (0: no limit).
        timeout_seconds: How long the whole run may take, from submission (0: no limit).
        cleanup_policy: ``delete``, ``keep`` or ``suspend``, applied when the job failed or exceeded its timeouts,
            or the run was cancelled; never for the launcher's own trouble (API outage, refused request).
        api_outage_tolerance_seconds: How long following rides out an unreachable or erroring API (0: as long as
            ``timeout_seconds`` allows); then the step fails with :class:`ApiOutageTooLong`, the job left running.
        delete_on_success: Delete the job after it completes.
        metrics_file: The JSONL metrics file the training code writes on the shared volume (progress lines).
        poll_interval_seconds: Length of one watch request / poll; steady state is one API request per interval.
        log: Where progress and diagnosis lines go.
        use_watch: Follow with watch requests (default) or with GET polling.
        clock: Monotonic clock in seconds (tests inject a fake one).
        sleep: Sleep function (tests inject a fake one).
        api_attempts: Attempts per API call on transient errors (5xx, 429, connection errors) outside following
            (runtime check, diagnosis); following and cleanup retry until their deadlines instead.
        log_tail_lines: Log lines of the failed container to read into the diagnosis.
        connect_timeout_seconds: TCP connect timeout of every request.
        read_timeout_seconds: Read timeout of every request but watches (those wait one window plus a margin); a
            request is also never given longer than what is left of the start or total timeout.
        cleanup_timeout_seconds: How long the diagnosis, and then the cleanup, may take after the job failed or
            timed out (and the delete of ``delete_on_success``).
        metrics_normalizer: Maps the raw metrics-file records read so far to step records (e.g.
            ``metrics.normalize_records`` for Training Hub's layouts); default: records with a numeric ``step``.
        timeout_counts_paused_time: Whether time the running job spends suspended by a user (paused from the
            dashboard) counts against ``timeout_seconds``; by default a pause stops the clock and is waited out.
        cancel_timeout_seconds: How long the cleanup after SIGTERM may take (default: the default 30 s termination
            grace period less a 5 s margin, :func:`~.state.cancel_budget`).
        outage_policy: The backoff of requests retried until a deadline, through an outage or a cleanup (capped
            exponential with jitter, :data:`~.state.OUTAGE_POLICY`; tests scale it down with their timings).
        launcher_pod: ``(namespace, name)`` of the launcher's own pod: after SIGTERM a ``DisruptionTarget``
            condition on it (evicted, preempted, node shutdown) means the launcher is disrupted, not the run
            cancelled, and the job is left running (:func:`~.launcher_pod.disruption`).
        active_deadline_served: Whether the TrainJob API serves ``spec.activeDeadlineSeconds``; where it does not, a
            job that exceeds ``timeout_seconds`` under ``cleanup_policy=keep`` is suspended rather than left running
            (the Trainer would have stopped it).

    Returns:
        A :class:`JobResult`.

    Raises:
        ValueError: A bad argument (named).
        RuntimeNotFoundError: The runtime does not exist (the error lists those that do).
        JobConflictError: The name is taken by another run/task's job.
        JobApiError: The API rejected a call, stayed unavailable, or did not answer before a timeout. After the
            job was seen, the message ends saying it was left running and how to find it; when a cleanup the policy
            asked for could not be done, with the ``kubectl`` command that does it.
        ApiOutageTooLong: The API stayed unreachable past ``api_outage_tolerance_seconds`` (the job left running).
        LauncherDisrupted: SIGTERM because the launcher pod was evicted or preempted (the job left running).
        JobFailed: The job failed or timed out (``.diagnosis``); :class:`JobCancelled` on SIGTERM/SIGINT.
    """
    if cleanup_policy not in CLEANUP_POLICIES:
        raise ValueError(f"cleanup_policy={cleanup_policy!r}: must be one of {list(CLEANUP_POLICIES)}")
    cancel_timeout_seconds = cancel_budget(None) if cancel_timeout_seconds is None else cancel_timeout_seconds
    seconds = {  # name: (value, what 0 means; "": 0 is refused)
        "start_timeout_seconds": (start_timeout_seconds, "no limit"),
        "timeout_seconds": (timeout_seconds, "no limit"),
        "api_outage_tolerance_seconds": (api_outage_tolerance_seconds, "as long as timeout_seconds allows"),
        "poll_interval_seconds": (poll_interval_seconds, ""),
        "connect_timeout_seconds": (connect_timeout_seconds, ""),
        "read_timeout_seconds": (read_timeout_seconds, ""),
        "cleanup_timeout_seconds": (cleanup_timeout_seconds, ""),
        "cancel_timeout_seconds": (cancel_timeout_seconds, ""),
    }
    for name, (value, zero_means) in seconds.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or not (value or zero_means):
            rule = f">= 0 (0 = {zero_means})" if zero_means else "> 0"
            raise ValueError(f"{name}={value!r}: must be a number of seconds {rule}")
    if api_attempts < 1:
        raise ValueError(f"api_attempts={api_attempts!r}: must be >= 1")
    metadata = manifest.get("metadata") or {}
    if manifest.get("kind") not in JOB_KINDS or not metadata.get("name") or not metadata.get("namespace"):
        raise ValueError(
            f"manifest: must be a {' or '.join(JOB_KINDS)} with metadata.name and metadata.namespace "
            f"(see build_trainjob / build_pytorchjob), got kind {manifest.get('kind')!r}"
        )
    settings = FollowSettings(
        start_timeout=float(start_timeout_seconds),
        timeout=float(timeout_seconds),
        cleanup_policy=cleanup_policy,
        delete_on_success=delete_on_success,
        metrics_file=metrics_file,
        poll_interval=float(poll_interval_seconds),
        log=log,
        use_watch=use_watch,
        clock=clock,
        sleep=sleep,
        attempts=api_attempts,
        log_tail_lines=log_tail_lines,
        connect_timeout=float(connect_timeout_seconds),
        read_timeout=float(read_timeout_seconds),
        cleanup_timeout=float(cleanup_timeout_seconds),
        metrics_normalizer=metrics_normalizer,
        timeout_counts_paused_time=bool(timeout_counts_paused_time),
        api_outage_tolerance=float(api_outage_tolerance_seconds),
        cancel_timeout=float(cancel_timeout_seconds),
        outage_policy=outage_policy,
        launcher_pod=(str(launcher_pod[0]), str(launcher_pod[1])),
    )
    started_at = clock()
    state = JobState(
        started_at=started_at,
        start_clock_at=started_at,
        metrics=MetricsTail(metrics_file, metrics_normalizer),
    )
    kind = JOB_KINDS[manifest["kind"]].kind.lower()
    name = metadata["name"]
    api = Api(
        api_client,
        sleep,
        log,
        api_attempts,
        clock=clock,
        connect_timeout=float(connect_timeout_seconds),
        read_timeout=float(read_timeout_seconds),
    )
    client = JobClient(
        api=api.bounded(lambda: run_deadline(state, settings)),
        manifest=manifest,
        say=lambda message: log(f"[{kind} {name}] {message}"),
    )
    return run(client, state, settings, active_deadline_served)
