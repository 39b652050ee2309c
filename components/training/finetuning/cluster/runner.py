"""Runs one TrainJob or PyTorchJob to its end: check the runtime, submit, follow, diagnose, clean up.

:func:`run_job` is the whole lifecycle, for a Kubeflow Trainer v2 ``TrainJob`` and for a Training Operator v1
``PyTorchJob`` alike: a :class:`~.job_kinds.JobKind` (picked from the manifest's ``kind``) says where the job lives,
how its phase is read, how its pods are found, whether a runtime is checked and how it is suspended; everything else
is shared. :class:`JobRun` holds one call's state and is made of three parts, one module each:

1. **Runtime discovery** (:mod:`.runtimes`): the referenced (Cluster)TrainingRuntime must exist (else the error lists
   those that do) and hold the replicated job the runtime patch targets (TrainJob only).
2. **Idempotent submit** (:class:`~.lifecycle.JobLifecycle`, over the requests of :class:`~.job_client.JobRequests`).
3. **Follow** (:class:`~.follow.FollowLoop`): watch or poll, progress lines, start and total timeouts, pauses, Kueue.
4. **Diagnose and clean up** per ``cleanup_policy`` on every exit after submission: failure, timeout, cancellation
   (SIGTERM from KFP, :mod:`.signals`) and any error while following; when the API cannot be reached the error names
   the job and the ``kubectl`` command that removes it (:mod:`.lifecycle`). On success delete only with
   ``delete_on_success``.

Every request has a (connect, read) timeout and none outlives the run's deadline (:mod:`.api`); transient failures are
retried with backoff by the shared policy (:mod:`components._common.retry`), never other 4xx (the API's message is
shown). A job carrying Kueue's queue label is never resumed by this code: Kueue admits it. Time (``clock``/``sleep``)
is injectable; the settings are one frozen :class:`FollowSettings`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

from components.training.finetuning.cluster import runtimes
from components.training.finetuning.cluster.api import Api, Deadline
from components.training.finetuning.cluster.errors import JobCancelled
from components.training.finetuning.cluster.follow import FollowLoop
from components.training.finetuning.cluster.job_client import JobRequests
from components.training.finetuning.cluster.job_kinds import JOB_KINDS, JobKind
from components.training.finetuning.cluster.lifecycle import CLEANUP_POLICIES, JobLifecycle, append_note
from components.training.finetuning.cluster.progress import MetricsTail
from components.training.finetuning.cluster.signals import Cancelled, cancel_on_signals, signals_ignored
from components.training.finetuning.pod import progress_server


@dataclasses.dataclass(frozen=True)
class FollowSettings:
    """How :func:`run_job` submits, follows and cleans up (validated by :func:`run_job`; see its arguments).

    Attributes:
        start_timeout: ``start_timeout_seconds`` (0: no limit).
        timeout: ``timeout_seconds`` (0: no limit).
        cleanup_policy: ``delete``, ``keep`` or ``suspend``.
        delete_on_success: Delete the job after it completes.
        metrics_file: The JSONL metrics file the training code writes on the shared volume.
        poll_interval: Length of one watch request / poll, in seconds.
        log: Where progress and diagnosis lines go.
        use_watch: Follow with watch requests (or with GET polling).
        clock: Monotonic clock in seconds.
        sleep: Sleep function.
        attempts: Attempts per API call on transient errors.
        log_tail_lines: Log lines of the failed container read into the diagnosis.
        connect_timeout: TCP connect timeout of every request.
        read_timeout: Read timeout of every request but watches.
        cleanup_timeout: How long the diagnosis, and then the cleanup, may take after the run ended.
        metrics_normalizer: Maps raw metrics-file records to step records (``None``: records with a numeric step).
        timeout_counts_paused_time: Whether a pause counts against ``timeout``.
    """

    start_timeout: float
    timeout: float
    cleanup_policy: str = "delete"
    delete_on_success: bool = False
    metrics_file: str = ""
    poll_interval: float = 10.0
    log: Callable[[str], None] = print
    use_watch: bool = True
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    attempts: int = 5
    log_tail_lines: int = 20
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    cleanup_timeout: float = 60.0
    metrics_normalizer: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None
    timeout_counts_paused_time: bool = False


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


class JobRun(JobRequests, FollowLoop, JobLifecycle):
    """State of one :func:`run_job` call (see there)."""

    def __init__(self, api_client: Any, manifest: Mapping[str, Any], settings: FollowSettings) -> None:
        self.manifest = manifest
        self.kind: JobKind = JOB_KINDS[manifest["kind"]]
        self.name = manifest["metadata"]["name"]
        self.namespace = manifest["metadata"]["namespace"]
        self.labels = dict(manifest["metadata"].get("labels") or {})
        self.settings = settings
        self.api = Api(
            api_client,
            self.settings.sleep,
            self.settings.log,
            self.settings.attempts,
            clock=self.settings.clock,
            connect_timeout=self.settings.connect_timeout,
            read_timeout=self.settings.read_timeout,
        )
        self.api.deadline = self.deadline
        self.metrics = MetricsTail(self.settings.metrics_file, self.settings.metrics_normalizer)
        self.job: dict[str, Any] | None = None
        self.reattached = False
        self.started = False
        self.reported: set[str] = set()
        self.last_line = ""
        self.started_at = self.settings.clock()
        self.start_clock_at = self.started_at  # the start timeout counts from here (reset when Kueue admits the job)
        self.submitted = False  # a create was sent: the job may exist and is this run/task's
        self.queue_state = ""
        self.paused_since: float | None = None
        self.paused_total = 0.0
        self.watch_failures = 0

    def deadline(self) -> Deadline | None:
        """When the run must end: ``timeout_seconds`` from submission, ``start_timeout_seconds`` until pods run."""
        found = []
        if self.settings.timeout:
            at = self.started_at + self.settings.timeout + self.paused_seconds()  # a pause that does not count moves it
            found.append(Deadline(at, f"timeout_seconds={self.settings.timeout:g}"))
        if self.settings.start_timeout and not self.started:
            reason = f"start_timeout_seconds={self.settings.start_timeout:g}"
            found.append(Deadline(self.start_clock_at + self.settings.start_timeout, reason))
        return min(found, key=lambda deadline: deadline.at) if found else None

    def say(self, message: str) -> None:
        """Logs a line prefixed with the job's kind and name."""
        self.settings.log(f"[{self.kind.kind.lower()} {self.name}] {message}")

    def check_runtime(self) -> None:
        """Fails unless the referenced runtime exists and has the replicated job the runtime patch targets."""
        runtimes.check_runtime(self.api, self.manifest, self.say)

    def run(self) -> JobResult:
        """Check runtime, submit, follow; clean up per policy on every exit after submission."""
        try:
            with cancel_on_signals():
                if self.kind.checks_runtime:
                    self.check_runtime()
                self.submit()
                self.settings.log(f"Job: {self.namespace}/{self.name}")
                outcome = self.follow()
        except Cancelled as signal_name:
            self.say(f"cancelled ({signal_name}): applying cleanup_policy={self.settings.cleanup_policy}")
            if not self.submitted:
                raise JobCancelled(self.diagnose("Cancelled")) from None
            raise self.wrap_up("Cancelled") from None
        except BaseException as error:
            if self.submitted:  # an API outage, a 403, a bug...: the job must not be left running on its GPUs
                policy = self.settings.cleanup_policy
                self.say(f"stopped by an error ({type(error).__name__}): applying cleanup_policy={policy}")
                with signals_ignored():
                    note = self.clean_up()
                if note:
                    append_note(error, note)
            raise
        if outcome != "Complete":
            raise self.wrap_up(outcome)
        deleted = False
        if self.settings.delete_on_success:
            with self.api.budget(
                self.settings.cleanup_timeout, f"cleanup_timeout_seconds={self.settings.cleanup_timeout:g}"
            ):
                deleted = self.delete_job()
        return JobResult(
            name=self.name,
            namespace=self.namespace,
            reattached=self.reattached,
            duration_seconds=self.settings.clock() - self.started_at,
            last_progress=progress_server.trainer_status(self.job) or dict(self.metrics.last),
            deleted=deleted,
        )


