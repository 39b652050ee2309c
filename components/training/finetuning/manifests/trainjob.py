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


def build_trainjob(spec: JobSpec, api: TrainJobApi = TRAINER_2_3) -> dict[str, Any]:
    """Builds the ``TrainJob`` manifest of a spec for the API the cluster serves (pure; default upstream 2.3)."""
    body: dict[str, Any] = {
        "runtimeRef": {"apiGroup": API_GROUP, "kind": spec.runtime_kind, "name": spec.runtime_name},
        "trainer": _trainer(spec),
    }
    if api.generation == POD_TEMPLATE_OVERRIDES:  # Trainer 2.0-2.1, RHOAI 3.3-3.5
        body["podTemplateOverrides"] = [{"targetJobs": [{"name": spec.trainer_job_name}], **_pod_patch(spec)}]
    else:  # Trainer >= 2.2: this project's patch of the trainer's replicated job
        replicated_job = {"name": spec.trainer_job_name, "template": {"spec": {"template": _pod_patch(spec)}}}
        runtime_spec = {"template": {"spec": {"replicatedJobs": [replicated_job]}}}
        body["runtimePatches"] = [{"manager": PATCH_MANAGER, "trainingRuntimeSpec": runtime_spec}]
    if spec.active_deadline_seconds and api.active_deadline:
        body["activeDeadlineSeconds"] = spec.active_deadline_seconds
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "TrainJob",
        "metadata": job_metadata(spec),
        "spec": body,
    }
