"""Orchestration of ``train_model``: validate everything, train (here, or as a cluster job), publish the outputs."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components._common.artifacts import find_artifact_file
from components._common.files import write_text_atomically
from components._common.masking import masked
from components.training.finetuning import tracking, transformers_backend
from components.training.finetuning.cluster.state import Deadlines, JobPolicy
from components.training.finetuning.config import (
    CLUSTER_LAUNCHERS,
    LAUNCHERS,
    TrainingConfig,
    TrainModelRequest,
    check_env_vars,
)
from components.training.finetuning.contract import (
    GRPO_ALGORITHMS,
    RUN_CONFIG_FILE,
    RUN_CONFIG_VERSION,
    TRANSFORMERS_BACKEND,
    RunConfig,
    TrainingConfigError,
    count_chat_rows,
    encode_run_config,
    ignored_settings,
    unsupported_settings,
)
from components.training.finetuning.job_from_request import require_training_image
from components.training.finetuning.launch import (
    CKPT_OUTPUT_DIR,
    PodSettings,
    check_workspace_reaches_pods,
    clear_previous_run,
    live_job_of,
    pod_settings,
    resolve_launcher,
    run_cluster_job,
    stage_pod_script,
)
from components.training.finetuning.manifests import progress
from components.training.finetuning.manifests.names import job_name
from components.training.finetuning.plan import LauncherRun, RunPlan, TrainModelResult
from components.training.finetuning.publish import publish_outputs
from components.training.finetuning.staging import (
    dataset_facts,
    dataset_input,
    eval_file_of,
    pvc_mounts,
    stage_base_model,
)


def validate_request(request: TrainModelRequest, has_eval_data: bool) -> TrainingConfig:
    """Checks every argument of ``train_model`` before anything is trained or submitted (``TrainingConfigError``)."""
    config = request.training
    config.validate()
    check_env_vars(request.job.env_vars)
    launcher = request.job.launcher
    if launcher not in LAUNCHERS:
        raise TrainingConfigError(
            f"train_model parameter training_launcher={launcher!r}: must be one of {', '.join(LAUNCHERS)}"
        )
    job = request.job
    try:  # the cluster runner's own checks, named as the component's parameters
        Deadlines(job.start_timeout_seconds, job.timeout_seconds, job.api_outage_tolerance_seconds, False)
        JobPolicy(job.cleanup_policy, job.delete_on_success)
    except ValueError as error:
        raise TrainingConfigError(f"train_model parameter training_{error}") from None
    try:
        progress.check_settings(request.progress.metrics_port, request.progress.poll_interval_seconds)
    except ValueError as error:
        raise TrainingConfigError(str(error)) from None
    if launcher in CLUSTER_LAUNCHERS:
        if config.backend == TRANSFORMERS_BACKEND:
            problems = transformers_backend.unsupported_settings(config.hyperparameters())
        else:
            problems = unsupported_settings(config.algorithm, config.hyperparameters(), has_eval_data)
        if problems:
            raise TrainingConfigError(f"train_model (training_launcher={launcher}): " + "; ".join(problems))
    if launcher == "pytorchjob":
        require_training_image("pytorchjob", request.job.image)
    _validate_oci_arguments(config.base_model, request)
    return config


def _validate_oci_arguments(base_model: str, request: TrainModelRequest) -> None:
    """An ``oci://`` base model must be a valid reference; the TLS options must not contradict each other."""
    if request.oci.insecure and request.oci.ca_bundle.strip():
        raise TrainingConfigError(
            "train_model parameters training_oci_insecure=True and training_oci_ca_bundle: contradict each other "
            "(insecure skips TLS verification); keep the CA bundle and set training_oci_insecure=False, or clear "
            "training_oci_ca_bundle"
        )
    if base_model.startswith("oci://"):
        from components.training.finetuning.oci.client import OciModelError, parse_oci_uri

        try:
            parse_oci_uri(base_model, "train_model parameter training_base_model")
        except OciModelError as error:
            raise TrainingConfigError(str(error)) from None


def _unresolved(value: str) -> bool:
    return not value or value.startswith("{{$")


