"""The cluster launchers: a ``TrainJob`` or ``PyTorchJob`` running the staged pod script, followed to its end."""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components._common.files import write_text_atomically
from components.training.finetuning import contract, tracking, transformers_backend
from components.training.finetuning.config import CLUSTER_LAUNCHERS, runtime_name_of
from components.training.finetuning.contract import (
    GRPO_ALGORITHMS,
    TRANSFORMERS_BACKEND,
    MlflowSettings,
    ProgressSettings,
    TrainingConfigError,
)
from components.training.finetuning.job_from_request import build_job_manifest, job_namespace, require_training_image
from components.training.finetuning.manifests.api_generations import (
    TRAINER_2_3,
    TrainJobApi,
    other_generation,
    refuses_generation,
)
from components.training.finetuning.manifests.names import job_name
from components.training.finetuning.plan import LauncherRun, RunPlan
from components.training.finetuning.publish import find_final_checkpoint
from components.training.finetuning.staging import script_running, stage_code_tree

POD_CODE_DIR = "code"
#: The run config's ``ckpt_output_dir`` under the run directory: checkpoints, metrics and the final model.
CKPT_OUTPUT_DIR = "checkpoints"


def check_workspace_reaches_pods(task_config: Any, run_dir: Path) -> None:
    """Fails unless the run directory lies on a volume the job's pods mount (the workspace PVC)."""
    mounts = [m.get("mountPath", "") for m in (getattr(task_config, "volume_mounts", None) or [])]
    if not any(run_dir.is_relative_to(path) for path in mounts if path):
        raise TrainingConfigError(
            f"train_model (training_launcher=trainjob): the run directory {run_dir} is on no volume passed to the "
            f"TrainJob (task_config.volume_mounts: {mounts}); run it in a pipeline with a workspace and the "
            "KUBERNETES_VOLUMES passthrough, and pass pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER"
        )


def resolve_launcher(plan: RunPlan, api_client: Any, log: Any) -> str:
    """``trainjob`` or ``pytorchjob``: the ``training_launcher`` argument, or for ``auto`` what the cluster offers."""
    launcher = plan.launcher
    if launcher == "auto":
        from components.training.finetuning.cluster import launchers

        request = plan.request
        runtime_name = runtime_name_of(request.job.runtime_name, request.training.backend)
        launcher = launchers.select_launcher(
            api_client, runtime_name, request.job.runtime_kind, job_namespace(request), log=log
        )
        if launcher == "pytorchjob":
            require_training_image("auto", request.job.image)
    return launcher


def log_memory_estimate(plan: RunPlan, model_path: str | None, log: Any) -> None:
    """Logs Training Hub's GPU memory estimate for the run, or why it is skipped (one line; never raises)."""
    try:  # the launcher image may have no estimator (no torch)
        from components.training import memory_estimate
    except ImportError:
        log("GPU memory estimate skipped: no estimator in this image; `kfp-finetune doctor` gives it")
        return
    gpus, nodes = plan.request.job.gpus_per_node, plan.request.job.num_nodes
    log(memory_estimate.presubmit_line(memory_estimate.run_shape(plan.config, gpus, nodes, model_path)))


