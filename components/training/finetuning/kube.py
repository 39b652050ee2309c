"""The small client layer that runs a TrainJob: auth, runtime discovery, idempotent submit, follow, diagnose, clean up.

Built on the official ``kubernetes`` client. :func:`run_trainjob` is the whole lifecycle, for a Kubeflow Trainer v2
``TrainJob`` and for a Training Operator v1 ``PyTorchJob`` alike: a :class:`JobKind` (:data:`JOB_KINDS`, picked from
the manifest's ``kind``) says where the job lives, how its phase is read, how its pods are found, whether a runtime is
checked and how it is suspended; everything else is shared.

1. **Runtime discovery**: the referenced (Cluster)TrainingRuntime must exist (else the error lists those that do) and
   hold the replicated job the runtime patch targets.
2. **Idempotent submit**: create; on 409 re-attach when the existing TrainJob carries this run/task's labels (a
   retried KFP task never creates a second TrainJob; a suspended one is resumed), otherwise fail.
3. **Follow** with a watch (one request per ``poll_interval_seconds`` window, reconnect when it ends or drops, relist
   on 410 Gone) or by polling; log progress lines from the trainer status (RHOAI's ``trainerStatus`` annotation or
   ``status.trainerStatus``) or the metrics JSONL file; enforce the start timeout (pods not running) and the total
   timeout. A running job that a user suspends (pauses) is waited for and followed again once resumed; the pause
   counts against the total timeout only with ``timeout_counts_paused_time``.
4. **Diagnose** on failure/timeout: conditions, pods, events and the failed container's last log lines become
   one-line causes with a remedy (:mod:`.diagnosis`).
5. **Clean up** per ``cleanup_policy`` (``delete`` | ``keep`` | ``suspend``) on every exit after submission: failure,
   timeout, cancellation (SIGTERM from KFP) and any error while following (an API outage, a 403); best effort, never
   masking the original error, and when the API cannot be reached the error names the job and the ``kubectl`` command
   that removes it (:mod:`.job_cleanup`). On success delete only with ``delete_on_success``.

Every request has a (connect, read) timeout and none outlives the run's deadline (:mod:`.cluster_requests`); transient
failures are retried with backoff by the shared policy (:mod:`components._common.retry`), never other 4xx (the API's
message is shown). A job carrying Kueue's queue label is never resumed by this code: Kueue admits it. Time
(``clock``/``sleep``) is injectable. :data:`API_PERMISSIONS` lists every call's RBAC verb; ``rbac.yaml`` grants
exactly these.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from components._common.retry import GaveUp, call_with_retries, is_transient
from components.training.finetuning import diagnosis as diagnosis_module
from components.training.finetuning import progress_server, pytorchjob, runtime_check
from components.training.finetuning.cluster_auth import (  # noqa: F401 - re-exported
    AUTH_TOKEN_ENV,
    SERVER_URL_ENV,
    SERVICE_ACCOUNT_DIR,
    KubeAuthError,
    load_api_client,
)
from components.training.finetuning.cluster_requests import (  # noqa: F401 - re-exported
    Api,
    Deadline,
    TrainJobApiError,
    TrainJobError,
    api_message,
    failure_text,
)
from components.training.finetuning.cluster_requests import rejected as _rejected
from components.training.finetuning.cluster_requests import status_of as _status
from components.training.finetuning.diagnosis import Diagnosis
from components.training.finetuning.follow_progress import (  # noqa: F401 - re-exported
    MetricsTail,
    format_duration,
    progress_line,
)
from components.training.finetuning.job_cleanup import (
    CLEANUP_POLICIES,
    append_note,
    cleanup_failed_note,
    manual_command,
)
from components.training.finetuning.runtime_check import RUNTIME_PLURALS, RuntimeNotFoundError  # noqa: F401
from components.training.finetuning.trainjob import (
    API_GROUP,
    API_VERSION,
    QUEUE_NAME_LABEL,
    TRAINJOB_PLURAL,
)

#: JobSet labels the pods it creates with the JobSet's (= the TrainJob's) name.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
#: Every API call made here as (apiGroup, resource, verb); ``rbac.yaml`` grants exactly these.
API_PERMISSIONS = frozenset(
    {
        (API_GROUP, "trainjobs", "create"),
        (API_GROUP, "trainjobs", "get"),
        (API_GROUP, "trainjobs", "watch"),
        (API_GROUP, "trainjobs", "patch"),
        (API_GROUP, "trainjobs", "delete"),
        (API_GROUP, "clustertrainingruntimes", "get"),
        (API_GROUP, "clustertrainingruntimes", "list"),
        (API_GROUP, "trainingruntimes", "get"),
        (API_GROUP, "trainingruntimes", "list"),
        ("", "pods", "list"),
        ("", "pods/log", "get"),
        ("", "events", "list"),
    }
    | pytorchjob.API_PERMISSIONS
)
_MAX_LOGGED_PODS = 2


class TrainJobConflictError(TrainJobError):
    """A TrainJob with the deterministic name exists but belongs to another run or task."""


class TrainJobFailed(TrainJobError):
    """The TrainJob failed, timed out or was cancelled; ``diagnosis`` says why."""

    def __init__(self, diagnosis: Diagnosis) -> None:
        super().__init__(diagnosis.text())
        self.diagnosis = diagnosis


class TrainJobCancelled(TrainJobFailed):
    """The task was cancelled (SIGTERM/SIGINT) while the TrainJob ran; cleanup has been applied."""


class _Cancelled(BaseException):
    """Raised by the signal handler; a BaseException so that no client code swallows it."""


@dataclasses.dataclass(frozen=True)
class TrainJobResult:
    """How a successful TrainJob run went.

    Attributes:
        name: The TrainJob's name.
        namespace: Its namespace.
        reattached: Whether an existing TrainJob of the same run/task was followed instead of creating one.
        duration_seconds: Time from submission to completion (by the injected clock).
        last_progress: The last progress record seen (metrics-file keys or trainerStatus fields), ``{}`` if none.
        deleted: Whether the TrainJob was deleted afterwards (``delete_on_success``).
    """

    name: str
    namespace: str
    reattached: bool
    duration_seconds: float
    last_progress: dict[str, Any]
    deleted: bool


@contextlib.contextmanager
def _cancel_on_signals() -> Iterator[None]:
    """Turns SIGTERM (and SIGINT) into :class:`_Cancelled` while following (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise _Cancelled(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """Ignores SIGTERM/SIGINT during cleanup so that a second signal cannot interrupt it (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def trainjob_phase(trainjob: Mapping[str, Any]) -> str:
    """``Complete``, ``Failed``, ``Suspended``, ``Running`` (a pod ready / progress reported) or ``Pending``."""
    for type_ in ("Complete", "Failed", "Suspended"):
        if diagnosis_module.condition(trainjob, type_):
            return type_
    status = trainjob.get("status") or {}
    if status.get("trainerStatus") or any((job.get("ready") or 0) > 0 for job in status.get("jobsStatus") or []):
        return "Running"
    return "Pending"


def _owned_by(trainjob: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    existing = (trainjob.get("metadata") or {}).get("labels") or {}
    return all(existing.get(key) == value for key, value in labels.items())


@dataclasses.dataclass(frozen=True)
class JobKind:
    """What differs between the job kinds :func:`run_trainjob` runs; everything else is shared.

    Attributes:
        kind: The manifest's ``kind`` (``TrainJob``, ``PyTorchJob``).
        group: The API group.
        version: The API version.
        plural: The resource name.
        phase: Reads ``Complete``, ``Failed``, ``Suspended``, ``Running`` or ``Pending`` from the job.
        pod_selector: The label selector of the job's pods, from its name.
        checks_runtime: Whether a training runtime is referenced and checked before submitting.
        suspend_path: Where ``suspend`` lives under ``spec`` (``("suspend",)`` or ``("runPolicy", "suspend")``).
        children: What deleting the job removes with it (for the log).
    """

    kind: str
    group: str
    version: str
    plural: str
    phase: Callable[[Mapping[str, Any]], str]
    pod_selector: Callable[[str], str]
    checks_runtime: bool
    suspend_path: tuple[str, ...]
    children: str

    def suspend_patch(self, suspend: bool) -> dict[str, Any]:
        """The merge patch that suspends (``True``) or resumes (``False``) a job of this kind."""
        body: Any = suspend
        for key in reversed(self.suspend_path):
            body = {key: body}
        return {"spec": body}

    def is_suspended(self, job: Mapping[str, Any]) -> bool:
        """Whether the job's spec asks for it to be suspended."""
        node: Any = job.get("spec") or {}
        for key in self.suspend_path:
            node = (node or {}).get(key) if isinstance(node, Mapping) else None
        return node is True


TRAINJOB_KIND = JobKind(
    kind="TrainJob",
    group=API_GROUP,
    version=API_VERSION,
    plural=TRAINJOB_PLURAL,
    phase=trainjob_phase,
    pod_selector=lambda name: f"{JOBSET_NAME_LABEL}={name}",
    checks_runtime=True,
    suspend_path=("suspend",),
    children="its JobSet and pods",
)
PYTORCHJOB_KIND = JobKind(
    kind="PyTorchJob",
    group=pytorchjob.API_GROUP,
    version=pytorchjob.API_VERSION,
    plural=pytorchjob.PYTORCHJOB_PLURAL,
    phase=pytorchjob.pytorchjob_phase,
    pod_selector=pytorchjob.pod_label_selector,
    checks_runtime=False,
    suspend_path=("runPolicy", "suspend"),
    children="its pods",
)
#: The job kinds :func:`run_trainjob` runs, by manifest ``kind``.
JOB_KINDS = {job_kind.kind: job_kind for job_kind in (TRAINJOB_KIND, PYTORCHJOB_KIND)}


class _NameBeingReleased(Exception):
    """Create answered 409 but the job reads 404: the name is held by a job being deleted (retried with backoff)."""


def _queue_name(job: Mapping[str, Any]) -> str:
    """The Kueue LocalQueue a job is submitted to (its ``kueue.x-k8s.io/queue-name`` label), ``""`` for none."""
    return str(((job.get("metadata") or {}).get("labels") or {}).get(QUEUE_NAME_LABEL) or "")


def _selector_matches(selector: str, labels: Mapping[str, str]) -> bool:
    pairs = [term.split("=", 1) for term in selector.split(",") if term]
    return all(labels.get(key) == value for key, value in pairs)


class _TrainJobRun:
    """State of one :func:`run_trainjob` call (see there)."""

    def __init__(self, api_client: Any, manifest: Mapping[str, Any], options: dict[str, Any]) -> None:
        self.manifest = manifest
        self.kind: JobKind = JOB_KINDS[manifest["kind"]]
        self.name = manifest["metadata"]["name"]
        self.namespace = manifest["metadata"]["namespace"]
        self.labels = dict(manifest["metadata"].get("labels") or {})
        self.__dict__.update(options)
        self.api = Api(
            api_client,
            self.sleep,
            self.log,
            self.attempts,
            clock=self.clock,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
        )
        self.api.deadline = self.deadline
        self.metrics = MetricsTail(self.metrics_file, self.metrics_normalizer)
        self.job: dict[str, Any] | None = None
        self.reattached = False
        self.started = False
        self.reported: set[str] = set()
        self.last_line = ""
        self.started_at = self.clock()
        self.start_clock_at = self.started_at  # the start timeout counts from here (reset when Kueue admits the job)
        self.submitted = False  # a create was sent: the job may exist and is this run/task's
        self.queue_state = ""
        self.paused_since: float | None = None
        self.paused_total = 0.0

    def deadline(self) -> Deadline | None:
        """When the run must end: ``timeout_seconds`` from submission, ``start_timeout_seconds`` until pods run."""
        found = []
        if self.timeout:
            at = self.started_at + self.timeout + self.paused_seconds()  # a pause that does not count moves it
            found.append(Deadline(at, f"timeout_seconds={self.timeout:g}"))
        if self.start_timeout and not self.started:
            reason = f"start_timeout_seconds={self.start_timeout:g}"
            found.append(Deadline(self.start_clock_at + self.start_timeout, reason))
        return min(found, key=lambda deadline: deadline.at) if found else None

    def say(self, message: str) -> None:
        self.log(f"[{self.kind.kind.lower()} {self.name}] {message}")

    # -- runtime discovery -------------------------------------------------------------------------------------------
    def check_runtime(self) -> None:
        """Fails unless the referenced runtime exists and has the replicated job the runtime patch targets."""
        runtime_check.check_runtime(self.api, self.manifest, self.say)

    # -- submit --------------------------------------------------------------------------------------------------------
    def submit(self) -> dict[str, Any]:
        """Creates the job, or re-attaches to this run/task's existing one.

        A 409 for a job that then reads 404 (one being deleted) is retried with backoff by the shared policy, a
        bounded number of times; a job still terminating (``deletionTimestamp``) is waited for until the deadline.
        """
        what = f"creating {self.kind.kind} {self.namespace}/{self.name}"
        deadline = self.clock() + max(self.start_timeout, 60.0)
        while True:
            try:
                existing = call_with_retries(
                    self.create_or_read,
                    self.api.policy,
                    retryable=lambda error: isinstance(error, _NameBeingReleased),
                    on_retry=lambda number, delay, error: self.say(f"{what}: {error}; retry {number} in {delay:.1f}s"),
                    sleep=self.sleep,
                    clock=self.clock,
                )
            except GaveUp as gave_up:
                self.submitted = False  # every create was refused: nothing of this run/task to clean up
                raise TrainJobApiError(
                    f"{what}: {gave_up.last} on each of {gave_up.attempts} attempts: a {self.kind.kind} of that name "
                    f"is probably being deleted; retry the task later, or check `kubectl get "
                    f"{self.kind.kind.lower()} {self.name} -n {self.namespace}`"
                ) from None
            if existing is None:
                runtime = (self.manifest["spec"].get("runtimeRef") or {}).get("name")
                self.say(f"created in namespace {self.namespace}" + (f" (runtime {runtime})" if runtime else ""))
                return self.job
            if not _owned_by(existing, self.labels):
                self.submitted = False  # the name is someone else's job: never clean it up
                theirs = (existing.get("metadata") or {}).get("labels") or {}
                raise TrainJobConflictError(
                    f"{self.kind.kind} {self.namespace}/{self.name} already exists and belongs to another run/task "
                    f"(labels {theirs}, expected {self.labels}); delete it or run with another task name"
                )
            if (existing.get("metadata") or {}).get("deletionTimestamp"):
                if self.clock() > deadline:
                    raise TrainJobError(
                        f"{self.kind.kind} {self.namespace}/{self.name} is still being deleted; retry later"
                    )
                self.say(f"a previous attempt's {self.kind.kind} is being deleted; waiting to create a new one")
                self.sleep(self.poll_interval)
                continue
            return self.reattach(existing)

    def create_or_read(self) -> dict[str, Any] | None:
        """Creates the job (``None``: created, now in ``self.job``) or, on 409, reads the existing one.

        Raises:
            _NameBeingReleased: 409, then 404: the name is held by a job being deleted.
        """
        from kubernetes.client import ApiException

        what = f"creating {self.kind.kind} {self.namespace}/{self.name}"
        self.submitted = True
        try:
            self.job = self.api.call(
                what,
                self.api.custom.create_namespaced_custom_object,
                self.kind.group,
                self.kind.version,
                self.namespace,
                self.kind.plural,
                dict(self.manifest),
            )
            return None
        except ApiException as error:
            if _status(error) != 409:
                self.submitted = False  # refused: nothing was created
                raise _rejected(what, error) from None
        existing = self.get_job()
        if existing is None:
            raise _NameBeingReleased("HTTP 409 AlreadyExists, then HTTP 404 reading it")
        return existing

    def reattach(self, existing: dict[str, Any]) -> dict[str, Any]:
        """Follows this run/task's existing job (a retried KFP task); resumes it when suspended, unless Kueue queues."""
        self.reattached = True
        self.job = existing
        created = (existing.get("metadata") or {}).get("creationTimestamp", "earlier")
        self.say(
            f"re-attached to the existing {self.kind.kind} of this run/task (created {created}); no second job created"
        )
        if self.kind.is_suspended(existing):
            queue = _queue_name(existing)
            if queue:
                self.say(f"it is suspended and queued in Kueue LocalQueue {queue!r}: leaving its admission to Kueue")
            else:
                self.say("it is suspended: resuming it")
                self.job = self.patch_job(self.kind.suspend_patch(False), "resuming")
        return self.job

    # -- reading -------------------------------------------------------------------------------------------------------
    def get_job(self) -> dict[str, Any] | None:
        """The TrainJob now, or None when it does not exist."""
        from kubernetes.client import ApiException

        what = f"reading {self.kind.kind} {self.namespace}/{self.name}"
        try:
            return self.api.call(
                what,
                self.api.custom.get_namespaced_custom_object,
                self.kind.group,
                self.kind.version,
                self.namespace,
                self.kind.plural,
                self.name,
            )
        except ApiException as error:
            if _status(error) == 404:
                return None
            raise _rejected(what, error) from None

    def list_pods(self) -> list[dict[str, Any]]:
        """The job's pods (JobSet, or the Training Operator, labels them with the job's name)."""
        from kubernetes.client import ApiException

        what = f"listing pods of {self.kind.kind} {self.name}"
        selector = self.kind.pod_selector(self.name)
        try:
            result = self.api.call(
                what,
                self.api.core.list_namespaced_pod,
                self.namespace,
                label_selector=selector,
                _preload_content=False,
            )
        except ApiException as error:
            raise _rejected(what, error) from None
        items = json.loads(result.data).get("items") or []
        return [pod for pod in items if _selector_matches(selector, (pod.get("metadata") or {}).get("labels") or {})]

    def list_events(self) -> list[dict[str, Any]]:
        """Events about the TrainJob, its JobSet/Jobs and pods (their names start with the TrainJob's)."""
        from kubernetes.client import ApiException

        what = f"listing events of {self.kind.kind} {self.name}"
        try:
            result = self.api.call(what, self.api.core.list_namespaced_event, self.namespace, _preload_content=False)
        except ApiException as error:
            raise _rejected(what, error) from None
        items = json.loads(result.data).get("items") or []
        mine = []
        for event in items:
            involved = str((event.get("involvedObject") or {}).get("name", ""))
            if involved == self.name or involved.startswith(f"{self.name}-"):
                mine.append(event)
        return mine

    def read_log(self, pod: str, container: str, previous: bool) -> str:
        """The last lines of a container's log (``""`` when there is none)."""
        from kubernetes.client import ApiException

        try:
            return self.api.call(
                f"reading log of {pod}/{container}",
                self.api.core.read_namespaced_pod_log,
                pod,
                self.namespace,
                container=container,
                tail_lines=self.log_tail_lines,
                previous=previous,
            )
        except ApiException:
            return ""

    # -- writing -------------------------------------------------------------------------------------------------------
    def patch_job(self, body: dict[str, Any], doing: str) -> dict[str, Any]:
        from kubernetes.client import ApiException

        what = f"{doing} {self.kind.kind} {self.namespace}/{self.name}"
        try:
            return self.api.call(
                what,
                self.api.custom.patch_namespaced_custom_object,
                self.kind.group,
                self.kind.version,
                self.namespace,
                self.kind.plural,
                self.name,
                body,
            )
        except ApiException as error:
            raise _rejected(what, error) from None

    def delete_job(self) -> bool:
        """Deletes the TrainJob and (in the background, by owner references) its JobSet and pods."""
        from kubernetes.client import ApiException

        what = f"deleting {self.kind.kind} {self.namespace}/{self.name}"
        try:
            self.api.call(
                what,
                self.api.custom.delete_namespaced_custom_object,
                self.kind.group,
                self.kind.version,
                self.namespace,
                self.kind.plural,
                self.name,
                propagation_policy="Background",
            )
        except ApiException as error:
            if _status(error) == 404:
                return False
            raise _rejected(what, error) from None
        self.say(f"deleted (with {self.kind.children})")
        return True

    # -- follow --------------------------------------------------------------------------------------------------------
    def follow(self) -> str:
        """Follows the TrainJob until it completes, fails, is deleted or a timeout expires; returns the outcome."""
        assert self.job is not None
        while True:
            phase = self.kind.phase(self.job)
            if phase in ("Complete", "Failed"):
                self.report(phase)
                return phase
            paused = self.note_pause(phase)
            if not self.started:
                self.observe_queue()
                self.started = self.check_started(phase)
            self.report("Running" if self.started and phase == "Pending" else phase)
            elapsed = self.clock() - self.started_at - self.paused_seconds()
            start_elapsed = self.clock() - self.start_clock_at
            if self.timeout and elapsed >= self.timeout:
                return "Timeout"
            if not self.started and self.start_timeout and start_elapsed >= self.start_timeout:
                return "StartTimeout"
            window = self.poll_interval
            clock_stopped = paused and not self.timeout_counts_paused_time  # no deadline comes closer while paused
            for limit, spent in ((self.timeout, elapsed), (0 if self.started else self.start_timeout, start_elapsed)):
                if limit and not clock_stopped:
                    window = min(window, max(limit - spent, 0.001))
            job = self.wait_for_change(window)
            if job is None:
                return "Deleted"
            self.job = job

    def observe_queue(self) -> None:
        """Logs a Kueue-queued job's state when it changes; while Kueue holds it suspended the start timeout waits."""
        queue = _queue_name(self.job or {})
        if not queue:
            return
        suspended = self.kind.is_suspended(self.job or {})
        if suspended:
            self.start_clock_at = self.clock()  # start_timeout_seconds counts from admission
        state = "suspended" if suspended else "admitted"
        if state != self.queue_state:
            self.queue_state = state
            waiting = "suspended, waiting for Kueue to admit it (start_timeout_seconds counts from admission)"
            self.say(f"Kueue LocalQueue {queue!r}: " + (waiting if suspended else "admitted"))

    # -- pause (a user suspends the running job, e.g. from the OpenShift AI dashboard) ---------------------------------
    def note_pause(self, phase: str) -> bool:
        """Whether a started job is paused now; logs when a pause begins and ends (one line each)."""
        paused = self.started and (phase == "Suspended" or self.kind.is_suspended(self.job or {}))
        now = self.clock()
        if paused and self.paused_since is None:
            self.paused_since = now
            counted = "counts" if self.timeout_counts_paused_time else "does not count"
            self.say(
                "paused: the job was suspended (its pods stop after a just-in-time checkpoint); waiting for it to be "
                f"resumed (the pause {counted} against timeout_seconds)"
            )
        elif not paused and self.paused_since is not None:
            self.paused_total += now - self.paused_since
            self.say(f"resumed after a pause of {format_duration(now - self.paused_since)}: following the resumed run")
            self.paused_since = None
        return paused

    def paused_seconds(self) -> float:
        """Time spent paused that does not count against ``timeout_seconds`` (0 when pauses count)."""
        if self.timeout_counts_paused_time:
            return 0.0
        ongoing = self.clock() - self.paused_since if self.paused_since is not None else 0.0
        return self.paused_total + ongoing

    def check_started(self, phase: str) -> bool:
        """Whether training has started (a pod running); logs pod problems once each while waiting."""
        if phase == "Running" or self.metrics.poll():
            return True
        pods = self.list_pods()
        for pod in pods:
            for cause in diagnosis_module.pod_causes(pod):
                if cause.line() not in self.reported:
                    self.reported.add(cause.line())
                    self.say(f"waiting: {cause.line()}")
        for pod in pods:
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded") or any(
                "running" in (status.get("state") or {}) for status in statuses
            ):
                return True
        return False

    def report(self, phase: str) -> None:
        """Logs a progress line when it changed."""
        line = progress_line(phase, progress_server.trainer_status(self.job), self.metrics.poll())
        if line != self.last_line:
            self.last_line = line
            self.say(line)

    def wait_for_change(self, window: float) -> dict[str, Any] | None:
        """Waits up to ``window`` seconds (one watch request, or one sleep + GET); returns the job's newest state."""
        if not self.use_watch:
            self.sleep(window)
            return self.get_job()
        return self.watch_window(window)

    def watch_window(self, window: float) -> dict[str, Any] | None:
        """One watch request of about ``window`` seconds; returns early only on completion, failure or deletion."""
        import urllib3
        from kubernetes import watch
        from kubernetes.client import ApiException

        assert self.job is not None
        kwargs: dict[str, Any] = {
            "field_selector": f"metadata.name={self.name}",
            "timeout_seconds": max(1, math.ceil(window)),
            "_request_timeout": self.api.request_timeout(window + min(5.0, window)),
        }
        version = (self.job.get("metadata") or {}).get("resourceVersion")
        if version:
            kwargs["resource_version"] = version
        began = self.clock()
        job = self.job
        answered: list[bool] = []

        @functools.wraps(self.api.custom.list_namespaced_custom_object)
        def list_call(*args: Any, **call_kwargs: Any) -> Any:
            response = self.api.custom.list_namespaced_custom_object(*args, **call_kwargs)
            answered.append(True)  # the API answered: a read timeout from now on only ends the window
            return response

        stream = watch.Watch().stream(
            list_call,
            self.kind.group,
            self.kind.version,
            self.namespace,
            self.kind.plural,
            **kwargs,
        )
        try:
            for event in stream:
                obj = event.get("raw_object") or {}
                if event.get("type") == "BOOKMARK" or (obj.get("metadata") or {}).get("name") != self.name:
                    continue
                if event.get("type") == "DELETED":
                    return None
                job = obj
                if self.kind.phase(job) in ("Complete", "Failed"):
                    return job
            self.watch_failures = 0
        except ApiException as error:
            if _status(error) == 410:
                self.say("watch expired (410 Gone): relisting")
                return self.get_job()
            if not is_transient(error):
                raise _rejected(f"watching the {self.kind.kind}", error) from None
            self.watch_retry(api_message(error))
        except (urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.ProtocolError) as error:
            if not answered:  # connected, but the API never answered
                self.watch_retry(failure_text(error))
            # else: the window ended on the client side, or the connection dropped: reconnect next time
        except (urllib3.exceptions.HTTPError, OSError) as error:
            self.watch_retry(f"{type(error).__name__}: {error}")
        finally:
            stream.close()
        spent = self.clock() - began
        if spent < window / 2:
            self.sleep(window - spent)  # the watch ended early (dropped): keep to one request per window
        return job

    def watch_retry(self, failure: str) -> None:
        self.watch_failures += 1
        if self.watch_failures >= self.attempts:
            raise TrainJobApiError(
                f"watching {self.kind.kind} {self.name}: failed {self.watch_failures} times, last: {failure}"
            )
        self.say(f"watch failed ({failure}); reconnecting")

    # -- failure -------------------------------------------------------------------------------------------------------
    def diagnose(self, outcome: str) -> Diagnosis:
        """Collects conditions, pods, events and failed containers' log tails into a diagnosis (never raises)."""
        job = self.job or {"metadata": {"name": self.name, "namespace": self.namespace}}
        pods: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        logs: dict[str, str] = {}
        if outcome != "Cancelled":
            try:
                pods = self.list_pods()
                events = self.list_events()
                for pod, container, previous in self.failed_containers(pods)[:_MAX_LOGGED_PODS]:
                    text = self.read_log(pod, container, previous)
                    if text:
                        logs[f"pod {pod}, container {container}"] = text
            except TrainJobError as error:
                self.say(f"diagnosis is incomplete: {error}")
        return diagnosis_module.diagnose(
            outcome,
            job,
            pods,
            events,
            logs,
            start_timeout=self.start_timeout,
            timeout=self.timeout,
            tail_lines=self.log_tail_lines,
        )

    @staticmethod
    def failed_containers(pods: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
        """(pod, container, previous) of containers that exited non-zero or crash-loop, in pod order."""
        found = []
        for pod in pods:
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                state = status.get("state") or {}
                last = (status.get("lastState") or {}).get("terminated") or {}
                terminated = state.get("terminated") or {}
                name = pod["metadata"]["name"]
                if terminated.get("exitCode") not in (None, 0):
                    found.append((name, status["name"], False))
                elif state.get("waiting") and last.get("exitCode") not in (None, 0):
                    found.append((name, status["name"], True))
        return found

    def clean_up(self) -> str:
        """Applies the cleanup policy, best effort, within ``cleanup_timeout_seconds``.

        Returns:
            ``""``, or when the API could not do it, the note naming the job and the ``kubectl`` command that does.
        """
        command = manual_command(
            self.kind.kind, self.name, self.namespace, self.cleanup_policy, self.kind.suspend_patch(True)
        )
        if self.cleanup_policy == "keep":
            self.say(f"kept (cleanup_policy=keep): `{command}`")
            return ""
        try:
            with self.api.budget(self.cleanup_timeout, f"cleanup_timeout_seconds={self.cleanup_timeout:g}"):
                if self.job is None:  # the create's answer never came: clean up only this run/task's job
                    existing = self.get_job()
                    if existing is None or not _owned_by(existing, self.labels):
                        return ""
                    self.job = existing
                if self.cleanup_policy == "delete":
                    self.delete_job()
                else:
                    self.patch_job(self.kind.suspend_patch(True), "suspending")
                    self.say("suspended (cleanup_policy=suspend): its pods are removed, the job stays for inspection")
            return ""
        except Exception as error:  # noqa: BLE001 - best effort: a failed cleanup never masks the original error
            text = str(error) if isinstance(error, TrainJobError) else failure_text(error)
            note = cleanup_failed_note(self.kind.kind, self.name, self.namespace, self.cleanup_policy, command, text)
            self.say(f"WARNING: {note}")
            return note

    def wrap_up(self, outcome: str) -> TrainJobFailed:
        """Diagnoses a failed, timed-out or vanished job and applies the cleanup policy (signals ignored meanwhile)."""
        with _signals_ignored():  # a SIGTERM now must not skip the cleanup
            with self.api.budget(self.cleanup_timeout, f"cleanup_timeout_seconds={self.cleanup_timeout:g}"):
                found = self.diagnose(outcome)
            self.say(found.text())
            note = self.clean_up() if outcome != "Deleted" else ""
        failure = TrainJobCancelled(found) if outcome == "Cancelled" else TrainJobFailed(found)
        if note:
            append_note(failure, note)
        return failure

    # -- all of it -----------------------------------------------------------------------------------------------------
    def run(self) -> TrainJobResult:
        """Check runtime, submit, follow; clean up per policy on every exit after submission."""
        try:
            with _cancel_on_signals():
                if self.kind.checks_runtime:
                    self.check_runtime()
                self.submit()
                self.log(f"Job: {self.namespace}/{self.name}")
                outcome = self.follow()
        except _Cancelled as signal_name:
            self.say(f"cancelled ({signal_name}): applying cleanup_policy={self.cleanup_policy}")
            if not self.submitted:
                raise TrainJobCancelled(self.diagnose("Cancelled")) from None
            raise self.wrap_up("Cancelled") from None
        except BaseException as error:
            if self.submitted:  # an API outage, a 403, a bug...: the job must not be left running on its GPUs
                self.say(f"stopped by an error ({type(error).__name__}): applying cleanup_policy={self.cleanup_policy}")
                with _signals_ignored():
                    note = self.clean_up()
                if note:
                    append_note(error, note)
            raise
        if outcome != "Complete":
            raise self.wrap_up(outcome)
        deleted = False
        if self.delete_on_success:
            with self.api.budget(self.cleanup_timeout, f"cleanup_timeout_seconds={self.cleanup_timeout:g}"):
                deleted = self.delete_job()
        return TrainJobResult(
            name=self.name,
            namespace=self.namespace,
            reattached=self.reattached,
            duration_seconds=self.clock() - self.started_at,
            last_progress=progress_server.trainer_status(self.job) or dict(self.metrics.last),
            deleted=deleted,
        )


def run_trainjob(
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
) -> TrainJobResult:
    """Runs a TrainJob or PyTorchJob to completion: check runtime, submit (or re-attach), follow, diagnose, clean up.

    The kind comes from the manifest (:data:`JOB_KINDS`): a ``PyTorchJob`` has no runtime to check, its phase is read
    by :func:`~.pytorchjob.pytorchjob_phase`, its pods by :func:`~.pytorchjob.pod_label_selector`, and it is suspended
    with ``spec.runPolicy.suspend``.

    Args:
        api_client: A ``kubernetes.client.ApiClient`` (see :func:`load_api_client`).
        manifest: The TrainJob (from :func:`~.trainjob.build_trainjob`) or PyTorchJob (from
            :func:`~.pytorchjob.build_pytorchjob`); its labels identify this run/task.
        start_timeout_seconds: How long the pods may take to start running (0: no limit).
        timeout_seconds: How long the whole run may take, from submission (0: no limit).
        cleanup_policy: ``delete`` (default), ``keep`` or ``suspend``, applied on every exit after submission
            (failure, timeout, cancellation, an error while following).
        delete_on_success: Delete the TrainJob after it completes.
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
        A :class:`TrainJobResult`.

    Raises:
        ValueError: A bad argument (named).
        RuntimeNotFoundError: The runtime does not exist (the error lists those that do).
        TrainJobConflictError: The name is taken by another run/task's TrainJob.
        TrainJobApiError: The API rejected a call, stayed unavailable, or did not answer before a timeout. When the
            job could not be cleaned up, the message ends with the ``kubectl`` command that does it.
        TrainJobFailed: The job failed or timed out (``.diagnosis``); :class:`TrainJobCancelled` on SIGTERM/SIGINT.
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
    options = {
        "start_timeout": float(start_timeout_seconds),
        "timeout": float(timeout_seconds),
        "cleanup_policy": cleanup_policy,
        "delete_on_success": delete_on_success,
        "metrics_file": metrics_file,
        "poll_interval": float(poll_interval_seconds),
        "log": log,
        "use_watch": use_watch,
        "clock": clock,
        "sleep": sleep,
        "attempts": api_attempts,
        "log_tail_lines": log_tail_lines,
        "connect_timeout": float(connect_timeout_seconds),
        "read_timeout": float(read_timeout_seconds),
        "cleanup_timeout": float(cleanup_timeout_seconds),
        "watch_failures": 0,
        "metrics_normalizer": metrics_normalizer,
        "timeout_counts_paused_time": bool(timeout_counts_paused_time),
    }
    return _TrainJobRun(api_client, manifest, options).run()
