"""The pure builder of ``TrainJob`` manifests for either API generation (the same pod patch, in either field)."""

from __future__ import annotations

from typing import Any

from components.training.finetuning.manifests import kueue_safe
from components.training.finetuning.manifests.api_generations import (
    POD_TEMPLATE_OVERRIDES,
    TRAINER_2_3,
    TrainJobApi,
)
from components.training.finetuning.manifests.names import JOB_NAME_POD_LABEL, job_name
from components.training.finetuning.manifests.spec import (
    API_GROUP,
    API_VERSION,
    PATCH_MANAGER,
    JobSpec,
    job_metadata,
    resources_per_node,
)


def _trainer(spec: JobSpec) -> dict[str, Any]:
    return kueue_safe.set_fields(
        image=spec.image,
        command=list(spec.command),
        args=list(spec.args),
        numNodes=spec.num_nodes,
        numProcPerNode=max(spec.gpus_per_node, 1),
        resourcesPerNode=resources_per_node(spec),
        env=kueue_safe.container_env(spec),
    )


def _pod_patch(spec: JobSpec) -> dict[str, Any]:
    """The pod template patch: labels (with :data:`JOB_NAME_POD_LABEL`), annotations, the trainer's mounts, the rest."""
    pod_spec = kueue_safe.pod_settings(spec)
    mounts = kueue_safe.without_empty(spec.volume_mounts)
    if mounts:
        pod_spec["containers"] = [{"name": spec.trainer_container_name, "volumeMounts": mounts}]
    return kueue_safe.set_fields(
        metadata=kueue_safe.pod_metadata(spec, {JOB_NAME_POD_LABEL: job_name(spec.run_id, spec.task_name)}),
        spec=pod_spec,
    )


def runtime_patches(spec: JobSpec) -> list[dict[str, Any]]:
    """``spec.runtimePatches`` (Trainer >= 2.2): this project's patch of the trainer's replicated job."""
    replicated_job = {"name": spec.trainer_job_name, "template": {"spec": {"template": _pod_patch(spec)}}}
    return [
        {
            "manager": PATCH_MANAGER,
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [replicated_job]}}},
        }
    ]


def pod_template_overrides(spec: JobSpec) -> list[dict[str, Any]]:
    """``spec.podTemplateOverrides`` (Trainer 2.0-2.1, RHOAI 3.3-3.5): the same pod patch for the trainer's job."""
    return [{"targetJobs": [{"name": spec.trainer_job_name}], **_pod_patch(spec)}]


def build_trainjob(spec: JobSpec, api: TrainJobApi = TRAINER_2_3) -> dict[str, Any]:
    """Builds the ``TrainJob`` manifest of a spec for the API the cluster serves (pure; default upstream 2.3)."""
    body: dict[str, Any] = {
        "runtimeRef": {"apiGroup": API_GROUP, "kind": spec.runtime_kind, "name": spec.runtime_name},
        "trainer": _trainer(spec),
    }
    if api.generation == POD_TEMPLATE_OVERRIDES:
        body["podTemplateOverrides"] = pod_template_overrides(spec)
    else:
        body["runtimePatches"] = runtime_patches(spec)
    if spec.active_deadline_seconds and api.active_deadline:
        body["activeDeadlineSeconds"] = spec.active_deadline_seconds
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "TrainJob",
        "metadata": job_metadata(spec),
        "spec": body,
    }
