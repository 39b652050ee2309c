"""The pure builder of Training Operator v1 ``PyTorchJob`` manifests, and the reading of their status.

One ``Master`` and ``num_nodes - 1`` ``Worker`` replicas; no runtime, so ``spec.image`` is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.training.finetuning.manifests import kueue_safe
from components.training.finetuning.manifests.names import JOB_NAME_POD_LABEL
from components.training.finetuning.manifests.spec import (
    JobSpec,
    JobSpecError,
    job_metadata,
    resources_per_node,
)
from components.training.finetuning.manifests.status import condition

API_GROUP = "kubeflow.org"
API_VERSION = "v1"
PYTORCHJOB_PLURAL = "pytorchjobs"
#: The container name the Training Operator looks for (it injects the rendezvous env into this one).
CONTAINER_NAME = "pytorch"
#: The port name and default port the operator reads the master's rendezvous port from.
PORT_NAME = "pytorchjob-port"
DEFAULT_PORT = 23456
CLEAN_POD_POLICIES = ("Running", "All", "None")
#: ``ExitCode`` recreates pods that exit with a retryable code (130, 137, 143: a preempted node, say).
RESTART_POLICIES = ("ExitCode", "OnFailure", "Never", "Always")
#: Every API call the client layer makes for a PyTorchJob, as (apiGroup, resource, verb), for ``rbac.yaml``.
API_PERMISSIONS = frozenset(
    (API_GROUP, PYTORCHJOB_PLURAL, verb) for verb in ("create", "get", "watch", "patch", "delete")
)


def pod_label_selector(name: str) -> str:
    """The label selector of a PyTorchJob's pods (the counterpart of JobSet's ``jobset-name`` label)."""
    return f"{JOB_NAME_POD_LABEL}={name}"


def _container(spec: JobSpec) -> dict[str, Any]:
    return kueue_safe.set_fields(
        name=CONTAINER_NAME,
        image=spec.image,
        command=list(spec.command),
        args=list(spec.args),
        env=kueue_safe.container_env(spec),
        ports=[{"name": PORT_NAME, "containerPort": DEFAULT_PORT, "protocol": "TCP"}],
        resources=resources_per_node(spec),
        volumeMounts=kueue_safe.without_empty(spec.volume_mounts),
    )


def _pod_template(spec: JobSpec) -> dict[str, Any]:
    pod_spec = {"containers": [_container(spec)], **kueue_safe.pod_settings(spec)}
    return kueue_safe.set_fields(metadata=kueue_safe.pod_metadata(spec, {}), spec=pod_spec)


def _check_options(spec: JobSpec, clean_pod_policy: str, restart_policy: str, backoff_limit: int) -> None:
    if not spec.image:
        raise JobSpecError(
            "JobSpec.image='': a PyTorchJob has no training runtime to take the image from; "
            "set the trainer image (training_image) when training_launcher is pytorchjob"
        )
    if clean_pod_policy not in CLEAN_POD_POLICIES:
        raise ValueError(f"clean_pod_policy={clean_pod_policy!r}: must be one of {list(CLEAN_POD_POLICIES)}")
    if restart_policy not in RESTART_POLICIES:
        raise ValueError(f"restart_policy={restart_policy!r}: must be one of {list(RESTART_POLICIES)}")
    if isinstance(backoff_limit, bool) or not isinstance(backoff_limit, int) or backoff_limit < 0:
        raise ValueError(f"backoff_limit={backoff_limit!r}: must be an integer >= 0")


def build_pytorchjob(
    spec: JobSpec,
    *,
    clean_pod_policy: str = "Running",
    restart_policy: str = "ExitCode",
    backoff_limit: int = 3,
) -> dict[str, Any]:
    """Builds the ``PyTorchJob`` manifest of a spec (pure); an empty ``spec.image`` is a :class:`JobSpecError`."""
    _check_options(spec, clean_pod_policy, restart_policy, backoff_limit)
    replica_specs = {
        role: {"replicas": replicas, "restartPolicy": restart_policy, "template": _pod_template(spec)}
        for role, replicas in (("Master", 1), ("Worker", spec.num_nodes - 1))
        if replicas
    }
    run_policy: dict[str, Any] = {"cleanPodPolicy": clean_pod_policy, "backoffLimit": backoff_limit}
    if spec.active_deadline_seconds:
        run_policy["activeDeadlineSeconds"] = spec.active_deadline_seconds
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "PyTorchJob",
        "metadata": job_metadata(spec),
        "spec": {
            "nprocPerNode": str(max(spec.gpus_per_node, 1)),
            "pytorchReplicaSpecs": replica_specs,
            "runPolicy": run_policy,
        },
    }


def pytorchjob_phase(pytorchjob: Mapping[str, Any]) -> str:
    """The phase of a PyTorchJob; ``Restarting`` and ``Created`` are ``Pending``, the terminal ones win."""
    for type_, phase in (
        ("Succeeded", "Complete"),
        ("Failed", "Failed"),
        ("Suspended", "Suspended"),
        ("Restarting", "Pending"),
        ("Running", "Running"),
    ):
        if condition(pytorchjob, type_):
            return phase
    return "Pending"
