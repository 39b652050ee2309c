"""What a run reads and stages: its datasets, an ``oci://`` base model, and the run directory the pods start from.

The run directory on the workspace PVC receives the pod script (:mod:`.pod.entrypoint`, with the standard-library
modules it needs staged beside it under :data:`~.pod.entrypoint.STAGED_MODULES` names), the datasets and
``run_config.json`` (:func:`write_run_config`), which carries the hyper-parameters and :func:`pod_settings`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

from components._common.artifacts import find_artifact_file
from components._common.dataset_metadata import read_dataset_metadata
from components._common.files import write_text_atomically
from components.training.finetuning import tracking
from components.training.finetuning.config import TrainingConfig, TrainingConfigError
from components.training.finetuning.manifests.names import job_name
from components.training.finetuning.plan import RunPlan
from components.training.finetuning.pod import entrypoint, progress_server
from components.training.finetuning.pod.run_config import (
    RUN_CONFIG_FILE,
    RUN_CONFIG_VERSION,
    MlflowSettings,
    ProgressSettings,
    RunConfig,
    encode_run_config,
)


def stage_base_model(plan: RunPlan, log: Any) -> tuple[str | None, dict[str, str]]:
    """Pulls an ``oci://`` base model into the workspace (once per run; a retry reuses the verified copy).

    The pull runs here, in the ``train_model`` task, before any training pod exists: see the README's
    "Base models from OCI registries" for why.

    Returns:
        ``(local model directory, lineage facts)``, or ``(None, {})`` when the base model is not ``oci://``.

    Raises:
        oci_model.OciModelError: The model cannot be pulled (one line naming the reference and the fix).
    """
    base_model = plan.config.base_model
    if not base_model.startswith("oci://"):
        return None, {}
    from components.training.finetuning.oci import model as oci_model

    pulled = oci_model.pull_model(
        base_model,
        plan.workspace / "train_model" / "model_cache",
        os.environ,
        insecure=plan.request.training_oci_insecure,
        ca_bundle=plan.request.training_oci_ca_bundle,
        log=log,
    )
    facts = {"base_model_digest": pulled.digest, "base_model_resolved": pulled.uri, "base_model_path": str(pulled.path)}
    return str(pulled.path), facts


def dataset_facts(artifact: Any) -> dict[str, str]:
    """``dataset_uri`` and ``dataset_sha256`` of the training data (as :mod:`components._common.dataset_metadata`).

    From the artifact's dataset metadata when ``dataset_download`` wrote it; else the artifact's URI and the file's
    hash (a dataset from another component, or a path).

    Raises:
        DatasetMetadataError: The metadata claims the schema but breaks it (names the field).
    """
    described = read_dataset_metadata(getattr(artifact, "metadata", None), "train_model input dataset")
    if described is not None:
        return {"dataset_uri": described.dataset_uri, "dataset_sha256": described.dataset_sha256}
    data_file = find_artifact_file(artifact.path, "dataset", prefer="train")
    with data_file.open("rb") as handle:
        sha256 = hashlib.file_digest(handle, "sha256").hexdigest()
    return {"dataset_uri": str(artifact.uri), "dataset_sha256": sha256}


def eval_file_of(eval_dataset: Any) -> Path | None:
    """The eval JSONL, or ``None`` when there is no eval dataset or it is empty (e.g. ``train_split_ratio=1.0``)."""
    if eval_dataset is None or not getattr(eval_dataset, "path", None) or not Path(eval_dataset.path).exists():
        return None
    data_file = find_artifact_file(eval_dataset.path, "eval_dataset", prefer="eval")
    with data_file.open("rb") as handle:  # streamed: the file may be large, and is checked (UTF-8 included) later
        return data_file if any(line.strip() for line in handle) else None


def pvc_mounts(task_config: Any) -> dict[str, str]:
    """Mount path by PVC claim name, from the task's volume passthrough (for ``pvc://`` model URIs)."""
    volumes = list(getattr(task_config, "volumes", None) or [])
    mounts = list(getattr(task_config, "volume_mounts", None) or [])
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v}
    return {claims[m["name"]]: m["mountPath"] for m in mounts if m.get("name") in claims}