def resolve_auto_launcher(
    request: TrainModelRequest, environ: Mapping[str, str], log: Any = print, api_client: Any = None
) -> TrainModelRequest:
    """``training_launcher="auto"`` without a cluster (no client, pod, server URL or workspace volume): ``local``."""
    from components._common.kube_auth import SERVER_URL_ENV

    if request.job.launcher != "auto":
        return request
    mounts = [m.get("mountPath", "") for m in (getattr(request.task_config, "volume_mounts", None) or [])]
    if api_client is not None or any(mounts) or environ.get("KUBERNETES_SERVICE_HOST") or environ.get(SERVER_URL_ENV):
        return request
    log(
        "training_launcher=auto: no cluster here (not in a pod, no KUBERNETES_SERVER_URL, no workspace volume for a "
        "job's pods, as under kfp.local): training in this process with the local launcher"
    )
    return dataclasses.replace(request, job=dataclasses.replace(request.job, launcher="local"))


@masked
def run_train_model(
    request: TrainModelRequest,
    model: Any,
    metrics: Any,
    report: Any,
    *,
    api_client: Any = None,
    log: Any = print,
    job_options: Mapping[str, Any] | None = None,
) -> TrainModelResult:
    """The whole ``train_model`` component: validate, train with the chosen launcher, write the three outputs.

    ``job_options`` are keyword arguments of :class:`.cluster.state.ApiOptions`.
    """
    request = resolve_auto_launcher(request, os.environ, log, api_client)
    train_dataset = dataset_input(request.dataset, request.dataset_path, request.pvc_path)
    eval_file = eval_file_of(request.eval_dataset)
    config = validate_request(request, eval_file is not None)
    if request.job.launcher in CLUSTER_LAUNCHERS and config.backend != TRANSFORMERS_BACKEND:
        for note in ignored_settings(config.hyperparameters()):
            log(note)
    if request.job.launcher == "local":
        _require_local_training_packages(config.algorithm)
        if config.algorithm == "lora" and (config.lora_load_in_4bit or config.lora_load_in_8bit):
            from components.training.finetuning.hf_trainer.training import quantization_config

            quantization_config(config)  # QLoRA needs CUDA: one line here, before anything is staged
    data_file = find_artifact_file(train_dataset.path, "train_dataset", prefer="train")
    count_rows = count_reward_rows if config.algorithm in GRPO_ALGORITHMS else count_chat_rows
    count_rows(data_file, "train_dataset")  # fail on bad rows here, before training or submitting
    if eval_file is not None:
        count_rows(eval_file, "eval_dataset")
    temporary = None if request.pvc_path else tempfile.mkdtemp(prefix="train-model-")
    plan = RunPlan(
        request=request,
        config=config,
        data_file=data_file,
        eval_file=eval_file,
        task_config=request.task_config,
        run_id=os.environ.get("HOSTNAME", "local") if _unresolved(request.run_id) else request.run_id,
        task_name="train-model" if _unresolved(request.task_name) else request.task_name,
        workspace=Path(request.pvc_path or temporary),
    )
    if not config.resume:
        api_client = clear_previous_run(plan, api_client, log)
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    facts = dataset_facts(train_dataset)
    try:
        with start_tracking(plan, log) as tracker:
            job = request.job
            tracker.log_params(
                {**config.hyperparameters(), "base_model": config.base_model, "backend": plan.launcher}
                | {"num_nodes": job.num_nodes, "gpus_per_node": job.gpus_per_node, **facts}
            )
            if plan.launcher == "local":
                from components.training.finetuning.local.trainer import train_plan  # needs torch: imported here

                trained = train_plan(plan, on_step=tracker.log_step, log=log)
            else:
                settings = pod_settings(plan, tracker, log)
                trained = train_on_cluster(plan, api_client, log, job_options or {}, settings)
                for record in trained.records:
                    tracker.log_step(record)
            tracker.log_params({"backend_used": trained.launcher})
            if trained.extra_metadata.get("base_model_digest"):
                tracker.log_params({"base_model_digest": trained.extra_metadata["base_model_digest"]})
            trained.extra_metadata["mlflow_run_id"] = tracker.run_id
            outcome = publish_outputs(plan, trained, model, metrics, report, facts, temporary)
            tracker.log_model_location(outcome.checkpoint_path)
            return outcome
    finally:
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)


