"""A RHOAI Hardware Profile applied to a training job's :class:`~.spec.JobSpec` (pure)."""

from __future__ import annotations

import dataclasses
from typing import Any

from components._common.hardware_profiles import HardwareProfile, HardwareProfileError
from components.training.finetuning.manifests.spec import JobSpec


def apply_hardware_profile(spec: JobSpec, profile: HardwareProfile) -> JobSpec:
    """``spec`` with the profile's resources, node selector, tolerations, queue and annotations.

    Raises:
        HardwareProfileError: The profile's accelerator count is not the job's GPUs per node (one process per GPU),
            or the job already names another queue.
    """
    gpu_name, gpus = profile.gpus()
    if gpu_name and gpus != spec.gpus_per_node:
        raise HardwareProfileError(
            f"training_hardware_profile={profile.name}: it gives {gpu_name}={gpus} per pod but "
            f"training_gpus_per_node={spec.gpus_per_node}; set training_gpus_per_node={gpus} (one process per GPU)"
        )
    if profile.local_queue and spec.queue_name and spec.queue_name != profile.local_queue:
        raise HardwareProfileError(
            f"training_hardware_profile={profile.name}: it queues to {profile.local_queue} but "
            f"training_queue_name={spec.queue_name}; leave training_queue_name empty"
        )
    tolerations: list[Any] = list(spec.tolerations)
    tolerations += [dict(t) for t in profile.tolerations if dict(t) not in tolerations]
    return dataclasses.replace(
        spec,
        gpu_resource_name=gpu_name or spec.gpu_resource_name,
        cpu_per_node=profile.counts.get("cpu", spec.cpu_per_node),
        memory_per_node=profile.counts.get("memory", spec.memory_per_node),
        tolerations=tolerations,
        node_selector={**spec.node_selector, **profile.node_selector},
        queue_name=profile.local_queue or spec.queue_name,
        pod_annotations={**spec.pod_annotations, **profile.annotations()},
    )
