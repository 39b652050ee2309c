"""A typed job spec (:class:`JobSpec`, every field validated when made) and the metadata both job kinds share."""

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from components.training.finetuning.manifests.names import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    LABEL_VALUE,
    RUN_ID_LABEL,
    TASK_NAME_ANNOTATION,
    job_name,
    ownership_labels,
    qualified_name_ok,
)
from components.training.finetuning.manifests.progress import (
    METRICS_PORT_RANGE,
    POLL_INTERVAL_RANGE,
    progression_annotations,
)

API_GROUP = "trainer.kubeflow.org"
API_VERSION = "v1alpha1"
TRAINJOB_PLURAL = "trainjobs"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
#: The label that submits a job to a Kueue LocalQueue (Kueue then suspends it until the queue admits it).
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
#: ``spec.runtimePatches[].manager`` of the patch this project owns.
PATCH_MANAGER = "kfp-finetune.kubeflow.org/train-model"
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
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
#: The integer fields and their (lowest, highest) value (``None``: unbounded).
_INTEGERS = {
    "num_nodes": (1, None),
    "gpus_per_node": (0, None),
    "active_deadline_seconds": (0, None),
    "metrics_port": METRICS_PORT_RANGE,
    "metrics_poll_interval_seconds": POLL_INTERVAL_RANGE,
}
_MOUNT_KEYS = {"name", "mountPath", "subPath", "subPathExpr", "readOnly", "mountPropagation", "recursiveReadOnly"}


_UID = re.compile(r"^[0-9a-fA-F-]{8,64}$")