def run_job(
    api_client: Any,
    manifest: Mapping[str, Any],
    *,
    start_timeout_seconds: float,
    timeout_seconds: float,
    cleanup_policy: str = "delete",
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
) -> JobResult:
    """Runs a TrainJob or PyTorchJob to completion: check runtime, submit (or re-attach), follow, diagnose, clean up.

    The kind comes from the manifest (:data:`JOB_KINDS`): a ``PyTorchJob`` has no runtime to check, its phase is read
    by :func:`~..manifests.pytorchjob.pytorchjob_phase`, its pods by
    :func:`~..manifests.pytorchjob.pod_label_selector`, and it is suspended
    with ``spec.runPolicy.suspend``.

    Args:
        api_client: A ``kubernetes.client.ApiClient`` (see :func:`load_api_client`).
        manifest: The TrainJob (from :func:`~..manifests.trainjob.build_trainjob`) or PyTorchJob (from
            :func:`~..manifests.pytorchjob.build_pytorchjob`); its labels identify this run/task.
        start_timeout_seconds: How long the pods may take to start running (0: no limit).
        timeout_seconds: How long the whole run may take, from submission (0: no limit).
        cleanup_policy: ``delete`` (default), ``keep`` or ``suspend``, applied on every exit after submission
            (failure, timeout, cancellation, an error while following).
        delete_on_success: Delete the job after it completes.
        metrics_file: The JSONL metrics file the training code writes on the shared volume (progress lines).
        poll_interval_seconds: Length of one watch request / poll; steady state is one API request per interval.
        log: Where progress and diagnosis lines go.
        use_watch: Follow with watch requests (default) or with GET polling.
        clock: Monotonic clock in seconds (tests inject a fake one).
        sleep: Sleep function (tests inject a fake one).
        api_attempts: Attempts per API call on transient errors (5xx, 429, connection errors).
        log_tail_lines: Log lines of the failed container to read into the diagnosis.
        connect_timeout_seconds: TCP connect timeout of every request.
        read_timeout_seconds: Read timeout of every request but watches (those wait one window plus a margin); a
            request is also never given longer than what is left of the start or total timeout.
        cleanup_timeout_seconds: How long the diagnosis, and then the cleanup, may take after the run ended.
        metrics_normalizer: Maps the raw metrics-file records read so far to step records (e.g.
            ``metrics.normalize_records`` for Training Hub's layouts); default: records with a numeric ``step``.
        timeout_counts_paused_time: Whether time the running job spends suspended by a user (paused from the
            dashboard) counts against ``timeout_seconds``; by default a pause stops the clock and is waited out.

    Returns:
        A :class:`JobResult`.

    Raises:
        ValueError: A bad argument (named).
        RuntimeNotFoundError: The runtime does not exist (the error lists those that do).
        JobConflictError: The name is taken by another run/task's job.
        JobApiError: The API rejected a call, stayed unavailable, or did not answer before a timeout. When the
            job could not be cleaned up, the message ends with the ``kubectl`` command that does it.
        JobFailed: The job failed or timed out (``.diagnosis``); :class:`JobCancelled` on SIGTERM/SIGINT.
    """
    if cleanup_policy not in CLEANUP_POLICIES:
        raise ValueError(f"cleanup_policy={cleanup_policy!r}: must be one of {list(CLEANUP_POLICIES)}")
    for name, value in (("start_timeout_seconds", start_timeout_seconds), ("timeout_seconds", timeout_seconds)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{name}={value!r}: must be a number of seconds >= 0 (0 = no limit)")
    if not isinstance(poll_interval_seconds, (int, float)) or poll_interval_seconds <= 0:
        raise ValueError(f"poll_interval_seconds={poll_interval_seconds!r}: must be > 0")
    if api_attempts < 1:
        raise ValueError(f"api_attempts={api_attempts!r}: must be >= 1")
    for name, value in (
        ("connect_timeout_seconds", connect_timeout_seconds),
        ("read_timeout_seconds", read_timeout_seconds),
        ("cleanup_timeout_seconds", cleanup_timeout_seconds),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"{name}={value!r}: must be a number of seconds > 0")
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
    )
    return JobRun(api_client, manifest, settings).run()
