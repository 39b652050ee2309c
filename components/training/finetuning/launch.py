"""The cluster launchers: a ``TrainJob`` or ``PyTorchJob`` running the staged pod script, followed to its end.

:func:`train_on_cluster` resolves ``auto`` (:func:`.cluster.backends.select_backend`), stages the run directory
(:mod:`.staging`), builds the job from one :class:`~.manifests.spec.JobSpec` (:func:`build_job_spec`,
:func:`build_job_manifest`), runs it with :func:`.cluster.runner.run_job` and reads the checkpoint and metrics back
from the workspace PVC.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components._common.namespace import pod_namespace
from components.training.finetuning import transformers_backend
from components.training.finetuning.config import TRANSFORMERS_BACKEND, TrainingConfigError, runtime_name_of
from components.training.finetuning.manifests.spec import SecretEnvVar
from components.training.finetuning.manifests.task_config import spec_from_task_config
from components.training.finetuning.manifests.trainjob import build_trainjob
from components.training.finetuning.plan import BackendRun, RunPlan
from components.training.finetuning.pod import entrypoint, progress_server
from components.training.finetuning.pod import metrics as metrics_module
from components.training.finetuning.publish import find_final_checkpoint
from components.training.finetuning.staging import stage_base_model, write_run_config

#: Secret keys turned into environment variables of the training pods (never literal values).
HF_TOKEN_KEY = "HF_TOKEN"
S3_SECRET_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_S3_ENDPOINT", "AWS_DEFAULT_REGION")


def require_training_image(backend: str, params: Mapping[str, Any]) -> None:
    """A PyTorchJob has no runtime to take the image from: ``training_image`` must name one.

    Raises:
        TrainingConfigError: ``training_image`` is empty (``backend`` names why it is needed).
    """
    if not str(params.get("training_image") or "").strip():
        raise TrainingConfigError(
            "train_model parameter training_image='': required when the launcher is pytorchjob "
            f"(training_launcher={backend!r}); a PyTorchJob has no training runtime to take the image from, so name "
            "the Training Hub image"
        )


def check_workspace_reaches_pods(task_config: Any, run_dir: Path) -> None:
    """Fails unless the run directory lies on a volume the job's pods mount (the workspace PVC)."""
    mounts = [m.get("mountPath", "") for m in (getattr(task_config, "volume_mounts", None) or [])]
    if not any(run_dir.is_relative_to(path) for path in mounts if path):
        raise TrainingConfigError(
            f"train_model (training_launcher=trainjob): the run directory {run_dir} is on no volume passed to the "
            f"TrainJob (task_config.volume_mounts: {mounts}); run it in a pipeline with a workspace and the "
            "KUBERNETES_VOLUMES passthrough, and pass pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER"
        )


def job_namespace(params: Mapping[str, Any]) -> str:
    """The job's namespace: ``training_namespace``, else the pod's own.

    Raises:
        TrainingConfigError: Neither is known (not running in a cluster).
    """
    if params.get("namespace"):
        return params["namespace"]
    namespace = pod_namespace()
    if namespace:
        return namespace
    raise TrainingConfigError(
        "train_model parameter training_namespace='': not running in a cluster, so name the namespace"
    )


def without_launcher_resources(task_config: Any) -> Any:
    """``task_config`` without ``resources``: those are the launcher pod's own, not the training pods'.

    The training pods' CPU, memory and GPUs come from the ``training_*`` parameters only.
    """
    if task_config is None:
        return None
    if dataclasses.is_dataclass(task_config):
        return dataclasses.replace(task_config, resources=None)
    return {key: value for key, value in dict(task_config).items() if key != "resources"}


