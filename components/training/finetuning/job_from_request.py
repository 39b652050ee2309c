"""The training job from the request: a ``TrainJob`` or ``PyTorchJob`` running the staged pod command."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from components._common.namespace import pod_namespace
from components.training.finetuning import transformers_backend
from components.training.finetuning.config import TrainModelRequest, runtime_name_of
from components.training.finetuning.contract import TRANSFORMERS_BACKEND, TrainingConfigError
from components.training.finetuning.manifests.api_generations import TRAINER_2_3, TrainJobApi
from components.training.finetuning.manifests.spec import JobSpec, SecretEnvVar
from components.training.finetuning.manifests.task_config import spec_from_task_config
from components.training.finetuning.manifests.trainjob import build_trainjob

#: Secret keys turned into environment variables of the training pods (never literal values).
HF_TOKEN_KEY = "HF_TOKEN"
S3_SECRET_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_S3_ENDPOINT", "AWS_DEFAULT_REGION")
#: The job group's fields that are :class:`~.manifests.spec.JobSpec` fields of the same name.
_JOB_FIELDS = ("image", "runtime_kind", "num_nodes", "gpus_per_node", "gpu_resource_name", "cpu_per_node")
_JOB_FIELDS += ("memory_per_node", "node_selector", "pod_labels", "pod_annotations", "queue_name")


def require_training_image(launcher: str, training_image: str) -> None:
    """A PyTorchJob has no runtime to take the image from: ``training_image`` must name one."""
    if not training_image.strip():
        raise TrainingConfigError(
            "train_model parameter training_image='': required when the launcher is pytorchjob "
            f"(training_launcher={launcher!r}); a PyTorchJob has no training runtime to take the image from, so name "
            "the Training Hub image"
        )


def job_namespace(request: TrainModelRequest) -> str:
    """The job's namespace: ``training_namespace``, else the pod's own (neither: :class:`TrainingConfigError`)."""
    if request.job.namespace:
        return request.job.namespace
    namespace = pod_namespace()
    if namespace:
        return namespace
    raise TrainingConfigError(
        "train_model parameter training_namespace='': not running in a cluster, so name the namespace"
    )


def build_job_spec(
    config_path: Path, task_config: Any, run_id: str, task_name: str, request: TrainModelRequest, owner: Any
) -> JobSpec:
    """The :class:`~.manifests.spec.JobSpec` running the staged pod command (secrets referenced, never copied)."""
    transformers = request.training.backend == TRANSFORMERS_BACKEND
    script = f"{transformers_backend.CODE_DIR}/launch.py" if transformers else "entrypoint.py"
    command, args = ["python", str(config_path.parent / script)], ["--config", str(config_path)]
    secret_env = []
    if request.secrets.hf_token_secret_name:
        secret_env.append(SecretEnvVar(HF_TOKEN_KEY, request.secrets.hf_token_secret_name, HF_TOKEN_KEY, True))
    if request.secrets.s3_secret_name:
        secret_env += [SecretEnvVar(k, request.secrets.s3_secret_name, k, True) for k in S3_SECRET_KEYS]
    if dataclasses.is_dataclass(task_config):  # its resources are the launcher pod's own, not the training pods'
        task_config = dataclasses.replace(task_config, resources=None)
    elif task_config is not None:
        task_config = {key: value for key, value in dict(task_config).items() if key != "resources"}
    return spec_from_task_config(
        task_config,
        run_id=run_id,
        task_name=task_name,
        namespace=job_namespace(request),
        command=command,
        args=args,
        **{name: getattr(request.job, name) for name in _JOB_FIELDS},
        runtime_name=runtime_name_of(request.job.runtime_name, request.training.backend),
        env={"PYTHONUNBUFFERED": "1", **{str(k): str(v) for k, v in dict(request.job.env_vars).items()}},
        secret_env=tuple(secret_env),
        tolerations=list(request.job.tolerations),
        active_deadline_seconds=request.job.timeout_seconds,
        progress_tracking=request.progress.tracking,
        metrics_port=request.progress.metrics_port,
        metrics_poll_interval_seconds=request.progress.poll_interval_seconds,
        owner=owner,
    )


def build_job_manifest(
    launcher: str,
    config_path: Path,
    task_config: Any,
    run_id: str,
    task_name: str,
    request: TrainModelRequest,
    owner: Any,
    api: TrainJobApi = TRAINER_2_3,
    profile: Any = None,
) -> dict[str, Any]:
    """The ``TrainJob`` or ``PyTorchJob`` (``launcher``) running the entrypoint, for the TrainJob ``api`` served."""
    from components.training.finetuning.manifests import pytorchjob
    from components.training.finetuning.manifests.hardware_profile import apply_hardware_profile

    spec = build_job_spec(config_path, task_config, run_id, task_name, request, owner)
    if profile is not None:
        spec = apply_hardware_profile(spec, profile)
    if launcher == "pytorchjob":
        return pytorchjob.build_pytorchjob(spec)
    return build_trainjob(spec, api)