def start_tracking(plan: RunPlan, log: Any) -> tracking.MlflowLogger:
    """The MLflow logger of this run (a no-op without a tracking URI): one run per KFP run and task."""
    return tracking.MlflowLogger(
        plan.request.output.mlflow_tracking_uri,
        run_name=job_name(plan.run_id, plan.task_name),
        run_key=f"{plan.run_id}/{plan.task_name}",
        tags={"kfp_finetune.kfp_run_id": plan.run_id, "kfp_finetune.task_name": plan.task_name},
        log=log,
    )


def count_reward_rows(path: Path, label: str) -> int:
    """Checks and counts the rows of a GRPO reward JSONL file; a bad row is a one-line ``TrainingConfigError``."""
    from components._common.reward_rows import RewardRowError, iter_reward_rows

    try:
        return sum(1 for _ in iter_reward_rows(path, label))
    except RewardRowError as error:
        raise TrainingConfigError(str(error)) from None


def _require_local_training_packages(algorithm: str) -> None:
    from components.training.finetuning.hf_trainer.pod_launch import missing_trainer_packages

    missing = missing_trainer_packages(algorithm)
    if missing:
        raise TrainingConfigError(
            f"train_model parameter training_launcher='local' needs {', '.join(missing)} in the task image: run it on "
            "the project's step image (Containerfile; compile --image) or use training_launcher='trainjob'"
        )


def train_on_cluster(
    plan: RunPlan, api_client: Any, log: Any, options: Mapping[str, Any], settings: PodSettings
) -> LauncherRun:
    """Stages the run directory and runs it as a TrainJob or PyTorchJob (``api_client`` None: the default client)."""
    from components._common.kube_auth import load_api_client

    check_workspace_reaches_pods(plan.task_config, plan.run_dir)
    api_client = api_client or load_api_client()
    launcher = resolve_launcher(plan, api_client, log)
    model_path, model_facts = stage_base_model(plan, log)
    gpus = max(plan.request.job.gpus_per_node, 1)
    config_path = plan.run_dir / RUN_CONFIG_FILE
    if config_path.is_file() and live_job_of(plan, api_client) is not None:  # an earlier attempt's job, still live
        log(f"a job of this run/task is live: re-attaching without staging anything in {plan.run_dir}")
    else:
        config_path = write_run_config(
            plan.config, plan.run_dir, plan.data_file, plan.eval_file, plan.task_config, gpus, settings, model_path
        )
    return run_cluster_job(plan, api_client, launcher, config_path, model_path, model_facts, log, options)


def write_run_config(
    config: TrainingConfig,
    run_dir: Path,
    data_file: Path,
    eval_file: Path | None,
    task_config: Any,
    nproc_per_node: int,
    settings: PodSettings,
    model_path: str | None = None,
) -> Path:
    """Stages the pods' code, the data and ``run_config.json`` in ``run_dir``; returns the config file."""
    data_dir = run_dir / "data"
    data_dir.mkdir(exist_ok=True)
    if config.backend == TRANSFORMERS_BACKEND:
        transformers_backend.stage_code(run_dir)
        transformers_backend.stage_data(data_file, data_dir / "train.jsonl", "train_dataset")
        if eval_file is not None:
            transformers_backend.stage_data(eval_file, data_dir / "eval.jsonl", "eval_dataset")
    else:
        stage_pod_script(run_dir)
        shutil.copyfile(data_file, data_dir / "train.jsonl")
        if eval_file is not None:
            shutil.copyfile(eval_file, data_dir / "eval.jsonl")
    run_config = RunConfig(
        version=RUN_CONFIG_VERSION,
        base_model=config.base_model,
        model_path=model_path or "",
        data_path=str(data_dir / "train.jsonl"),
        eval_data_path=str(data_dir / "eval.jsonl") if eval_file is not None else "",
        ckpt_output_dir=str(run_dir / CKPT_OUTPUT_DIR),
        model_cache_dir=str(run_dir.parent / "model_cache"),
        pvc_mounts=pvc_mounts(task_config),
        nproc_per_node=nproc_per_node,
        hyperparameters=config.training_settings(),
        progress=settings.progress,
        jit_checkpoint=settings.jit_checkpoint,
        mlflow=settings.mlflow,
    )
    path = run_dir / RUN_CONFIG_FILE
    write_text_atomically(path, encode_run_config(run_config))
    return path
