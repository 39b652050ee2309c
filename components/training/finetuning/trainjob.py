"""A typed TrainJob spec and the pure builder of Kubeflow Trainer ``TrainJob`` manifests.

:class:`TrainJobSpec` validates every field when it is made; :func:`build_trainjob` turns it into a plain
``trainer.kubeflow.org/v1alpha1`` ``TrainJob`` dict (no client calls). Pod-level settings (volumes, mounts,
tolerations, node selector, affinity, labels, annotations) travel in ``spec.runtimePatches`` (Trainer >= 2.2), so they
reach the training pods. Secrets are only ever referenced (``valueFrom.secretKeyRef``), never copied.
:func:`spec_from_task_config` merges KFP's ``dsl.TaskConfig`` passthrough with explicit settings.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from components.training.finetuning.progress_server import (
    METRICS_PORT_RANGE,
    POLL_INTERVAL_RANGE,
    progression_annotations,
)

API_GROUP = "trainer.kubeflow.org"
API_VERSION = "v1alpha1"
TRAINJOB_PLURAL = "trainjobs"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
#: Label/annotation keys tying a TrainJob to the KFP run and task that created it.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "kfp-finetune"
RUN_ID_LABEL = "kfp-finetune.kubeflow.org/run-id"
TASK_NAME_LABEL = "kfp-finetune.kubeflow.org/task-name"
TASK_NAME_ANNOTATION = "kfp-finetune.kubeflow.org/task-name"
#: The label that submits a job to a Kueue LocalQueue (Kueue then suspends it until the queue admits it).
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
#: ``spec.runtimePatches[].manager`` of the patch this project owns.
PATCH_MANAGER = "kfp-finetune.kubeflow.org/train-model"
#: TrainJob names are kept this short so that JobSet's derived names (``<name>-node-<job>-<pod>``) fit in 63 chars.
MAX_NAME_LENGTH = 47

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUANTITY = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_RESOURCE_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
#: Env names whose values are secrets: they must come from a Kubernetes secret (``secret_env``), never a literal.
_SECRET_ENV_NAME = re.compile(
    r"^(HF_TOKEN|HUGGING_FACE_HUB_TOKEN|AWS_SECRET_ACCESS_KEY|AWS_SESSION_TOKEN|KUBERNETES_AUTH_TOKEN)$"
    r"|(_TOKEN|_PASSWORD|_SECRET|_SECRET_KEY|_API_KEY)$"
)
#: Secret env of the ``train_model`` task that its training pods never get: the OCI pull secret (the task pulls an
#: ``oci://`` base model onto the workspace before submitting, so the pods need no registry credentials).
LAUNCHER_ONLY_SECRET_ENV = frozenset({"OCI_PULL_SECRET_MODEL_DOWNLOAD", "OCI_PULL_SECRET_DOCKERCONFIGJSON"})
_TOLERATION_KEYS = {"key", "operator", "value", "effect", "tolerationSeconds"}
_TOLERATION_OPERATORS = {"Exists", "Equal"}
_TOLERATION_EFFECTS = {"", "NoSchedule", "PreferNoSchedule", "NoExecute"}
_AFFINITY_KEYS = {"nodeAffinity", "podAffinity", "podAntiAffinity"}
_MOUNT_KEYS = {"name", "mountPath", "subPath", "subPathExpr", "readOnly", "mountPropagation", "recursiveReadOnly"}


class TrainJobSpecError(ValueError):
    """A :class:`TrainJobSpec` field breaks a rule; the message names the field, the value and the rule."""


def _fail(field: str, value: Any, rule: str) -> TrainJobSpecError:
    return TrainJobSpecError(f"TrainJobSpec.{field}={value!r}: {rule}")


@dataclasses.dataclass(frozen=True)
class SecretEnvVar:
    """An environment variable of the training pods whose value comes from a key of a Kubernetes secret.

    Attributes:
        name: The environment variable's name (e.g. ``HF_TOKEN``).
        secret_name: The secret in the TrainJob's namespace.
        secret_key: The key inside the secret.
        optional: Whether the pods may start when the secret or key is missing.
    """

    name: str
    secret_name: str
    secret_key: str
    optional: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _ENV_NAME.match(self.name):
            raise _fail("secret_env.name", self.name, "must be a valid environment variable name")
        if not isinstance(self.secret_name, str) or not _DNS1123_SUBDOMAIN.match(self.secret_name):
            raise _fail(f"secret_env[{self.name}].secret_name", self.secret_name, "must be a DNS-1123 secret name")
        if not isinstance(self.secret_key, str) or not _SECRET_KEY.match(self.secret_key):
            raise _fail(f"secret_env[{self.name}].secret_key", self.secret_key, "must match [-._a-zA-Z0-9]+")
        if not isinstance(self.optional, bool):
            raise _fail(f"secret_env[{self.name}].optional", self.optional, "must be a bool")

    def to_env_var(self) -> dict[str, Any]:
        """The Kubernetes ``EnvVar`` referencing the secret (the value itself is never read)."""
        ref: dict[str, Any] = {"name": self.secret_name, "key": self.secret_key}
        if self.optional:
            ref["optional"] = True
        return {"name": self.name, "valueFrom": {"secretKeyRef": ref}}


@dataclasses.dataclass(frozen=True)
class TrainJobSpec:
    """Everything :func:`build_trainjob` needs, validated on creation.

    Attributes:
        run_id: The KFP run id (with ``task_name`` it determines the TrainJob's name and labels).
        task_name: The KFP task name.
        namespace: The namespace the TrainJob is created in.
        command: The training entrypoint's command (non-empty).
        args: Its arguments.
        image: The trainer image; ``""`` keeps the runtime's image.
        runtime_name: The referenced runtime.
        runtime_kind: ``ClusterTrainingRuntime`` (cluster-wide) or ``TrainingRuntime`` (in ``namespace``).
        num_nodes: Training nodes (pods), >= 1.
        gpus_per_node: GPUs per node; also the number of processes per node (``numProcPerNode``, 1 when 0).
        gpu_resource_name: The extended resource name of a GPU.
        cpu_per_node: CPU request and limit per node as a quantity (``""``: the runtime's).
        memory_per_node: Memory request and limit per node as a quantity (``""``: the runtime's).
        env: Literal environment variables (no secrets: use ``secret_env``).
        secret_env: Environment variables taken from secrets.
        volumes: Pod volumes (Kubernetes ``Volume`` dicts), e.g. the pipeline's workspace PVC.
        volume_mounts: Mounts of those volumes into the trainer container (``VolumeMount`` dicts).
        tolerations: Pod tolerations (``Toleration`` dicts).
        node_selector: Pod node selector.
        affinity: Pod affinity (``Affinity`` dict).
        pod_labels: Extra labels of the training pods.
        pod_annotations: Extra annotations of the training pods.
        active_deadline_seconds: ``spec.activeDeadlineSeconds``; 0 means none.
        trainer_job_name: The runtime's replicated job that runs the trainer (``node`` in Trainer's runtimes).
        trainer_container_name: The trainer container inside it.
        queue_name: The Kueue ``LocalQueue`` to submit the job to (label :data:`QUEUE_NAME_LABEL`); ``""``: none.
        progress_tracking: Annotate the job for RHOAI's progress tracking (the Training Jobs page polls the rank-0
            pod's progress server, see :mod:`.progress_server`).
        metrics_port: The port of that server (``trainer.opendatahub.io/metrics-port``).
        metrics_poll_interval_seconds: How often the controller polls it (``...metrics-poll-interval``).
    """

    run_id: str
    task_name: str
    namespace: str
    command: Sequence[str]
    args: Sequence[str] = ()
    image: str = ""
    runtime_name: str = "training-hub"
    runtime_kind: str = "ClusterTrainingRuntime"
    num_nodes: int = 1
    gpus_per_node: int = 1
    gpu_resource_name: str = "nvidia.com/gpu"
    cpu_per_node: str = ""
    memory_per_node: str = ""
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    secret_env: tuple[SecretEnvVar, ...] = ()
    volumes: Sequence[Mapping[str, Any]] = ()
    volume_mounts: Sequence[Mapping[str, Any]] = ()
    tolerations: Sequence[Mapping[str, Any]] = ()
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    affinity: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    pod_labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    pod_annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    active_deadline_seconds: int = 0
    trainer_job_name: str = "node"
    trainer_container_name: str = "node"
    queue_name: str = ""
    progress_tracking: bool = True
    metrics_port: int = 28080
    metrics_poll_interval_seconds: int = 30

    def __post_init__(self) -> None:
        # Freeze the containers so that a built spec cannot change under the caller's feet.
        for name in ("command", "args", "volumes", "volume_mounts", "tolerations", "secret_env"):
            value = getattr(self, name)
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                raise _fail(name, value, "must be a list")
            object.__setattr__(self, name, tuple(value))
        for name in ("env", "node_selector", "affinity", "pod_labels", "pod_annotations"):
            if not isinstance(getattr(self, name), Mapping):
                raise _fail(name, getattr(self, name), "must be a dict")
        self._check_identity()
        self._check_trainer()
        self._check_env()
        self._check_volumes()
        self._check_scheduling()
        self._check_metadata()
        self._check_progress()

    def _check_progress(self) -> None:
        if not isinstance(self.progress_tracking, bool):
            raise _fail("progress_tracking", self.progress_tracking, "must be a bool")
        for name, (low, high) in (
            ("metrics_port", METRICS_PORT_RANGE),
            ("metrics_poll_interval_seconds", POLL_INTERVAL_RANGE),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise _fail(name, value, f"must be an integer in [{low}, {high}]")

    def _check_identity(self) -> None:
        for name in ("run_id", "task_name"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise _fail(name, value, "must be a non-empty string")
        if not isinstance(self.namespace, str) or not _DNS1123_LABEL.match(self.namespace) or len(self.namespace) > 63:
            raise _fail("namespace", self.namespace, "must be a DNS-1123 label (lowercase, digits, '-', <= 63)")
        if self.runtime_kind not in RUNTIME_KINDS:
            raise _fail("runtime_kind", self.runtime_kind, f"must be one of {list(RUNTIME_KINDS)}")
        if not isinstance(self.runtime_name, str) or not _DNS1123_SUBDOMAIN.match(self.runtime_name):
            raise _fail("runtime_name", self.runtime_name, "must be a DNS-1123 name of an existing runtime")
        for name in ("trainer_job_name", "trainer_container_name"):
            if not isinstance(getattr(self, name), str) or not _DNS1123_LABEL.match(getattr(self, name)):
                raise _fail(name, getattr(self, name), "must be a DNS-1123 label")

    def _check_trainer(self) -> None:
        if not self.command:
            raise _fail("command", list(self.command), "must name the training entrypoint (non-empty list)")
        for name in ("command", "args"):
            for index, item in enumerate(getattr(self, name)):
                if not isinstance(item, str):
                    raise _fail(f"{name}[{index}]", item, "must be a string")
        if not isinstance(self.image, str) or any(ch.isspace() for ch in self.image):
            raise _fail("image", self.image, "must be an image reference without spaces ('' = the runtime's image)")
        for name, minimum in (("num_nodes", 1), ("gpus_per_node", 0), ("active_deadline_seconds", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise _fail(name, value, f"must be an integer >= {minimum}")
        if not isinstance(self.gpu_resource_name, str) or not _RESOURCE_NAME.match(self.gpu_resource_name):
            raise _fail("gpu_resource_name", self.gpu_resource_name, "must be a resource name like nvidia.com/gpu")
        for name in ("cpu_per_node", "memory_per_node"):
            value = getattr(self, name)
            if not isinstance(value, str) or (value and not _QUANTITY.match(value)):
                raise _fail(name, value, "must be a Kubernetes quantity such as '8', '500m' or '64Gi' ('' = unset)")

    def _check_env(self) -> None:
        for key, value in self.env.items():
            if not isinstance(key, str) or not _ENV_NAME.match(key):
                raise _fail("env", key, "keys must be valid environment variable names")
            if not isinstance(value, str):
                raise _fail(f"env[{key}]", value, "values must be strings")
            if _SECRET_ENV_NAME.search(key):
                raise _fail(f"env[{key}]", "<redacted>", "looks like a secret: pass it as secret_env (a secretKeyRef)")
        seen: set[str] = set()
        for item in self.secret_env:
            if not isinstance(item, SecretEnvVar):
                raise _fail("secret_env", item, "items must be SecretEnvVar")
            if item.name in seen or item.name in self.env:
                raise _fail("secret_env", item.name, "each environment variable may be set only once")
            seen.add(item.name)

    def _check_volumes(self) -> None:
        volume_names: set[str] = set()
        for index, volume in enumerate(self.volumes):
            where = f"volumes[{index}]"
            if not isinstance(volume, Mapping) or not isinstance(volume.get("name"), str):
                raise _fail(where, volume, "must be a Volume dict with a 'name'")
            if not _DNS1123_LABEL.match(volume["name"]):
                raise _fail(f"{where}.name", volume["name"], "must be a DNS-1123 label")
            if volume["name"] in volume_names:
                raise _fail(f"{where}.name", volume["name"], "volume names must be unique")
            sources = [key for key in volume if key != "name"]
            if len(sources) != 1:
                raise _fail(where, volume, "must have exactly one volume source (e.g. persistentVolumeClaim)")
            claim = volume.get("persistentVolumeClaim")
            if "persistentVolumeClaim" in volume and not (isinstance(claim, Mapping) and claim.get("claimName")):
                raise _fail(f"{where}.persistentVolumeClaim", claim, "needs a claimName")
            volume_names.add(volume["name"])
        mount_paths: set[str] = set()
        for index, mount in enumerate(self.volume_mounts):
            where = f"volume_mounts[{index}]"
            if not isinstance(mount, Mapping) or not isinstance(mount.get("name"), str):
                raise _fail(where, mount, "must be a VolumeMount dict with a 'name'")
            if mount["name"] not in volume_names:
                raise _fail(f"{where}.name", mount["name"], f"must name one of volumes {sorted(volume_names)}")
            unknown = set(mount) - _MOUNT_KEYS
            if unknown:
                raise _fail(where, mount, f"unknown keys {sorted(unknown)}")
            path = mount.get("mountPath")
            if not isinstance(path, str) or not path.startswith("/"):
                raise _fail(f"{where}.mountPath", path, "must be an absolute path")
            if path in mount_paths:
                raise _fail(f"{where}.mountPath", path, "mount paths must be unique")
            mount_paths.add(path)

    def _check_scheduling(self) -> None:
        for index, toleration in enumerate(self.tolerations):
            where = f"tolerations[{index}]"
            if not isinstance(toleration, Mapping) or not toleration:
                raise _fail(where, toleration, "must be a non-empty Toleration dict")
            unknown = set(toleration) - _TOLERATION_KEYS
            if unknown:
                raise _fail(
                    where, dict(toleration), f"unknown keys {sorted(unknown)}; allowed: {sorted(_TOLERATION_KEYS)}"
                )
            if toleration.get("operator", "Equal") not in _TOLERATION_OPERATORS:
                raise _fail(
                    f"{where}.operator", toleration["operator"], f"must be one of {sorted(_TOLERATION_OPERATORS)}"
                )
            if toleration.get("effect", "") not in _TOLERATION_EFFECTS:
                raise _fail(f"{where}.effect", toleration["effect"], f"must be one of {sorted(_TOLERATION_EFFECTS)}")
            if toleration.get("operator") == "Exists" and toleration.get("value"):
                raise _fail(f"{where}.value", toleration["value"], "must be empty when operator is Exists")
            seconds = toleration.get("tolerationSeconds")
            if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
                raise _fail(f"{where}.tolerationSeconds", seconds, "must be an integer")
        for key, value in self.node_selector.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise _fail("node_selector", {key: value}, "keys and values must be strings")
        unknown = set(self.affinity) - _AFFINITY_KEYS
        if unknown:
            raise _fail(
                "affinity", dict(self.affinity), f"unknown keys {sorted(unknown)}; allowed {sorted(_AFFINITY_KEYS)}"
            )

    def _check_metadata(self) -> None:
        if not isinstance(self.queue_name, str) or (
            self.queue_name and (len(self.queue_name) > 63 or not _DNS1123_LABEL.match(self.queue_name))
        ):
            raise _fail("queue_name", self.queue_name, "must be a Kueue LocalQueue name (DNS-1123 label) or ''")
        for key, value in self.pod_labels.items():
            _check_label("pod_labels", key, value)
        for key, value in self.pod_annotations.items():
            if not isinstance(key, str) or not _qualified_name_ok(key) or not isinstance(value, str):
                raise _fail("pod_annotations", {key: value}, "keys must be qualified names, values strings")


def _qualified_name_ok(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return False
    return len(name) <= 63 and bool(_LABEL_NAME.match(name))


def _check_label(field: str, key: Any, value: Any) -> None:
    if not isinstance(key, str) or not _qualified_name_ok(key):
        raise _fail(field, key, "label keys must be qualified names ([prefix/]name, name <= 63 chars)")
    if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
        raise _fail(f"{field}[{key}]", value, "label values must be <= 63 alphanumerics, '-', '_' or '.'")


def _slug(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", text.lower())).strip("-")


def trainjob_name(run_id: str, task_name: str) -> str:
    """The deterministic TrainJob name of a KFP run's task: DNS-1035 and at most :data:`MAX_NAME_LENGTH` chars.

    A retried task gets the same name (so it re-attaches); another run or task gets another one.

    Args:
        run_id: The KFP run id.
        task_name: The KFP task name.

    Returns:
        ``<task-slug>-<10 hex chars of sha256(run_id/task_name)>``, e.g. ``train-model-3f2a9c1b7d``.
    """
    digest = hashlib.sha256(f"{run_id}/{task_name}".encode()).hexdigest()[:10]
    slug = _slug(task_name)
    if not slug or not slug[0].isalpha():
        slug = f"tj-{slug}".rstrip("-")
    slug = slug[: MAX_NAME_LENGTH - len(digest) - 1].rstrip("-")
    name = f"{slug}-{digest}"
    assert _DNS1035.match(name) and len(name) <= MAX_NAME_LENGTH, name
    return name


def label_value(text: str) -> str:
    """A valid label value standing for ``text``: itself when valid, else a readable slug plus a hash.

    Args:
        text: Any string (a run id, a task name).

    Returns:
        A label value of at most 63 chars; the same ``text`` always gives the same value.
    """
    if len(text) <= 63 and _LABEL_VALUE.match(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return f"{_slug(text)[:52].strip('-')}-{digest}".strip("-")


def ownership_labels(run_id: str, task_name: str) -> dict[str, str]:
    """The labels that tie a TrainJob to its KFP run and task (also used to recognise it on re-attach)."""
    return {
        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
        RUN_ID_LABEL: label_value(run_id),
        TASK_NAME_LABEL: label_value(task_name),
    }


def resources_per_node(spec: TrainJobSpec) -> dict[str, Any]:
    """The container resources of one node (GPU count, CPU, memory) as ``requests``/``limits``; ``{}`` when none."""
    quantities: dict[str, str] = {}
    if spec.cpu_per_node:
        quantities["cpu"] = spec.cpu_per_node
    if spec.memory_per_node:
        quantities["memory"] = spec.memory_per_node
    if spec.gpus_per_node:
        quantities[spec.gpu_resource_name] = str(spec.gpus_per_node)
    return {"requests": dict(quantities), "limits": dict(quantities)} if quantities else {}


def _trainer(spec: TrainJobSpec) -> dict[str, Any]:
    trainer: dict[str, Any] = {}
    if spec.image:
        trainer["image"] = spec.image
    trainer["command"] = list(spec.command)
    if spec.args:
        trainer["args"] = list(spec.args)
    trainer["numNodes"] = spec.num_nodes
    trainer["numProcPerNode"] = max(spec.gpus_per_node, 1)
    resources = resources_per_node(spec)
    if resources:
        trainer["resourcesPerNode"] = resources
    env = [{"name": key, "value": value} for key, value in sorted(spec.env.items())]
    env += [item.to_env_var() for item in spec.secret_env]
    if env:
        trainer["env"] = env
    return trainer


#: The pod label the RHOAI guide's troubleshooting selects training pods by (``oc get pods -l ...=<job-name>``); the
#: Training Operator sets it on PyTorchJob pods, this project sets it on TrainJob pods through ``runtimePatches``.
JOB_NAME_POD_LABEL = "training.kubeflow.org/job-name"


def _pod_patch(spec: TrainJobSpec) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {}
    if spec.volumes:
        pod_spec["volumes"] = [dict(volume) for volume in spec.volumes]
    if spec.volume_mounts:
        mounts = [dict(mount) for mount in spec.volume_mounts]
        pod_spec["containers"] = [{"name": spec.trainer_container_name, "volumeMounts": mounts}]
    if spec.tolerations:
        pod_spec["tolerations"] = [dict(toleration) for toleration in spec.tolerations]
    if spec.node_selector:
        pod_spec["nodeSelector"] = dict(spec.node_selector)
    if spec.affinity:
        pod_spec["affinity"] = dict(spec.affinity)
    template: dict[str, Any] = {}
    labels = {**dict(spec.pod_labels), JOB_NAME_POD_LABEL: trainjob_name(spec.run_id, spec.task_name)}
    metadata = {"labels": labels, "annotations": dict(spec.pod_annotations)}
    metadata = {key: value for key, value in metadata.items() if value}
    if metadata:
        template["metadata"] = metadata
    if pod_spec:
        template["spec"] = pod_spec
    return template


def job_labels(spec: TrainJobSpec) -> dict[str, str]:
    """The job's labels: :func:`ownership_labels`, plus Kueue's queue label when ``spec.queue_name`` is set."""
    labels = ownership_labels(spec.run_id, spec.task_name)
    if spec.queue_name:
        labels[QUEUE_NAME_LABEL] = spec.queue_name
    return labels


def build_trainjob(spec: TrainJobSpec) -> dict[str, Any]:
    """Builds the ``TrainJob`` manifest of a spec (pure: no client calls, same spec → equal dict).

    Args:
        spec: The validated spec.

    Returns:
        A ``trainer.kubeflow.org/v1alpha1`` ``TrainJob`` dict named by :func:`trainjob_name`, labelled with
        :func:`ownership_labels`, with ``spec.runtimePatches`` holding the pod settings when there are any.
    """
    labels = job_labels(spec)
    body: dict[str, Any] = {
        "runtimeRef": {"apiGroup": API_GROUP, "kind": spec.runtime_kind, "name": spec.runtime_name},
        "trainer": _trainer(spec),
    }
    pod_template = _pod_patch(spec)
    if pod_template:
        replicated_job = {"name": spec.trainer_job_name, "template": {"spec": {"template": pod_template}}}
        body["runtimePatches"] = [
            {
                "manager": PATCH_MANAGER,
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [replicated_job]}}},
            }
        ]
    if spec.active_deadline_seconds:
        body["activeDeadlineSeconds"] = spec.active_deadline_seconds
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "TrainJob",
        "metadata": {
            "name": trainjob_name(spec.run_id, spec.task_name),
            "namespace": spec.namespace,
            "labels": labels,
            "annotations": job_annotations(spec),
        },
        "spec": body,
    }


def job_annotations(spec: TrainJobSpec) -> dict[str, str]:
    """The job's annotations: the KFP task and run, and RHOAI's progress-tracking switches when enabled."""
    annotations = {TASK_NAME_ANNOTATION: spec.task_name, RUN_ID_LABEL: spec.run_id}
    annotations.update(
        progression_annotations(spec.progress_tracking, spec.metrics_port, spec.metrics_poll_interval_seconds)
    )
    return annotations


def _task_config_fields(task_config: Any) -> dict[str, Any]:
    """Reads a ``dsl.TaskConfig`` (or its dict form, snake_case or camelCase keys) into snake_case fields."""
    if task_config is None:
        return {}
    if dataclasses.is_dataclass(task_config):
        raw = {field.name: getattr(task_config, field.name) for field in dataclasses.fields(task_config)}
    elif isinstance(task_config, Mapping):
        raw = dict(task_config)
    else:
        raise TrainJobSpecError(f"task_config={task_config!r}: must be a dsl.TaskConfig, a dict or None")
    aliases = {"nodeSelector": "node_selector", "volumeMounts": "volume_mounts"}
    fields = {aliases.get(key, key): value for key, value in raw.items() if value}
    unknown = set(fields) - {"affinity", "tolerations", "node_selector", "env", "volumes", "volume_mounts", "resources"}
    if unknown:
        raise TrainJobSpecError(f"task_config: unknown fields {sorted(unknown)}")
    return fields


def _split_task_env(env: Sequence[Mapping[str, Any]]) -> tuple[dict[str, str], list[SecretEnvVar]]:
    literal: dict[str, str] = {}
    secret: list[SecretEnvVar] = []
    for index, item in enumerate(env):
        name = item.get("name")
        source = item.get("valueFrom")
        if source is None:
            literal[name] = str(item.get("value", ""))
        elif name in LAUNCHER_ONLY_SECRET_ENV:
            continue
        elif set(source) == {"secretKeyRef"}:
            ref = source["secretKeyRef"]
            secret.append(SecretEnvVar(name, ref.get("name", ""), ref.get("key", ""), bool(ref.get("optional", False))))
        else:
            raise TrainJobSpecError(
                f"task_config.env[{index}] ({name}): valueFrom {sorted(source)} is not supported; "
                "only literal values and secretKeyRef reach the TrainJob"
            )
    return literal, secret


def _merge_named(field: str, first: Sequence[Mapping[str, Any]], second: Sequence[Mapping[str, Any]], key: str) -> list:
    merged: dict[Any, Mapping[str, Any]] = {}
    for item in [*first, *second]:
        if not isinstance(item, Mapping):
            raise _fail(field, item, "items must be dicts")
        identity = item.get(key)
        if identity in merged and dict(merged[identity]) != dict(item):
            raise _fail(
                field, identity, f"is given twice with different settings ({dict(merged[identity])} vs {dict(item)})"
            )
        merged[identity] = item
    return [dict(item) for item in merged.values()]


def _resources_from_task_config(resources: Mapping[str, Any]) -> dict[str, Any]:
    """Maps ``dsl.TaskConfig.resources`` (requests/limits) to cpu/memory/GPU spec fields (limits win)."""
    quantities = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    fields: dict[str, Any] = {}
    for name, value in quantities.items():
        if name == "cpu":
            fields["cpu_per_node"] = str(value)
        elif name == "memory":
            fields["memory_per_node"] = str(value)
        elif name.endswith("/gpu") or name.endswith("gpu"):
            fields["gpu_resource_name"] = name
            fields["gpus_per_node"] = int(value)
    return fields


def spec_from_task_config(task_config: Any = None, **explicit: Any) -> TrainJobSpec:
    """Builds a :class:`TrainJobSpec` from KFP's task-config passthrough plus explicit settings.

    Lists (volumes, mounts, tolerations) are joined, task config first (a name given twice must mean the same thing);
    dicts (env, node selector) are merged with explicit keys winning; an explicit affinity or resource replaces the
    task config's. Task-config env entries with ``secretKeyRef`` become :class:`SecretEnvVar`, except the task's own
    (:data:`LAUNCHER_ONLY_SECRET_ENV`).

    Args:
        task_config: A ``dsl.TaskConfig``, its dict form (``nodeSelector``/``volumeMounts`` keys accepted) or None.
        **explicit: :class:`TrainJobSpec` fields; ``None`` or ``""`` count as not given.

    Returns:
        The validated spec.

    Raises:
        TrainJobSpecError: Unknown fields, conflicting entries or any spec rule broken.
    """
    known = {field.name for field in dataclasses.fields(TrainJobSpec)}
    unknown = set(explicit) - known
    if unknown:
        raise TrainJobSpecError(f"spec_from_task_config: unknown TrainJobSpec fields {sorted(unknown)}")
    explicit = {key: value for key, value in explicit.items() if value is not None and value != ""}
    config = _task_config_fields(task_config)
    fields: dict[str, Any] = dict(_resources_from_task_config(config.get("resources") or {}))
    task_env, task_secrets = _split_task_env(config.get("env") or [])
    fields["env"] = {**task_env, **dict(explicit.pop("env", {}) or {})}
    explicit_secrets = list(explicit.pop("secret_env", ()) or ())
    explicit_names = {item.name for item in explicit_secrets}
    fields["secret_env"] = tuple([s for s in task_secrets if s.name not in explicit_names] + explicit_secrets)
    for field in ("volumes", "volume_mounts"):
        key = "name" if field == "volumes" else "mountPath"
        fields[field] = _merge_named(field, config.get(field) or [], explicit.pop(field, ()) or [], key)
    tolerations = [*(config.get("tolerations") or []), *(explicit.pop("tolerations", ()) or [])]
    fields["tolerations"] = [dict(t) for i, t in enumerate(tolerations) if t not in tolerations[:i]]
    fields["node_selector"] = {**(config.get("node_selector") or {}), **dict(explicit.pop("node_selector", {}) or {})}
    fields["affinity"] = dict(explicit.pop("affinity", {}) or config.get("affinity") or {})
    fields.update(explicit)
    return TrainJobSpec(**fields)