def dataset_input(dataset: Any, dataset_path: str, pvc_path: str) -> Any:
    """The training data as an artifact-like object: the wired ``dataset`` artifact, else ``dataset_path``.

    ``dataset_path`` (what a string given for ``dataset`` becomes, see the component) is a local path, absolute or
    relative to the workspace ``pvc_path``.

    Raises:
        TrainingConfigError: Neither is given, both are, or the path is a remote URI or does not exist.
    """
    import types

    path = (dataset_path or "").strip()
    if dataset is not None and path:
        raise TrainingConfigError(
            f"train_model parameters dataset and dataset_path={path!r}: give one of them, not both"
        )
    if dataset is not None:
        return dataset
    if not path:
        raise TrainingConfigError(
            "train_model parameter dataset: required; wire a dataset artifact (e.g. dataset_download's "
            "train_dataset) or give a JSONL path"
        )
    if "://" in path:
        raise TrainingConfigError(
            f"train_model parameter dataset={path!r}: a string dataset must be a path on the workspace or in the "
            "image; download remote data with the dataset_download component and wire its train_dataset output"
        )
    resolved = Path(path) if Path(path).is_absolute() or not pvc_path else Path(pvc_path) / path
    if not resolved.exists():
        raise TrainingConfigError(
            f"train_model parameter dataset={path!r}: {resolved} does not exist"
            + ("" if Path(path).is_absolute() else " (relative paths are read from pvc_path, the workspace)")
        )
    return types.SimpleNamespace(path=str(resolved), uri=str(resolved), metadata={})


@dataclasses.dataclass(frozen=True)
class PodSettings:
    """What the run config tells the training pods beyond the hyper-parameters (see :func:`pod_settings`)."""

    progress: ProgressSettings
    jit_checkpoint: bool
    mlflow: MlflowSettings


def pod_settings(plan: RunPlan, tracker: tracking.MlflowLogger, log: Any) -> PodSettings:
    """What the run config tells the training pods beyond the hyper-parameters.

    ``progress``: the dashboard progress server (``training_progress_tracking``, ``training_progress_metrics_port``);
    ``jit_checkpoint``: Training Hub's ``enable_jit_checkpoint``; ``mlflow``: the tracking URI, experiment and a run
    name (``<job name>-training-hub``, beside this step's own run) for Training Hub's own MLflow logging. A URI with
    credentials in it is not handed to the pods (the run config lies on the PVC); use a token secret instead.
    """
    request = plan.request
    mlflow = MlflowSettings(tracking_uri="", experiment_name="", run_name="")
    if tracker.tracking_uri:
        if tracking.mask_uri(tracker.tracking_uri) != tracker.tracking_uri:
            log("MLflow: the tracking URI carries credentials: not handing it to Training Hub in the pods")
        else:
            mlflow = MlflowSettings(
                tracking_uri=tracker.tracking_uri,
                experiment_name=tracker.experiment_name,
                run_name=f"{job_name(plan.run_id, plan.task_name)}-training-hub",
            )
    progress = ProgressSettings(
        enabled=request.training_progress_tracking,
        port=request.training_progress_metrics_port,
        termination_log=progress_server.TERMINATION_LOG,
    )
    return PodSettings(progress=progress, jit_checkpoint=request.training_jit_checkpoint, mlflow=mlflow)


def stage_pod_script(run_dir: Path) -> Path:
    """Copies the pod script and the standard-library modules it imports (:data:`~.pod.entrypoint.STAGED_MODULES`).

    Returns:
        The staged ``entrypoint.py``; ``python entrypoint.py`` runs with nothing but the standard library.
    """
    shutil.copyfile(entrypoint.__file__, run_dir / "entrypoint.py")
    for module, staged in entrypoint.STAGED_MODULES.items():
        shutil.copyfile(importlib.util.find_spec(module).origin, run_dir / f"{staged}.py")
    return run_dir / "entrypoint.py"


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
    """Stages the entrypoint (with its modules), the data and ``run_config.json`` in the run directory for the pods.

    ``nproc_per_node`` (GPUs per node) lets the entrypoint derive the node count from ``WORLD_SIZE`` where the job
    controller injects no ``PET_*`` variables (older Training Operator v1). ``settings`` (:func:`pod_settings`) add
    ``progress``, ``jit_checkpoint`` and ``mlflow``. ``model_path`` is a base model already staged on the workspace
    (an ``oci://`` pull); the pods then load it instead of resolving ``base_model``.

    Returns:
        The config file (a :class:`~.pod.run_config.RunConfig`).
    """
    stage_pod_script(run_dir)
    data_dir = run_dir / "data"
    data_dir.mkdir(exist_ok=True)
    shutil.copyfile(data_file, data_dir / "train.jsonl")
    if eval_file is not None:
        shutil.copyfile(eval_file, data_dir / "eval.jsonl")
    run_config = RunConfig(
        version=RUN_CONFIG_VERSION,
        base_model=config.base_model,
        model_path=model_path or "",
        data_path=str(data_dir / "train.jsonl"),
        eval_data_path=str(data_dir / "eval.jsonl") if eval_file is not None else "",
        ckpt_output_dir=str(run_dir / "checkpoints"),
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