def run_cluster_job(
    plan: RunPlan,
    api_client: Any,
    job_launcher: str,
    config_path: Path,
    model_path: str | None,
    model_facts: Mapping[str, Any],
    log: Any,
    options: Mapping[str, Any],
) -> LauncherRun:
    """Runs the staged run directory as a ``job_launcher`` job; returns the final checkpoint and step records."""
    from components.training.finetuning.cluster.api import Api
    from components.training.finetuning.cluster.discovery import discover_trainjob_api, discovery_line
    from components.training.finetuning.cluster.job_client import FieldsRejected
    from components.training.finetuning.cluster.launcher_pod import read_launcher_pod
    from components.training.finetuning.cluster.runner import run_job
    from components.training.finetuning.cluster.state import (
        ApiOptions,
        Deadlines,
        JobPolicy,
        JobSettings,
        MetricsSource,
        cancel_budget,
    )

    request = plan.request
    transformers = plan.config.backend == TRANSFORMERS_BACKEND
    if transformers:
        metrics_name = contract.LOCAL_METRICS_FILE
    else:
        log_memory_estimate(plan, model_path, log)
        metrics_name = contract.TRAINING_HUB_METRICS_FILES[plan.config.algorithm]
    launcher = read_launcher_pod(api_client, job_namespace(request), log=log)
    profile = None
    if request.job.hardware_profile:
        from components._common.hardware_profiles import PLATFORM_NAMESPACES, read_hardware_profile

        namespaces = [job_namespace(request), *PLATFORM_NAMESPACES]
        profile = read_hardware_profile(
            api_client, request.job.hardware_profile, namespaces, "training_hardware_profile"
        )
        log(f"hardware profile {profile.summary()}")
    served = TRAINER_2_3
    if job_launcher == "trainjob":
        served = discover_trainjob_api(Api(api_client, time.sleep, log, 3))
        log(discovery_line(served))
    ckpt_dir = plan.run_dir / CKPT_OUTPUT_DIR
    epochs = plan.config.num_epochs  # SFT/OSFT lines do not carry it (step totals)
    deadlines = Deadlines(
        start_timeout_seconds=request.job.start_timeout_seconds,
        timeout_seconds=request.job.timeout_seconds,
        api_outage_tolerance_seconds=request.job.api_outage_tolerance_seconds,
        timeout_counts_paused_time=request.job.timeout_counts_paused_time,
        cancel_timeout_seconds=cancel_budget(launcher.grace_seconds),
    )
    metrics = MetricsSource(
        file=str(ckpt_dir / metrics_name), normalizer=lambda raw: contract.normalize_records(raw, epochs)
    )

    def submit(api: TrainJobApi) -> dict[str, Any]:
        manifest = build_job_manifest(
            job_launcher, config_path, plan.task_config, plan.run_id, plan.task_name, request, launcher.owner, api,
            profile,
        )  # fmt: skip
        log(f"submitting {manifest['kind']} {manifest['metadata']['namespace']}/{manifest['metadata']['name']}")
        policy = JobPolicy(request.job.cleanup_policy, request.job.delete_on_success, api.active_deadline)
        pod = (launcher.namespace, launcher.name)
        run_job(api_client, manifest, JobSettings(deadlines, policy, ApiOptions(**options), metrics, pod, log))
        return manifest

    started = time.perf_counter()
    try:
        manifest = submit(served)
    except FieldsRejected as error:
        if served.discovered or not refuses_generation(served.generation, error.fields):
            raise  # (another refused field says nothing about the generation)
        # The Strict create refused the assumed generation (nothing stored): the cluster serves the other one.
        served = other_generation(served, f"the cluster refused {', '.join(error.fields)}")
        log(f"TrainJob API: {served.describe()} ({served.source}); building the job for it")
        manifest = submit(served)
    name = manifest["metadata"]["name"]
    records = contract.read_metrics(ckpt_dir / metrics_name if transformers else ckpt_dir, epochs)
    seconds = records[-1].get("time") or time.perf_counter() - started
    result = transformers_backend.read_result(ckpt_dir) if transformers else {}
    rewards = contract.read_reward_history(ckpt_dir) if plan.config.algorithm in GRPO_ALGORITHMS else []
    return LauncherRun(
        find_final_checkpoint(ckpt_dir),
        records,
        seconds,
        name,
        {
            **model_facts,
            **{key: result[key] for key in ("resumed_from", "adapter_path") if result.get(key)},
            **({"reward_history": [round(value, 4) for value in rewards]} if rewards else {}),
        },
        eval_loss=result.get("eval_loss"),
        launcher=job_launcher,
        base_eval_loss=result.get("base_eval_loss"),
        job_kind=manifest["kind"],
        rewards=rewards,
    )


@dataclasses.dataclass(frozen=True)
class PodSettings:
    """What the run config tells the training pods beyond the hyper-parameters (see :func:`pod_settings`)."""

    progress: ProgressSettings
    jit_checkpoint: bool
    mlflow: MlflowSettings


