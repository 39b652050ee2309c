"""What a run reads and stages: its datasets, an ``oci://`` base model, and the run directory the pods start from.

The run directory on the workspace PVC receives the pod script (:mod:`.pod.entrypoint`, with the standard-library
modules it needs staged beside it under :data:`~.pod.entrypoint.STAGED_MODULES` names), the datasets and
``run_config.json`` (:func:`write_run_config`), which carries the hyper-parameters and :func:`pod_settings`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components._common.artifacts import find_artifact_file
from components._common.files import write_text_atomically
from components.training.finetuning import tracking, transformers_backend
from components.training.finetuning.config import TRANSFORMERS_BACKEND, TrainingConfig, TrainingConfigError
from components.training.finetuning.manifests.names import job_name
from components.training.finetuning.plan import RunPlan
from components.training.finetuning.pod import entrypoint, progress_server

RUN_CONFIG_FILE = "run_config.json"


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
        insecure=bool(plan.params.get("oci_insecure", False)),
        ca_bundle=str(plan.params.get("oci_ca_bundle") or ""),
        log=log,
    )
    facts = {"base_model_digest": pulled.digest, "base_model_resolved": pulled.uri, "base_model_path": str(pulled.path)}
    return str(pulled.path), facts


def dataset_facts(artifact: Any) -> dict[str, str]:
    """Source URI and SHA-256 of a dataset artifact: from its metadata, else the artifact URI and the file's hash."""
    metadata = dict(getattr(artifact, "metadata", None) or {})
    data_file = find_artifact_file(artifact.path, "dataset", prefer="train")
    sha256 = metadata.get("dataset_sha256") or metadata.get("sha256")
    if not sha256:
        with data_file.open("rb") as handle:
            sha256 = hashlib.file_digest(handle, "sha256").hexdigest()
    uri = metadata.get("dataset_uri") or metadata.get("source_uri") or metadata.get("source") or artifact.uri
    return {"dataset_uri": str(uri), "dataset_sha256": str(sha256)}


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


def pod_settings(plan: RunPlan, tracker: tracking.MlflowLogger, log: Any) -> dict[str, Any]:
    """What the run config tells the training pods beyond the hyper-parameters.

    ``progress``: the dashboard progress server (``progress_tracking``, ``progress_metrics_port``);
    ``jit_checkpoint``: Training Hub's ``enable_jit_checkpoint``; ``mlflow``: the tracking URI, experiment and a run
    name (``<job name>-training-hub`` or ``-transformers``, beside this step's own run) for the pods' own MLflow
    logging. A URI with credentials in it is not handed to the pods (the run config lies on the PVC); use a token
    secret instead.
    """
    params = plan.params
    mlflow: dict[str, str] = {}
    if tracker.tracking_uri:
        if tracking.mask_uri(tracker.tracking_uri) != tracker.tracking_uri:
            log("MLflow: the tracking URI carries credentials: not handing it to Training Hub in the pods")
        else:
            mlflow = {
                "tracking_uri": tracker.tracking_uri,
                "experiment_name": tracker.experiment_name,
                "run_name": f"{job_name(plan.run_id, plan.task_name)}-{_pod_trainer(plan)}",
            }
    return {
        "progress": {
            "enabled": bool(params.get("progress_tracking", True)),
            "port": int(params.get("progress_metrics_port", progress_server.DEFAULT_METRICS_PORT)),
        },
        "jit_checkpoint": bool(params.get("jit_checkpoint", True)),
        "mlflow": mlflow,
    }


def _pod_trainer(plan: RunPlan) -> str:
    """What trains in the pods, naming their MLflow run: ``transformers`` or ``training-hub``."""
    return TRANSFORMERS_BACKEND if plan.config.hub_backend == TRANSFORMERS_BACKEND else "training-hub"


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
    nproc_per_node: int = 1,
    settings: Mapping[str, Any] | None = None,
    model_path: str | None = None,
    hub_backend: str = "",
) -> Path:
    """Stages the entrypoint (with its modules), the data and ``run_config.json`` in the run directory for the pods.

    ``nproc_per_node`` (GPUs per node) lets the entrypoint derive the node count from ``WORLD_SIZE`` where the job
    controller injects no ``PET_*`` variables (older Training Operator v1). ``settings`` (:func:`pod_settings`) add
    ``progress``, ``jit_checkpoint`` and ``mlflow``. ``model_path`` is a base model already staged on the workspace
    (an ``oci://`` pull); the pods then load it instead of resolving ``base_model``. ``hub_backend="transformers"``
    stages the project's trainer and the data with string contents (:mod:`.transformers_backend`) instead of the
    Training Hub entrypoint.

    Returns:
        The config file.
    """
    data_dir = run_dir / "data"
    data_dir.mkdir(exist_ok=True)
    if hub_backend == TRANSFORMERS_BACKEND:
        transformers_backend.stage_code(run_dir)
        transformers_backend.stage_data(data_file, data_dir / "train.jsonl", "train_dataset")
        if eval_file is not None:
            transformers_backend.stage_data(eval_file, data_dir / "eval.jsonl", "eval_dataset")
    else:
        stage_pod_script(run_dir)
        shutil.copyfile(data_file, data_dir / "train.jsonl")
        if eval_file is not None:
            shutil.copyfile(eval_file, data_dir / "eval.jsonl")
    run_config = {
        "algorithm": config.algorithm,
        "base_model": config.base_model,
        "data_path": str(data_dir / "train.jsonl"),
        "eval_data_path": str(data_dir / "eval.jsonl") if eval_file is not None else None,
        "ckpt_output_dir": str(run_dir / "checkpoints"),
        "model_cache_dir": str(run_dir.parent / "model_cache"),
        "pvc_mounts": pvc_mounts(task_config),
        "hyperparameters": config.hyperparameters(),
        "nproc_per_node": nproc_per_node,
        **dict(settings or {}),
    }
    if model_path:
        run_config["model_path"] = model_path
    path = run_dir / RUN_CONFIG_FILE
    write_text_atomically(path, json.dumps(run_config, indent=1, sort_keys=True))
    return path