def build_job_spec(
    config_path: Path, task_config: Any, run_id: str, task_name: str, params: Mapping[str, Any], owner: Any = None
) -> Any:
    """The :class:`~.manifests.spec.JobSpec` running the staged pod command (secrets referenced, never copied).

    The command is Training Hub's entrypoint, or the ``transformers`` backend's ``launch.py``
    (:func:`.transformers_backend.pod_command`); the runtime is ``training_runtime_name``, else the backend's
    (:func:`~.config.runtime_name_of`: ``torch-distributed`` for ``transformers``, else ``training-hub``).
    ``owner`` is the run's owning object (:func:`.cluster.launcher_pod.read_launcher_pod`), or ``None``.
    """
    if params.get("hub_backend") == TRANSFORMERS_BACKEND:
        command, args = transformers_backend.pod_command(config_path)
    else:
        command, args = ["python", str(config_path.parent / "entrypoint.py")], ["--config", str(config_path)]
    secret_env = []
    hf_token_secret = params.get("hf_token_secret_name", "hf-token")
    if hf_token_secret:
        secret_env.append(SecretEnvVar(HF_TOKEN_KEY, hf_token_secret, HF_TOKEN_KEY, True))
    if params.get("s3_secret_name"):
        secret_env += [SecretEnvVar(k, params["s3_secret_name"], k, True) for k in S3_SECRET_KEYS]
    spec = spec_from_task_config(
        without_launcher_resources(task_config),
        run_id=run_id,
        task_name=task_name,
        namespace=job_namespace(params),
        command=command,
        args=args,
        image=params.get("training_image", ""),
        runtime_name=runtime_name_of(params.get("runtime_name", ""), params.get("hub_backend", "")),
        runtime_kind=params.get("runtime_kind", "ClusterTrainingRuntime"),
        num_nodes=params.get("num_nodes", 1),
        gpus_per_node=params.get("gpus_per_node", 1),
        gpu_resource_name=params.get("gpu_resource_name", "nvidia.com/gpu"),
        cpu_per_node=params.get("cpu_per_node", ""),
        memory_per_node=params.get("memory_per_node", ""),
        env={"PYTHONUNBUFFERED": "1", **{str(k): str(v) for k, v in dict(params.get("env_vars") or {}).items()}},
        secret_env=tuple(secret_env),
        tolerations=list(params.get("tolerations") or []),
        node_selector=dict(params.get("node_selector") or {}),
        pod_labels=dict(params.get("pod_labels") or {}),
        pod_annotations=dict(params.get("pod_annotations") or {}),
        active_deadline_seconds=params.get("timeout_seconds", 0),
        queue_name=params.get("queue_name", ""),
        progress_tracking=bool(params.get("progress_tracking", True)),
        metrics_port=params.get("progress_metrics_port", progress_server.DEFAULT_METRICS_PORT),
        metrics_poll_interval_seconds=params.get(
            "progress_poll_interval_seconds", progress_server.DEFAULT_POLL_INTERVAL_SECONDS
        ),
        owner=owner,
    )
    return spec


def build_job_manifest(
    backend: str,
    config_path: Path,
    task_config: Any,
    run_id: str,
    task_name: str,
    params: Mapping[str, Any],
    owner: Any = None,
) -> dict[str, Any]:
    """The ``TrainJob`` (``backend="trainjob"``) or ``PyTorchJob`` (``backend="pytorchjob"``) running the entrypoint.

    Args:
        backend: ``trainjob`` or ``pytorchjob`` (``auto`` already resolved).
        config_path: The staged ``run_config.json``.
        task_config: The task's ``dsl.TaskConfig`` passthrough.
        run_id: The KFP run id.
        task_name: The KFP task name.
        params: The ``train_model`` parameters.
        owner: The run's owning object for the job's ``ownerReference`` (``None``: none).

    Returns:
        The manifest.
    """
    from components.training.finetuning.manifests import pytorchjob

    spec = build_job_spec(config_path, task_config, run_id, task_name, params, owner)
    if backend == "pytorchjob":
        return pytorchjob.build_pytorchjob(spec)
    return build_trainjob(spec)


def resolve_backend(plan: RunPlan, api_client: Any, log: Any) -> str:
    """``trainjob`` or ``pytorchjob``: the ``backend`` parameter, or for ``auto`` what the cluster offers.

    Raises:
        TrainingConfigError: The resolved backend is pytorchjob and ``training_image`` is empty.
        BackendSelectionError: ``auto`` found neither backend usable.
    """
    backend = plan.backend
    if backend == "auto":
        from components.training.finetuning.cluster import backends

        params = plan.params
        backend = backends.select_backend(
            api_client,
            runtime_name_of(params.get("runtime_name", ""), params.get("hub_backend", "")),
            params.get("runtime_kind", "ClusterTrainingRuntime"),
            job_namespace(params),
            log=log,
        )
        if backend == "pytorchjob":
            require_training_image("auto", params)
    return backend


