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
   on 410 Gone) or by polling; log progress lines from ``status.trainerStatus`` or the metrics JSONL file; enforce the
   start timeout (pods not running) and the total timeout.
4. **Diagnose** on failure/timeout: conditions, pods, events and the failed container's last log lines become
   one-line causes with a remedy (:mod:`.diagnosis`).
5. **Clean up** per ``cleanup_policy`` (``delete`` | ``keep`` | ``suspend``) on failure, timeout and cancellation
   (SIGTERM from KFP); on success delete only with ``delete_on_success``.

API calls are retried with backoff on 5xx/429 and connection errors, never on other 4xx (the API's message is shown).
Time (``clock``/``sleep``) is injectable. :data:`API_PERMISSIONS` lists every call's RBAC verb; ``rbac.yaml`` grants
exactly these.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from components.training.finetuning import diagnosis as diagnosis_module
from components.training.finetuning import pytorchjob
from components.training.finetuning.diagnosis import Diagnosis
from components.training.finetuning.trainjob import API_GROUP, API_VERSION, PATCH_MANAGER, TRAINJOB_PLURAL

#: Env vars of the ``kubernetes-credentials`` secret (RHOAI guide) for out-of-cluster or cross-cluster access.
SERVER_URL_ENV = "KUBERNETES_SERVER_URL"
AUTH_TOKEN_ENV = "KUBERNETES_AUTH_TOKEN"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
CLEANUP_POLICIES = ("delete", "keep", "suspend")
#: JobSet labels the pods it creates with the JobSet's (= the TrainJob's) name.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
RUNTIME_PLURALS = {"ClusterTrainingRuntime": "clustertrainingruntimes", "TrainingRuntime": "trainingruntimes"}
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
_RETRYABLE_STATUSES = {0, 429, 500, 502, 503, 504}
_MAX_LOGGED_PODS = 2


class TrainJobError(RuntimeError):
    """Base of the errors of this module."""


class KubeAuthError(TrainJobError):
    """No usable Kubernetes credentials."""


class TrainJobApiError(TrainJobError):
    """The API rejected a call (4xx other than expected ones) or stayed unavailable through every retry."""


class RuntimeNotFoundError(TrainJobError):
    """The referenced training runtime does not exist, or lacks the replicated job the TrainJob patches."""


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


def load_api_client(
    verify_ssl: bool = True,
    ca_bundle: str = "",
    *,
    environ: Mapping[str, str] | None = None,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
    log: Callable[[str], None] = print,
    kubeconfig: bool = False,
) -> Any:
    """A ``kubernetes.client.ApiClient`` for the pod running this code (or, with ``kubeconfig``, a workstation).

    ``KUBERNETES_SERVER_URL`` + ``KUBERNETES_AUTH_TOKEN`` (the ``kubernetes-credentials`` secret of the RHOAI guide)
    win when set; otherwise the pod's service account is used (in-cluster config); otherwise, with ``kubeconfig``,
    the current context of ``$KUBECONFIG`` / ``~/.kube/config`` (``kfp-finetune doctor`` on a workstation).

    Args:
        verify_ssl: Verify the API server's certificate (default). ``False`` is an explicit, logged opt-out.
        ca_bundle: A CA bundle file to verify the server with (``""``: the service account's CA or system CAs).
        environ: Environment to read (tests); defaults to ``os.environ``.
        service_account_dir: Where the service account token and CA are mounted (tests).
        log: Where the TLS opt-out warning goes.
        kubeconfig: Fall back to the kubeconfig's current context when no service account is mounted.

    Returns:
        A configured ``ApiClient`` (the token never appears in logs).

    Raises:
        KubeAuthError: Only one of the two env vars is set, the URL is not http(s), no service account is mounted (and
            no usable kubeconfig, with ``kubeconfig``), or ``ca_bundle`` does not exist.
    """
    from kubernetes import client
    from kubernetes.config.incluster_config import InClusterConfigLoader

    env = os.environ if environ is None else environ
    server, token = env.get(SERVER_URL_ENV, "").strip(), env.get(AUTH_TOKEN_ENV, "").strip()
    configuration = client.Configuration()
    if server or token:
        if not (server and token):
            have, missing = (SERVER_URL_ENV, AUTH_TOKEN_ENV) if server else (AUTH_TOKEN_ENV, SERVER_URL_ENV)
            raise KubeAuthError(
                f"{have} is set but {missing} is not: set both (kubernetes-credentials secret) or neither"
            )
        if not server.startswith(("https://", "http://")):
            raise KubeAuthError(f"{SERVER_URL_ENV}={server!r}: must be an http(s):// URL of the API server")
        configuration.host = server.rstrip("/")
        configuration.api_key = {"authorization": token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
    else:
        token_file = Path(service_account_dir) / "token"
        if token_file.is_file():
            loader = InClusterConfigLoader(
                token_filename=str(token_file), cert_filename=str(Path(service_account_dir) / "ca.crt"), environ=env
            )
            loader.load_and_set(configuration)
        elif kubeconfig:
            _load_kubeconfig(configuration, token_file)
        else:
            raise KubeAuthError(
                f"no Kubernetes credentials: no service account token at {token_file} and {SERVER_URL_ENV} / "
                f"{AUTH_TOKEN_ENV} are not set (mount the kubernetes-credentials secret as env, or run in a pod)"
            )
    configuration.verify_ssl = verify_ssl
    if ca_bundle:
        if not Path(ca_bundle).is_file():
            raise KubeAuthError(f"ca_bundle={ca_bundle!r}: no such file")
        configuration.ssl_ca_cert = ca_bundle
    if not verify_ssl:
        log(f"WARNING: TLS certificate verification of {configuration.host} is disabled (verify_ssl=False)")
    return client.ApiClient(configuration)


def _load_kubeconfig(configuration: Any, token_file: Path) -> None:
    """Loads the kubeconfig's current context into ``configuration``; :class:`KubeAuthError` when there is none."""
    from kubernetes import config

    try:
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG"), client_configuration=configuration)
    except (config.ConfigException, OSError) as error:
        raise KubeAuthError(
            f"no Kubernetes credentials: {SERVER_URL_ENV} / {AUTH_TOKEN_ENV} are not set, no service account token at "
            f"{token_file}, and no usable kubeconfig ({error})"
        ) from None


def api_message(error: Exception) -> str:
    """The API server's own message of an ``ApiException`` (the Status body's ``message``), else its text."""
    body = getattr(error, "body", None)
    try:
        message = json.loads(body).get("message") if body else None
    except (TypeError, ValueError, AttributeError):
        message = None
    status = getattr(error, "status", "")
    return f"HTTP {status} {getattr(error, 'reason', '') or ''}: {message or body or error}".strip()


class Api:
    """The calls :func:`run_trainjob` makes, each retried with backoff on 5xx/429/connection errors."""

    def __init__(self, api_client: Any, sleep: Callable[[float], None], log: Callable[[str], None], attempts: int):
        from kubernetes import client

        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.sleep = sleep
        self.log = log
        self.attempts = attempts

    def call(self, what: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Calls ``func``; retries transient failures; re-raises other ``ApiException`` for the caller to judge."""
        import urllib3
        from kubernetes.client import ApiException

        for attempt in range(1, self.attempts + 1):
            try:
                return func(*args, **kwargs)
            except ApiException as error:
                if error.status not in _RETRYABLE_STATUSES:
                    raise
                failure = api_message(error)
            except (urllib3.exceptions.HTTPError, OSError) as error:
                failure = f"{type(error).__name__}: {error}"
            if attempt == self.attempts:
                raise TrainJobApiError(f"{what}: failed {self.attempts} times, last: {failure}")
            delay = min(30.0, 2.0 ** (attempt - 1))
            self.log(f"{what}: {failure}; retry {attempt}/{self.attempts - 1} in {delay:g}s")
            self.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover


def _rejected(what: str, error: Exception) -> TrainJobApiError:
    hint = "; `kfp-finetune doctor` lists every permission it lacks (rbac.yaml)" if _status(error) == 403 else ""
    return TrainJobApiError(f"{what} was rejected by the Kubernetes API: {api_message(error)}{hint}")


def _status(error: Exception) -> int | None:
    return getattr(error, "status", None)


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


class MetricsTail:
    """Reads the training code's metrics JSONL file incrementally (records appended while training runs).

    Args:
        path: The file (``""``: none).
        normalize: Maps all raw records read so far to step records (e.g. ``metrics.normalize_records`` for Training
            Hub's layouts); default: the records that have a numeric ``step``.
    """

    def __init__(self, path: str, normalize: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None):
        self.path = Path(path) if path else None
        self.normalize = normalize or (lambda raw: [r for r in raw if isinstance(r.get("step"), (int, float))])
        self.offset = 0
        self.partial = b""
        self.raw: list[dict[str, Any]] = []
        self.last: dict[str, Any] = {}

    def poll(self) -> dict[str, Any]:
        """Reads what was appended since the last call; returns the newest step record (``{}`` while none)."""
        if self.path is None or not self.path.is_file():
            return self.last
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        if not data:
            return self.last
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                self.raw.append(record)
        records = self.normalize(self.raw)
        if records:
            self.last = dict(records[-1])
        return self.last


def _duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m{rest % 60:02d}s" if hours else f"{rest // 60}m{rest % 60:02d}s"


def progress_line(phase: str, trainer_status: Mapping[str, Any], record: Mapping[str, Any]) -> str:
    """One progress line: phase, then step/total, epoch, loss, lr, tokens/s and ETA where known.

    Args:
        phase: ``Pending``, ``Running``, ``Suspended``, ``Complete`` or ``Failed``.
        trainer_status: ``status.trainerStatus`` (``progressPercentage``, ``estimatedRemainingSeconds``, ``metrics``).
        record: The newest metrics-file record (keys step, epoch, loss, lr, tokens_per_second, time, total_steps).

    Returns:
        E.g. ``Running | step 40/100 (40%) | epoch 0.80 | loss 1.2345 | lr 2.00e-05 | 1520 tok/s | ETA 3m12s``.
    """
    parts = [phase]
    if record:
        step, total = record.get("step"), record.get("total_steps")
        if total:
            parts.append(f"step {step}/{total} ({100 * step / total:.0f}%)")
        else:
            parts.append(f"step {step}")
        for key, fmt in (("epoch", "epoch {:.2f}"), ("loss", "loss {:.4f}"), ("lr", "lr {:.2e}")):
            if isinstance(record.get(key), (int, float)):
                parts.append(fmt.format(record[key]))
        if isinstance(record.get("tokens_per_second"), (int, float)):
            parts.append(f"{record['tokens_per_second']:.0f} tok/s")
        elapsed = record.get("time")
        if total and step and isinstance(elapsed, (int, float)) and step < total:
            parts.append(f"ETA {_duration(elapsed / step * (total - step))}")
    elif trainer_status:
        if trainer_status.get("progressPercentage") is not None:
            parts.append(f"{trainer_status['progressPercentage']}%")
        for metric in trainer_status.get("metrics") or []:
            parts.append(f"{metric.get('name')} {metric.get('value')}")
        if trainer_status.get("estimatedRemainingSeconds") is not None:
            parts.append(f"ETA {_duration(trainer_status['estimatedRemainingSeconds'])}")
    return " | ".join(parts)


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
        self.api = Api(api_client, self.sleep, self.log, self.attempts)
        self.metrics = MetricsTail(self.metrics_file, self.metrics_normalizer)
        self.job: dict[str, Any] | None = None
        self.reattached = False
        self.started = False
        self.reported: set[str] = set()
        self.last_line = ""
        self.started_at = self.clock()

    def say(self, message: str) -> None:
        self.log(f"[{self.kind.kind.lower()} {self.name}] {message}")

    # -- runtime discovery -------------------------------------------------------------------------------------------
    def check_runtime(self) -> None:
        """Fails unless the referenced runtime exists and has the replicated job the runtime patch targets."""
        from kubernetes.client import ApiException

        ref = self.manifest["spec"]["runtimeRef"]
        kind, name = ref.get("kind", "ClusterTrainingRuntime"), ref["name"]
        what = f"reading {kind} {name!r}"
        try:
            if kind == "ClusterTrainingRuntime":
                runtime = self.api.call(
                    what, self.api.custom.get_cluster_custom_object, API_GROUP, API_VERSION, RUNTIME_PLURALS[kind], name
                )
            else:
                runtime = self.api.call(
                    what,
                    self.api.custom.get_namespaced_custom_object,
                    API_GROUP,
                    API_VERSION,
                    self.namespace,
                    RUNTIME_PLURALS[kind],
                    name,
                )
        except ApiException as error:
            if _status(error) == 403:
                self.say(
                    f"WARNING: cannot check {kind} {name!r} ({api_message(error)}); see rbac.yaml or run "
                    "`kfp-finetune doctor`. Submitting."
                )
                return
            if _status(error) != 404:
                raise _rejected(what, error) from None
            raise RuntimeNotFoundError(
                f"TrainJob {self.namespace}/{self.name}: spec.runtimeRef names {kind} {name!r}, which does not exist. "
                f"Available: {self._available_runtimes()}. Set runtime_name/runtime_kind to one of them "
                "(`kfp-finetune doctor` checks this before a run)."
            ) from None
        self._check_patched_jobs(kind, name, runtime)

    def _available_runtimes(self) -> str:
        from kubernetes.client import ApiException

        found = []
        for kind, plural in RUNTIME_PLURALS.items():
            try:
                if kind == "ClusterTrainingRuntime":
                    listed = self.api.call(
                        f"listing {plural}", self.api.custom.list_cluster_custom_object, API_GROUP, API_VERSION, plural
                    )
                    label = "ClusterTrainingRuntime"
                else:
                    listed = self.api.call(
                        f"listing {plural}",
                        self.api.custom.list_namespaced_custom_object,
                        API_GROUP,
                        API_VERSION,
                        self.namespace,
                        plural,
                    )
                    label = f"TrainingRuntime in {self.namespace}"
            except ApiException as error:
                found.append(f"{kind}: cannot list ({api_message(error)})")
                continue
            names = sorted(item["metadata"]["name"] for item in listed.get("items") or [])
            found.append(f"{label}: {', '.join(names) if names else '(none)'}")
        return "; ".join(found)

    def _check_patched_jobs(self, kind: str, name: str, runtime: Mapping[str, Any]) -> None:
        jobs = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or []
        available = [job.get("name") for job in jobs]
        for patch in self.manifest["spec"].get("runtimePatches") or []:
            if patch.get("manager") != PATCH_MANAGER:
                continue
            patched = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
            for job in patched:
                if job["name"] not in available:
                    raise RuntimeNotFoundError(
                        f"TrainJob {self.namespace}/{self.name}: {kind} {name!r} has no replicated job "
                        f"{job['name']!r} to patch (it has {available}); set trainer_job_name to one of them"
                    )

    # -- submit --------------------------------------------------------------------------------------------------------
    def submit(self) -> dict[str, Any]:
        """Creates the TrainJob, or re-attaches to this run/task's existing one."""
        from kubernetes.client import ApiException

        what = f"creating {self.kind.kind} {self.namespace}/{self.name}"
        deadline = self.clock() + max(self.start_timeout, 60.0)
        while True:
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
                runtime = (self.manifest["spec"].get("runtimeRef") or {}).get("name")
                self.say(f"created in namespace {self.namespace}" + (f" (runtime {runtime})" if runtime else ""))
                return self.job
            except ApiException as error:
                if _status(error) != 409:
                    raise _rejected(what, error) from None
            existing = self.get_job()
            if existing is None:
                continue  # deleted in between: create again
            if not _owned_by(existing, self.labels):
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

    def reattach(self, existing: dict[str, Any]) -> dict[str, Any]:
        """Follows this run/task's existing TrainJob (a retried KFP task); resumes it when suspended."""
        self.reattached = True
        self.job = existing
        created = (existing.get("metadata") or {}).get("creationTimestamp", "earlier")
        self.say(
            f"re-attached to the existing {self.kind.kind} of this run/task (created {created}); no second job created"
        )
        if self.kind.is_suspended(existing):
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
            if not self.started:
                self.started = self.check_started(phase)
            self.report("Running" if self.started and phase == "Pending" else phase)
            elapsed = self.clock() - self.started_at
            if self.timeout and elapsed >= self.timeout:
                return "Timeout"
            if not self.started and self.start_timeout and elapsed >= self.start_timeout:
                return "StartTimeout"
            window = self.poll_interval
            for limit in (self.timeout, 0 if self.started else self.start_timeout):
                if limit:
                    window = min(window, max(limit - elapsed, 0.001))
            job = self.wait_for_change(window)
            if job is None:
                return "Deleted"
            self.job = job

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
        trainer_status = (self.job or {}).get("status", {}).get("trainerStatus") or {}
        line = progress_line(phase, trainer_status, self.metrics.poll())
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
            "_request_timeout": (self.connect_timeout, window + min(5.0, window)),
        }
        version = (self.job.get("metadata") or {}).get("resourceVersion")
        if version:
            kwargs["resource_version"] = version
        began = self.clock()
        job = self.job
        stream = watch.Watch().stream(
            self.api.custom.list_namespaced_custom_object,
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
            if _status(error) not in _RETRYABLE_STATUSES:
                raise _rejected(f"watching the {self.kind.kind}", error) from None
            self.watch_retry(api_message(error))
        except (urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.ProtocolError):
            pass  # the window ended on the client side, or the connection dropped: reconnect next time
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

    def clean_up(self) -> None:
        """Applies the cleanup policy; a failure to clean up is logged, never raised over the original failure."""
        try:
            if self.cleanup_policy == "delete":
                self.delete_job()
            elif self.cleanup_policy == "suspend":
                self.patch_job(self.kind.suspend_patch(True), "suspending")
                self.say("suspended (cleanup_policy=suspend): its pods are removed, the job stays for inspection")
            else:
                command = f"kubectl delete {self.kind.kind.lower()} {self.name} -n {self.namespace}"
                self.say(f"kept (cleanup_policy=keep): `{command}`")
        except TrainJobError as error:
            self.say(f"WARNING: cleanup ({self.cleanup_policy}) failed: {error}")

    def clean_up_unfollowed(self) -> None:
        """Cancelled before the job was known: deletes/suspends it only when it exists and is this run/task's."""
        existing = self.get_job()
        if existing is not None and _owned_by(existing, self.labels):
            self.job = existing
            self.clean_up()

    # -- all of it -----------------------------------------------------------------------------------------------------
    def run(self) -> TrainJobResult:
        try:
            with _cancel_on_signals():
                if self.kind.checks_runtime:
                    self.check_runtime()
                self.submit()
                self.log(f"Job: {self.namespace}/{self.name}")
                outcome = self.follow()
        except _Cancelled as signal_name:
            self.say(f"cancelled ({signal_name}): applying cleanup_policy={self.cleanup_policy}")
            with _signals_ignored():
                if self.job is None:
                    self.clean_up_unfollowed()
                else:
                    self.clean_up()
            raise TrainJobCancelled(self.diagnose("Cancelled")) from None
        if outcome == "Complete":
            deleted = self.delete_job() if self.delete_on_success else False
            return TrainJobResult(
                name=self.name,
                namespace=self.namespace,
                reattached=self.reattached,
                duration_seconds=self.clock() - self.started_at,
                last_progress=dict(self.metrics.last or (self.job or {}).get("status", {}).get("trainerStatus") or {}),
                deleted=deleted,
            )
        with _signals_ignored():  # a SIGTERM now must not skip the cleanup
            found = self.diagnose(outcome)
            self.say(found.text())
            if outcome != "Deleted":
                self.clean_up()
        raise TrainJobFailed(found)


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
    metrics_normalizer: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
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
        cleanup_policy: ``delete`` (default), ``keep`` or ``suspend``, applied on failure, timeout and cancellation.
        delete_on_success: Delete the TrainJob after it completes.
        metrics_file: The JSONL metrics file the training code writes on the shared volume (progress lines).
        poll_interval_seconds: Length of one watch request / poll; steady state is one API request per interval.
        log: Where progress and diagnosis lines go.
        use_watch: Follow with watch requests (default) or with GET polling.
        clock: Monotonic clock in seconds (tests inject a fake one).
        sleep: Sleep function (tests inject a fake one).
        api_attempts: Attempts per API call on transient errors (5xx, 429, connection errors).
        log_tail_lines: Log lines of the failed container to read into the diagnosis.
        connect_timeout_seconds: TCP connect timeout of watch requests.
        metrics_normalizer: Maps the raw metrics-file records read so far to step records (e.g.
            ``metrics.normalize_records`` for Training Hub's layouts); default: records with a numeric ``step``.

    Returns:
        A :class:`TrainJobResult`.

    Raises:
        ValueError: A bad argument (named).
        RuntimeNotFoundError: The runtime does not exist (the error lists those that do).
        TrainJobConflictError: The name is taken by another run/task's TrainJob.
        TrainJobApiError: The API rejected a call or stayed unavailable.
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
        "connect_timeout": connect_timeout_seconds,
        "watch_failures": 0,
        "metrics_normalizer": metrics_normalizer,
    }
    return _TrainJobRun(api_client, manifest, options).run()