def pod_settings(plan: RunPlan, tracker: tracking.MlflowLogger, log: Any) -> PodSettings:
    """What the run config tells the pods beyond the hyper-parameters (never a tracking URI with credentials)."""
    request = plan.request
    mlflow = MlflowSettings(tracking_uri="", experiment_name="", run_name="")
    pod_trainer = TRANSFORMERS_BACKEND if plan.config.backend == TRANSFORMERS_BACKEND else "training-hub"
    if tracker.tracking_uri:
        if tracking.mask_uri(tracker.tracking_uri) != tracker.tracking_uri:
            log("MLflow: the tracking URI carries credentials: not handing it to Training Hub in the pods")
        else:
            mlflow = MlflowSettings(
                tracking_uri=tracker.tracking_uri,
                experiment_name=tracker.experiment_name,
                run_name=f"{job_name(plan.run_id, plan.task_name)}-{pod_trainer}",
            )
    progress = ProgressSettings(
        enabled=request.progress.tracking,
        port=request.progress.metrics_port,
        termination_log=contract.TERMINATION_LOG,
    )
    return PodSettings(progress=progress, jit_checkpoint=request.job.jit_checkpoint, mlflow=mlflow)


def stage_pod_script(run_dir: Path) -> Path:
    """Stages the pods' code (:data:`.contract.POD_MODULES`) and the ``entrypoint.py`` that runs it (stdlib only)."""
    stage_code_tree(run_dir / POD_CODE_DIR, contract.POD_MODULES)
    script = run_dir / "entrypoint.py"
    write_text_atomically(script, script_running(contract.POD_ENTRYPOINT, POD_CODE_DIR))
    return script


def clear_previous_run(plan: RunPlan, api_client: Any, log: Any) -> Any:
    """``training_resume=False``: clears the run directory of earlier attempts, unless a job of this run/task lives.

    Returns the API client (loaded here when the API had to be asked); raises ``JobApiError`` when it cannot say.
    """
    if plan.launcher in CLUSTER_LAUNCHERS and plan.run_dir.exists():
        from components._common.kube_auth import load_api_client

        api_client = api_client or load_api_client()
        live = live_job_of(plan, api_client)
        if live is not None:
            log(
                f"training_resume=False: the {live.get('kind', 'job')} {job_namespace(plan.request)}/"
                f"{job_name(plan.run_id, plan.task_name)} of this run/task still exists, so this attempt re-attaches "
                f"to it and keeps its checkpoints and metrics in {plan.run_dir} (nothing is cleared under a live job)"
            )
            return api_client
    shutil.rmtree(plan.run_dir, ignore_errors=True)
    return api_client


def live_job_of(plan: RunPlan, api_client: Any) -> dict[str, Any] | None:
    """The job of this run/task that still exists and is not being deleted (a retried launcher re-attaches), or None."""
    from components.training.finetuning.cluster.api import Api
    from components.training.finetuning.cluster.errors import JobApiError
    from components.training.finetuning.cluster.job_client import JobClient
    from components.training.finetuning.cluster.job_kinds import owned_by
    from components.training.finetuning.manifests.names import ownership_labels

    kinds = {"trainjob": ["TrainJob"], "pytorchjob": ["PyTorchJob"]}.get(plan.launcher, ["TrainJob", "PyTorchJob"])
    name, namespace = job_name(plan.run_id, plan.task_name), job_namespace(plan.request)
    api = Api(api_client, time.sleep, lambda line: None, 3)
    for kind in kinds:
        manifest = {"kind": kind, "metadata": {"name": name, "namespace": namespace}}
        try:
            job = JobClient(api, manifest, say=lambda line: None).get_job()
        except JobApiError as error:
            raise JobApiError(f"{error} (is a job of this run/task still there?); nothing was deleted") from None
        labels = ownership_labels(plan.run_id, plan.task_name)
        if job is not None and owned_by(job, labels) and not (job.get("metadata") or {}).get("deletionTimestamp"):
            return job
    return None