def log_memory_estimate(plan: RunPlan, model_path: str | None, log: Any) -> None:
    """Logs Training Hub's GPU memory estimate for the run, or why it is skipped (one line; never raises)."""
    try:  # not in the embedded bundle: the launcher image has no torch to run Training Hub's estimator anyway
        from components.training import memory_estimate
    except ImportError:
        log("GPU memory estimate skipped: no estimator in this image; `kfp-finetune doctor` gives it")
        return
    gpus, nodes = int(plan.params.get("gpus_per_node", 1)), int(plan.params.get("num_nodes", 1))
    # The step's ServiceAccount may not list nodes (rbac.yaml): the estimate alone; doctor compares with the nodes.
    log(memory_estimate.presubmit_line(memory_estimate.run_shape(plan.config, gpus, nodes, model_path), None))


def train_on_cluster(
    plan: RunPlan, api_client: Any, log: Any, options: Mapping[str, Any], settings: Mapping[str, Any] | None = None
) -> BackendRun:
    """Runs the plan as a TrainJob or PyTorchJob and returns the final checkpoint and step records.

    Args:
        plan: The validated run.
        api_client: A ``kubernetes.client.ApiClient`` (``None``: in-cluster credentials or kubeconfig).
        log: Progress sink.
        options: Extra keyword arguments of :func:`.cluster.runner.run_job` (e.g. ``poll_interval_seconds``).
        settings: :func:`.staging.pod_settings` for the run config.
    """
    from components.training.finetuning.cluster.auth import load_api_client
    from components.training.finetuning.cluster.launcher_pod import read_launcher_pod
    from components.training.finetuning.cluster.runner import run_job
    from components.training.finetuning.cluster.state import DEFAULT_API_OUTAGE_TOLERANCE_SECONDS, cancel_budget

    params = plan.params
    check_workspace_reaches_pods(plan.task_config, plan.run_dir)
    api_client = api_client or load_api_client()
    backend = resolve_backend(plan, api_client, log)
    model_path, model_facts = stage_base_model(plan, log)
    config_path = write_run_config(
        plan.config,
        plan.run_dir,
        plan.data_file,
        plan.eval_file,
        plan.task_config,
        max(int(params.get("gpus_per_node", 1)), 1),
        settings,
        model_path=model_path,
        hub_backend=plan.config.hub_backend,
    )
    transformers = plan.config.hub_backend == TRANSFORMERS_BACKEND
    if transformers:
        metrics_name = transformers_backend.METRICS_FILE
    else:
        entrypoint.training_hub_call(json.loads(config_path.read_text()), {}, model_path)  # fails here, not in the pod
        log_memory_estimate(plan, model_path, log)
        metrics_name = metrics_module.TRAINING_HUB_METRICS_FILES[plan.config.algorithm]
    launcher = read_launcher_pod(api_client, job_namespace(params), log=log)
    manifest = build_job_manifest(
        backend, config_path, plan.task_config, plan.run_id, plan.task_name, params, launcher.owner
    )
    name = manifest["metadata"]["name"]
    ckpt_dir = plan.run_dir / "checkpoints"
    epochs = int(plan.config.hyperparameters()["num_epochs"])  # SFT/OSFT lines do not carry it (step totals)
    log(f"submitting {manifest['kind']} {manifest['metadata']['namespace']}/{name}")
    started = time.perf_counter()
    run_job(
        api_client,
        manifest,
        start_timeout_seconds=params.get("start_timeout_seconds", 1800),
        timeout_seconds=params.get("timeout_seconds", 0),
        cleanup_policy=params.get("cleanup_policy", "delete"),
        delete_on_success=params.get("delete_on_success", False),
        metrics_file=str(ckpt_dir / metrics_name),
        metrics_normalizer=lambda raw: metrics_module.normalize_records(raw, epochs),
        log=log,
        timeout_counts_paused_time=bool(params.get("timeout_counts_paused_time", False)),
        api_outage_tolerance_seconds=params.get("api_outage_tolerance_seconds", DEFAULT_API_OUTAGE_TOLERANCE_SECONDS),
        cancel_timeout_seconds=cancel_budget(launcher.grace_seconds),
        launcher_pod=(launcher.namespace, launcher.name),
        **options,
    )
    records = metrics_module.read_metrics(ckpt_dir / metrics_name if transformers else ckpt_dir, epochs)
    seconds = records[-1].get("time") or time.perf_counter() - started
    result = transformers_backend.read_result(ckpt_dir) if transformers else {}
    return BackendRun(
        find_final_checkpoint(ckpt_dir),
        records,
        seconds,
        name,
        {**model_facts, **{key: result[key] for key in ("resumed_from", "adapter_path") if result.get(key)}},
        eval_loss=result.get("eval_loss"),
        backend=backend,
        base_eval_loss=result.get("base_eval_loss"),
        job_kind=manifest["kind"],
    )