@dataclasses.dataclass(frozen=True)
class OwnerReference:
    """The object that owns the run (e.g. the Argo ``Workflow``); deleting it deletes the job (same namespace only)."""

    api_version: str
    kind: str
    name: str
    uid: str
    namespace: str

    def __post_init__(self) -> None:
        for field in ("api_version", "kind", "name", "namespace"):
            if not isinstance(getattr(self, field), str) or not getattr(self, field):
                raise ValueError(f"OwnerReference.{field}={getattr(self, field)!r}: must be a non-empty string")
        if not isinstance(self.uid, str) or not _UID.match(self.uid):
            raise ValueError(f"OwnerReference.uid={self.uid!r}: must be a Kubernetes uid")

    def to_dict(self) -> dict[str, Any]:
        """The ``metadata.ownerReferences`` entry (not the controller; never blocks the owner's deletion)."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": False,
            "blockOwnerDeletion": False,
        }


class JobSpecError(ValueError):
    """A :class:`JobSpec` field breaks a rule; the message names the field, the value and the rule."""


def is_quantity(text: str) -> bool:
    """Whether ``text`` is a Kubernetes quantity (``8``, ``500m``, ``64Gi``), by ``kubernetes.utils.parse_quantity``."""
    from kubernetes.utils import parse_quantity

    try:
        parse_quantity(text)
    except (ValueError, TypeError, ArithmeticError):
        return False
    return text == text.strip()


def _is_label(value: Any) -> bool:
    """Whether ``value`` is a DNS-1123 label (lowercase alphanumerics and '-', at most 63 characters)."""
    return isinstance(value, str) and len(value) <= 63 and bool(DNS1123_LABEL.match(value))


def _known_keys(field: str, value: Mapping[str, Any], allowed: set[str]) -> None:
    if set(value) - allowed:
        raise fail(field, dict(value), f"unknown keys {sorted(set(value) - allowed)}; allowed: {sorted(allowed)}")


def fail(field: str, value: Any, rule: str) -> JobSpecError:
    """The error naming a spec field, its value and the rule it breaks."""
    return JobSpecError(f"JobSpec.{field}={value!r}: {rule}")


@dataclasses.dataclass(frozen=True)
class SecretEnvVar:
    """An environment variable of the training pods from a secret's key (``optional``: may be missing)."""

    name: str
    secret_name: str
    secret_key: str
    optional: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _ENV_NAME.match(self.name):
            raise fail("secret_env.name", self.name, "must be a valid environment variable name")
        if not isinstance(self.secret_name, str) or not DNS1123_SUBDOMAIN.match(self.secret_name):
            raise fail(f"secret_env[{self.name}].secret_name", self.secret_name, "must be a DNS-1123 secret name")
        if not isinstance(self.secret_key, str) or not _SECRET_KEY.match(self.secret_key):
            raise fail(f"secret_env[{self.name}].secret_key", self.secret_key, "must match [-._a-zA-Z0-9]+")
        if not isinstance(self.optional, bool):
            raise fail(f"secret_env[{self.name}].optional", self.optional, "must be a bool")

    def to_env_var(self) -> dict[str, Any]:
        """The Kubernetes ``EnvVar`` referencing the secret (the value itself is never read)."""
        ref: dict[str, Any] = {"name": self.secret_name, "key": self.secret_key}
        if self.optional:
            ref["optional"] = True
        return {"name": self.name, "valueFrom": {"secretKeyRef": ref}}


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """Everything the job builders need, validated on creation; the optional fields default to none (``""``, 0, empty).

    ``run_id`` and ``task_name`` give the job's name and labels; ``""`` for ``image``, ``cpu_per_node`` or
    ``memory_per_node`` keeps the runtime's; ``gpus_per_node`` is also the processes per node; ``env`` holds no
    secrets (``secret_env`` does); ``trainer_job_name``/``trainer_container_name`` are what the pod patch targets.
    """

    run_id: str
    task_name: str
    namespace: str
    command: Sequence[str]
    runtime_name: str
    runtime_kind: str
    num_nodes: int
    gpus_per_node: int
    gpu_resource_name: str
    progress_tracking: bool
    metrics_port: int
    metrics_poll_interval_seconds: int
    args: Sequence[str] = ()
    image: str = ""
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
    owner: OwnerReference | None = None

    def __post_init__(self) -> None:
        for name in ("command", "args", "volumes", "volume_mounts", "tolerations", "secret_env"):
            value = getattr(self, name)
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                raise fail(name, value, "must be a list")
            object.__setattr__(self, name, tuple(value))
        for name in ("env", "node_selector", "affinity", "pod_labels", "pod_annotations"):
            if not isinstance(getattr(self, name), Mapping):
                raise fail(name, getattr(self, name), "must be a dict")
        if not isinstance(self.progress_tracking, bool):
            raise fail("progress_tracking", self.progress_tracking, "must be a bool")
        for name, (low, high) in _INTEGERS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low or value > (high or value):
                raise fail(name, value, "must be an integer " + (f"in [{low}, {high}]" if high else f">= {low}"))
        self._check_identity()
        self._check_trainer()
        self._check_env()
        self._check_volumes()
        self._check_scheduling()
        self._check_metadata()

    def _check_identity(self) -> None:
        for name in ("run_id", "task_name"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise fail(name, value, "must be a non-empty string")
        if not _is_label(self.namespace):
            raise fail("namespace", self.namespace, "must be a DNS-1123 label (lowercase, digits, '-', <= 63)")
        if self.runtime_kind not in RUNTIME_KINDS:
            raise fail("runtime_kind", self.runtime_kind, f"must be one of {list(RUNTIME_KINDS)}")
        if not isinstance(self.runtime_name, str) or not DNS1123_SUBDOMAIN.match(self.runtime_name):
            raise fail("runtime_name", self.runtime_name, "must be a DNS-1123 name of an existing runtime")
        for name in ("trainer_job_name", "trainer_container_name"):
            if not _is_label(getattr(self, name)):
                raise fail(name, getattr(self, name), "must be a DNS-1123 label")

    def _check_trainer(self) -> None:
        if not self.command:
            raise fail("command", list(self.command), "must name the training entrypoint (non-empty list)")
        for name in ("command", "args"):
            for index, item in enumerate(getattr(self, name)):
                if not isinstance(item, str):
                    raise fail(f"{name}[{index}]", item, "must be a string")
        if not isinstance(self.image, str) or any(ch.isspace() for ch in self.image):
            raise fail("image", self.image, "must be an image reference without spaces ('' = the runtime's image)")
        if not isinstance(self.gpu_resource_name, str) or not qualified_name_ok(self.gpu_resource_name):
            raise fail("gpu_resource_name", self.gpu_resource_name, "must be a resource name like nvidia.com/gpu")
        for name in ("cpu_per_node", "memory_per_node"):
            value = getattr(self, name)
            if not isinstance(value, str) or (value and not is_quantity(value)):
                raise fail(name, value, "must be a Kubernetes quantity such as '8', '500m' or '64Gi' ('' = unset)")

    def _check_env(self) -> None:
        for key, value in self.env.items():
            if not isinstance(key, str) or not _ENV_NAME.match(key):
                raise fail("env", key, "keys must be valid environment variable names")
            if not isinstance(value, str):
                raise fail(f"env[{key}]", value, "values must be strings")
            if _SECRET_ENV_NAME.search(key):
                raise fail(f"env[{key}]", "<redacted>", "looks like a secret: pass it as secret_env (a secretKeyRef)")
        seen: set[str] = set()
        for item in self.secret_env:
            if not isinstance(item, SecretEnvVar):
                raise fail("secret_env", item, "items must be SecretEnvVar")
            if item.name in seen or item.name in self.env:
                raise fail("secret_env", item.name, "each environment variable may be set only once")
            seen.add(item.name)

    def _check_volumes(self) -> None:
        volume_names: set[str] = set()
        for index, volume in enumerate(self.volumes):
            where = f"volumes[{index}]"
            if not isinstance(volume, Mapping) or not isinstance(volume.get("name"), str):
                raise fail(where, volume, "must be a Volume dict with a 'name'")
            if not _is_label(volume["name"]):
                raise fail(f"{where}.name", volume["name"], "must be a DNS-1123 label")
            if volume["name"] in volume_names:
                raise fail(f"{where}.name", volume["name"], "volume names must be unique")
            sources = [key for key in volume if key != "name"]
            if len(sources) != 1:
                raise fail(where, volume, "must have exactly one volume source (e.g. persistentVolumeClaim)")
            claim = volume.get("persistentVolumeClaim")
            if "persistentVolumeClaim" in volume and not (isinstance(claim, Mapping) and claim.get("claimName")):
                raise fail(f"{where}.persistentVolumeClaim", claim, "needs a claimName")
            volume_names.add(volume["name"])
        mount_paths: set[str] = set()
        for index, mount in enumerate(self.volume_mounts):
            where = f"volume_mounts[{index}]"
            if not isinstance(mount, Mapping) or not isinstance(mount.get("name"), str):
                raise fail(where, mount, "must be a VolumeMount dict with a 'name'")
            if mount["name"] not in volume_names:
                raise fail(f"{where}.name", mount["name"], f"must name one of volumes {sorted(volume_names)}")
            _known_keys(where, mount, _MOUNT_KEYS)
            path = mount.get("mountPath")
            if not isinstance(path, str) or not path.startswith("/"):
                raise fail(f"{where}.mountPath", path, "must be an absolute path")
            if path in mount_paths:
                raise fail(f"{where}.mountPath", path, "mount paths must be unique")
            mount_paths.add(path)

    def _check_scheduling(self) -> None:
        for index, toleration in enumerate(self.tolerations):
            where = f"tolerations[{index}]"
            if not isinstance(toleration, Mapping) or not toleration:
                raise fail(where, toleration, "must be a non-empty Toleration dict")
            _known_keys(where, toleration, _TOLERATION_KEYS)
            if toleration.get("operator", "Equal") not in _TOLERATION_OPERATORS:
                raise fail(
                    f"{where}.operator", toleration["operator"], f"must be one of {sorted(_TOLERATION_OPERATORS)}"
                )
            if toleration.get("effect", "") not in _TOLERATION_EFFECTS:
                raise fail(f"{where}.effect", toleration["effect"], f"must be one of {sorted(_TOLERATION_EFFECTS)}")
            if toleration.get("operator") == "Exists" and toleration.get("value"):
                raise fail(f"{where}.value", toleration["value"], "must be empty when operator is Exists")
            seconds = toleration.get("tolerationSeconds")
            if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
                raise fail(f"{where}.tolerationSeconds", seconds, "must be an integer")
        for key, value in self.node_selector.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise fail("node_selector", {key: value}, "keys and values must be strings")
        _known_keys("affinity", self.affinity, _AFFINITY_KEYS)

    def _check_metadata(self) -> None:
        if self.owner is not None and (
            not isinstance(self.owner, OwnerReference) or self.owner.namespace != self.namespace
        ):
            raise fail(
                "owner",
                self.owner,
                f"must be an OwnerReference in the job's namespace {self.namespace!r}: across namespaces the garbage "
                "collector would delete the job",
            )
        if self.queue_name != "" and not _is_label(self.queue_name):
            raise fail("queue_name", self.queue_name, "must be a Kueue LocalQueue name (DNS-1123 label) or ''")
        for key, value in self.pod_labels.items():
            if not isinstance(key, str) or not qualified_name_ok(key):
                raise fail("pod_labels", key, "label keys must be qualified names ([prefix/]name, name <= 63 chars)")
            if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
                raise fail(f"pod_labels[{key}]", value, "label values must be <= 63 alphanumerics, '-', '_' or '.'")
        for key, value in self.pod_annotations.items():
            if not isinstance(key, str) or not qualified_name_ok(key) or not isinstance(value, str):
                raise fail("pod_annotations", {key: value}, "keys must be qualified names, values strings")


def resources_per_node(spec: JobSpec) -> dict[str, Any]:
    """The container resources of one node (GPU count, CPU, memory) as ``requests``/``limits``; ``{}`` when none."""
    asked = {"cpu": spec.cpu_per_node, "memory": spec.memory_per_node, spec.gpu_resource_name: spec.gpus_per_node}
    quantities = {name: str(value) for name, value in asked.items() if value}
    return {"requests": dict(quantities), "limits": dict(quantities)} if quantities else {}


def job_metadata(spec: JobSpec) -> dict[str, Any]:
    """The job's ``metadata``: name, namespace, labels (ownership, Kueue's queue), annotations, owner reference."""
    labels = ownership_labels(spec.run_id, spec.task_name)
    if spec.queue_name:
        labels[QUEUE_NAME_LABEL] = spec.queue_name
    annotations = {TASK_NAME_ANNOTATION: spec.task_name, RUN_ID_LABEL: spec.run_id}
    annotations.update(
        progression_annotations(spec.progress_tracking, spec.metrics_port, spec.metrics_poll_interval_seconds)
    )
    metadata: dict[str, Any] = {
        "name": job_name(spec.run_id, spec.task_name),
        "namespace": spec.namespace,
        "labels": labels,
        "annotations": annotations,
    }
    if spec.owner is not None:
        metadata["ownerReferences"] = [spec.owner.to_dict()]
    return metadata
