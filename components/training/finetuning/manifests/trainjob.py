"""The pure builder of Kubeflow Trainer ``TrainJob`` manifests from a :class:`~.spec.JobSpec`.

:func:`build_trainjob` turns a spec into a plain ``trainer.kubeflow.org/v1alpha1`` ``TrainJob`` dict (no client
calls). Pod-level settings (volumes, mounts, tolerations, node selector, affinity, labels, annotations) travel in
``spec.runtimePatches`` (Trainer >= 2.2), so they reach the training pods. Secrets are only ever referenced.
"""

from __future__ import annotations

from typing import Any

from components.training.finetuning.manifests.names import (
    job_name,
)
from components.training.finetuning.manifests.spec import (
    API_GROUP,
    API_VERSION,
    PATCH_MANAGER,
    JobSpec,
    job_labels,
    job_metadata,
    resources_per_node,
)


def _trainer(spec: JobSpec) -> dict[str, Any]:
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


def _pod_patch(spec: JobSpec) -> dict[str, Any]:
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
    labels = {**dict(spec.pod_labels), JOB_NAME_POD_LABEL: job_name(spec.run_id, spec.task_name)}
    metadata = {"labels": labels, "annotations": dict(spec.pod_annotations)}
    metadata = {key: value for key, value in metadata.items() if value}
    if metadata:
        template["metadata"] = metadata
    if pod_spec:
        template["spec"] = pod_spec
    return template


def build_trainjob(spec: JobSpec) -> dict[str, Any]:
    """Builds the ``TrainJob`` manifest of a spec (pure: no client calls, same spec → equal dict).

    Args:
        spec: The validated spec.

    Returns:
        A ``trainer.kubeflow.org/v1alpha1`` ``TrainJob`` dict named by :func:`job_name`, labelled with
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
        "metadata": job_metadata(spec, labels),
        "spec": body,
    }
