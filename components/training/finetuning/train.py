"""Orchestration of ``train_model`` for both backends: validate, train (in-process or as a TrainJob), publish outputs.

Everything is checked before anything trains or is submitted (:func:`validate_params`). Then:

* ``backend="local"``: :func:`.local_backend.train_locally` in this process;
* ``backend="trainjob"``: the run directory on the workspace PVC receives ``entrypoint.py``, ``run_config.json`` and
  the dataset; a Kubeflow Trainer ``TrainJob`` (built by :mod:`.trainjob`, run by :mod:`.kube`) runs the entrypoint,
  which calls Training Hub. The final checkpoint and metrics are read back from the PVC.
* ``backend="pytorchjob"``: the same, as a Training Operator v1 ``PyTorchJob`` (built by :mod:`.pytorchjob` from the
  same spec; needs ``training_image``).
* ``backend="auto"``: ``trainjob`` or ``pytorchjob``, whichever the cluster offers (:func:`.backends.select_backend`).

An ``oci://`` base model is pulled into the workspace by this task first (:func:`stage_base_model`,
:mod:`.oci_model`), so every backend and every node reads a local, digest-verified copy.

Finally the model is copied into the ``Model`` artifact (HF ``save_pretrained`` layout) with metadata naming the real
checkpoint location, and ``Metrics`` and the HTML report are written.

MLflow (:mod:`.tracking`, on when ``mlflow_tracking_uri`` or ``MLFLOW_TRACKING_URI`` is set): one run per KFP run and
task (continued when the task is retried) gets the parameters, every step's metrics (live from the local backend,
read back from the metrics file for the cluster backends) and the final model location; its id goes into the model's
metadata as ``mlflow_run_id``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components._common.artifacts import find_artifact_file
from components._common.files import with_extension, write_text_atomically
from components._common.masking import mask_data, masked
from components._common.namespace import pod_namespace
from components.training.finetuning import entrypoint, local_backend, progress_server, tracking
from components.training.finetuning import metrics as metrics_module
from components.training.finetuning.config import BACKENDS, CLUSTER_BACKENDS, TrainingConfig, TrainingConfigError
from components.training.finetuning.kube import CLEANUP_POLICIES
from components.training.finetuning.report import render_report
from components.training.finetuning.trainjob import trainjob_name

RUN_CONFIG_FILE = "run_config.json"
#: Secret keys turned into environment variables of the training pods (never literal values).
HF_TOKEN_KEY = "HF_TOKEN"
S3_SECRET_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_S3_ENDPOINT", "AWS_DEFAULT_REGION")


@dataclasses.dataclass
class TrainOutcome:
    """What a ``train_model`` run produced.

    Attributes:
        model_dir: The model copied into the ``Model`` artifact.
        checkpoint_path: Where the final checkpoint really lives (on the workspace PVC when there is one).
        summary: The KFP metrics written.
        records: The per-step records.
        model_metadata: The metadata set on the ``Model`` artifact.
        trainjob_name: The TrainJob's name (``""`` for the local backend).
    """

    model_dir: Path
    checkpoint_path: str
    summary: dict[str, float]
    records: list[dict[str, Any]]
    model_metadata: dict[str, Any]
    trainjob_name: str = ""


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """A validated run: what to train on, where, as which KFP run and task.

    Attributes:
        config: The training configuration.
        data_file: The training JSONL.
        eval_file: The eval JSONL, or ``None``.
        task_config: The task's ``dsl.TaskConfig`` passthrough (or ``None``).
        run_id: The KFP run id (names the run directory and the TrainJob).
        task_name: The KFP task name.
        workspace: The shared workspace (or a temporary directory).
        params: All ``train_model`` parameters by name.
    """

    config: TrainingConfig
    data_file: Path
    eval_file: Path | None
    task_config: Any
    run_id: str
    task_name: str
    workspace: Path
    params: Mapping[str, Any]

    @property
    def backend(self) -> str:
        """The ``backend`` parameter: ``trainjob``, ``pytorchjob``, ``auto`` or ``local``."""
        return self.params.get("backend", "trainjob")

    @property
    def run_dir(self) -> Path:
        """Named like the TrainJob: stable per run and task, so that a retried task resumes from its checkpoints."""
        return self.workspace / "train_model" / trainjob_name(self.run_id, self.task_name)


@dataclasses.dataclass
class Trained:
    """What a backend produced: the final checkpoint, the step records and facts for the model metadata."""

    final_dir: Path
    records: list[dict[str, Any]]
    train_seconds: float
    trainjob_name: str = ""
    extra_metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    eval_loss: float | None = None
    backend: str = ""
    base_eval_loss: float | None = None


def validate_params(params: Mapping[str, Any], has_eval_data: bool) -> TrainingConfig:
    """Checks every parameter of ``train_model`` before anything is trained or submitted.

    Args:
        params: The component's parameters by name.
        has_eval_data: Whether an eval dataset is present.

    Returns:
        The validated training configuration.

    Raises:
        TrainingConfigError: The first broken rule, naming the parameter and value.
    """
    config = TrainingConfig.from_params(**params)
    backend = params.get("backend", "trainjob")
    if backend not in BACKENDS:
        raise TrainingConfigError(
            f"train_model parameter training_launcher={backend!r}: must be one of {', '.join(BACKENDS)}"
        )
    if params.get("cleanup_policy", "delete") not in CLEANUP_POLICIES:
        raise TrainingConfigError(
            f"train_model parameter training_cleanup_policy={params['cleanup_policy']!r}: must be one of "
            f"{', '.join(CLEANUP_POLICIES)}"
        )
    for name in ("start_timeout_seconds", "timeout_seconds"):
        if params.get(name, 0) < 0:
            raise TrainingConfigError(f"train_model parameter training_{name}={params[name]!r}: must be >= 0")
    try:
        progress_server.check_settings(
            params.get("progress_metrics_port", progress_server.DEFAULT_METRICS_PORT),
            params.get("progress_poll_interval_seconds", progress_server.DEFAULT_POLL_INTERVAL_SECONDS),
        )
    except ValueError as error:
        raise TrainingConfigError(str(error)) from None
    if backend in CLUSTER_BACKENDS:
        problems = entrypoint.unsupported_settings(config.algorithm, config.hyperparameters(), has_eval_data)
        if problems:
            raise TrainingConfigError(f"train_model (training_launcher={backend}): " + "; ".join(problems))
    if backend == "pytorchjob":
        require_training_image("pytorchjob", params)
    _validate_oci_params(config.base_model, params)
    return config


def _validate_oci_params(base_model: str, params: Mapping[str, Any]) -> None:
    """An ``oci://`` base model must be a valid reference; the TLS options must not contradict each other."""
    if params.get("oci_insecure", False) and str(params.get("oci_ca_bundle") or "").strip():
        raise TrainingConfigError(
            "train_model parameters training_oci_insecure=True and training_oci_ca_bundle: contradict each other "
            "(insecure skips TLS verification); keep the CA bundle and set training_oci_insecure=False, or clear "
            "training_oci_ca_bundle"
        )
    if base_model.startswith("oci://"):
        from components.training.finetuning.oci_auth import OciModelError, parse_oci_uri

        try:
            parse_oci_uri(base_model, "train_model parameter training_base_model")
        except OciModelError as error:
            raise TrainingConfigError(str(error)) from None


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
    from components.training.finetuning import oci_model

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


def _eval_file(eval_dataset: Any) -> Path | None:
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


def _unresolved(value: str) -> bool:
    return not value or value.startswith("{{$")


@masked
def run_train_model(
    train_dataset: Any,
    model: Any,
    metrics: Any,
    report: Any,
    task_config: Any = None,
    eval_dataset: Any = None,
    api_client: Any = None,
    log: Any = print,
    kube_options: Mapping[str, Any] | None = None,
    **params: Any,
) -> TrainOutcome:
    """The whole ``train_model`` component: validate, train with the chosen backend, write the three outputs.

    Args:
        train_dataset: ``Input[Dataset]`` (a chat JSONL file, or a directory holding one).
        model: ``Output[Model]``: receives the trained model; metadata names checkpoint, base model, algorithm,
            hyper-parameters, dataset, TrainJob and backend.
        metrics: ``Output[Metrics]``: final_loss, min_loss, steps, train_seconds, tokens_per_second (+ eval_loss,
            base_eval_loss).
        report: ``Output[HTML]``: loss curve, hyper-parameters, TrainJob name.
        task_config: The task's ``dsl.TaskConfig`` passthrough (volumes, tolerations, env, ...).
        eval_dataset: Optional ``Input[Dataset]``.
        api_client: A ``kubernetes.client.ApiClient`` (default: in-cluster / kubeconfig); trainjob backend only.
        log: Progress sink.
        kube_options: Extra keyword arguments of :func:`.kube.run_trainjob` (e.g. ``poll_interval_seconds``).
        **params: The remaining ``train_model`` parameters by name.

    Returns:
        The run's outcome.
    """
    eval_file = _eval_file(eval_dataset)
    config = validate_params(params, eval_file is not None)
    if params.get("backend", "trainjob") == "local":
        _require_local_training_packages(config.algorithm)
    data_file = find_artifact_file(train_dataset.path, "train_dataset", prefer="train")
    entrypoint.count_chat_rows(data_file, "train_dataset")  # fail on bad rows here, before training or submitting
    if eval_file is not None:
        entrypoint.count_chat_rows(eval_file, "eval_dataset")
    run_id = params.get("run_id", "")
    task_name = params.get("task_name", "")
    temporary = None if params.get("workspace_path") else tempfile.mkdtemp(prefix="train-model-")
    plan = RunPlan(
        config=config,
        data_file=data_file,
        eval_file=eval_file,
        task_config=task_config,
        run_id=os.environ.get("HOSTNAME", "local") if _unresolved(run_id) else run_id,
        task_name="train-model" if _unresolved(task_name) else task_name,
        workspace=Path(params.get("workspace_path") or temporary),
        params=params,
    )
    if not config.resume:
        shutil.rmtree(plan.run_dir, ignore_errors=True)
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    facts = dataset_facts(train_dataset)
    try:
        with start_tracking(plan, log) as tracker:
            tracker.log_params(tracking_params(plan, facts))
            if plan.backend == "local":
                trained = _train_local(plan, on_step=tracker.log_step, log=log)
            else:
                settings = pod_settings(plan, tracker, log)
                trained = _train_on_cluster(plan, api_client, log, kube_options or {}, settings)
                for record in trained.records:
                    tracker.log_step(record)
            tracker.log_params({"backend_used": trained.backend})
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
    """The MLflow logger of this run (a no-op without a tracking URI): one run per KFP run and task.

    Raises:
        tracking.TrackingError: The tracking URI is set but the run cannot be started.
    """
    return tracking.MlflowLogger(
        str(plan.params.get("mlflow_tracking_uri") or ""),
        run_name=trainjob_name(plan.run_id, plan.task_name),
        run_key=f"{plan.run_id}/{plan.task_name}",
        tags={"kfp_finetune.kfp_run_id": plan.run_id, "kfp_finetune.task_name": plan.task_name},
        log=log,
    )


def pod_settings(plan: RunPlan, tracker: tracking.MlflowLogger, log: Any) -> dict[str, Any]:
    """What the run config tells the training pods beyond the hyper-parameters.

    ``progress``: the dashboard progress server (``progress_tracking``, ``progress_metrics_port``);
    ``jit_checkpoint``: Training Hub's ``enable_jit_checkpoint``; ``mlflow``: the tracking URI, experiment and a run
    name (``<job name>-training-hub``, beside this step's own run) for Training Hub's own MLflow logging. A URI with
    credentials in it is not handed to the pods (the run config lies on the PVC); use a token secret instead.
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
                "run_name": f"{trainjob_name(plan.run_id, plan.task_name)}-training-hub",
            }
    return {
        "progress": {
            "enabled": bool(params.get("progress_tracking", True)),
            "port": int(params.get("progress_metrics_port", progress_server.DEFAULT_METRICS_PORT)),
        },
        "jit_checkpoint": bool(params.get("jit_checkpoint", True)),
        "mlflow": mlflow,
    }


def tracking_params(plan: RunPlan, facts: Mapping[str, str]) -> dict[str, Any]:
    """The MLflow parameters of a run: hyper-parameters, base model, algorithm, backend and dataset."""
    config = plan.config
    return {
        **config.hyperparameters(),
        "base_model": config.base_model,
        "backend": plan.backend,
        "num_nodes": plan.params.get("num_nodes", 1),
        "gpus_per_node": plan.params.get("gpus_per_node", 1),
        **facts,
    }


def _require_local_training_packages(algorithm: str) -> None:
    import importlib.util

    needed = ("torch", "transformers", "peft") if algorithm == "lora" else ("torch", "transformers")
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise TrainingConfigError(
            f"train_model parameter training_launcher='local' needs {', '.join(missing)} in the task image: compile "
            "with the runtime image (KFP_FINETUNE_RUNTIME_IMAGE, see Containerfile) or use training_launcher='trainjob'"
        )


def _train_local(plan: RunPlan, on_step: Any = None, log: Any = print) -> Trained:
    config = plan.config
    source, model_facts = stage_base_model(plan, log)
    if source is None:
        source = entrypoint.resolve_model_source(
            config.base_model, plan.run_dir / "model_cache", pvc_mounts(plan.task_config), os.environ
        )
    result = local_backend.train_locally(
        config, plan.data_file, plan.run_dir / "output", model_source=source, eval_data=plan.eval_file, on_step=on_step
    )
    extra: dict[str, Any] = {"resumed_from": str(result.resumed_from or ""), **model_facts}
    if result.adapter_dir is not None:
        extra["adapter_path"] = str(result.adapter_dir)
    return Trained(
        result.final_model_dir,
        result.records,
        result.train_seconds,
        "",
        extra,
        result.eval_loss,
        "local",
        base_eval_loss=result.base_eval_loss,
    )


def _samples_seen(name: str) -> float:
    """The sample count in a checkpoint name such as ``samples_640`` or ``samples_64.0`` (0 when there is none)."""
    numbers = re.findall(r"\d+(?:\.\d+)?", name)
    return float(numbers[-1]) if numbers else 0.0


def find_final_checkpoint(ckpt_dir: Path) -> Path:
    """The final Hugging Face checkpoint Training Hub left in ``ckpt_dir``.

    The newest ``hf_format/samples_<N>`` (SFT and OSFT), else ``ckpt_dir`` itself when it holds a model or adapter
    (LoRA saves there).

    Raises:
        FileNotFoundError: No checkpoint.
    """
    candidates = [p for p in (ckpt_dir / "hf_format").glob("*") if (p / "config.json").is_file()]
    if candidates:
        return max(candidates, key=lambda p: (_samples_seen(p.name), p.stat().st_mtime))
    if (ckpt_dir / "config.json").is_file() or (ckpt_dir / "adapter_config.json").is_file():
        return ckpt_dir
    raise FileNotFoundError(f"no final checkpoint (hf_format/* or a model) under {ckpt_dir}")


def write_run_config(
    config: TrainingConfig,
    run_dir: Path,
    data_file: Path,
    eval_file: Path | None,
    task_config: Any,
    nproc_per_node: int = 1,
    settings: Mapping[str, Any] | None = None,
    model_path: str | None = None,
) -> Path:
    """Stages the entrypoint (with its modules), the data and ``run_config.json`` in the run directory for the pods.

    ``nproc_per_node`` (GPUs per node) lets the entrypoint derive the node count from ``WORLD_SIZE`` where the job
    controller injects no ``PET_*`` variables (older Training Operator v1). ``settings`` (:func:`pod_settings`) add
    ``progress``, ``jit_checkpoint`` and ``mlflow``. ``model_path`` is a base model already staged on the workspace
    (an ``oci://`` pull); the pods then load it instead of resolving ``base_model``.

    Returns:
        The config file.
    """
    shutil.copyfile(entrypoint.__file__, run_dir / "entrypoint.py")
    for module, staged in entrypoint.STAGED_MODULES.items():
        shutil.copyfile(importlib.util.find_spec(module).origin, run_dir / f"{staged}.py")
    data_dir = run_dir / "data"
    data_dir.mkdir(exist_ok=True)
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


def _check_workspace_reaches_pods(task_config: Any, run_dir: Path) -> None:
    mounts = [m.get("mountPath", "") for m in (getattr(task_config, "volume_mounts", None) or [])]
    if not any(run_dir.is_relative_to(path) for path in mounts if path):
        raise TrainingConfigError(
            f"train_model (training_launcher=trainjob): the run directory {run_dir} is on no volume passed to the "
            f"TrainJob (task_config.volume_mounts: {mounts}); run it in a pipeline with a workspace and the "
            "KUBERNETES_VOLUMES passthrough, and pass pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER"
        )


def _namespace(params: Mapping[str, Any]) -> str:
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


def build_job_spec(config_path: Path, task_config: Any, run_id: str, task_name: str, params: Mapping[str, Any]) -> Any:
    """The :class:`~.trainjob.TrainJobSpec` running the staged entrypoint (secrets referenced, never copied)."""
    from components.training.finetuning import trainjob

    secret_env = []
    hf_token_secret = params.get("hf_token_secret_name", "hf-token")
    if hf_token_secret:
        secret_env.append(trainjob.SecretEnvVar(HF_TOKEN_KEY, hf_token_secret, HF_TOKEN_KEY, True))
    if params.get("s3_secret_name"):
        secret_env += [trainjob.SecretEnvVar(k, params["s3_secret_name"], k, True) for k in S3_SECRET_KEYS]
    spec = trainjob.spec_from_task_config(
        without_launcher_resources(task_config),
        run_id=run_id,
        task_name=task_name,
        namespace=_namespace(params),
        command=["python", str(config_path.parent / "entrypoint.py")],
        args=["--config", str(config_path)],
        image=params.get("training_image", ""),
        runtime_name=params.get("runtime_name", "training-hub"),
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
    )
    return spec


def build_job_manifest(
    backend: str, config_path: Path, task_config: Any, run_id: str, task_name: str, params: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``TrainJob`` (``backend="trainjob"``) or ``PyTorchJob`` (``backend="pytorchjob"``) running the entrypoint.

    Args:
        backend: ``trainjob`` or ``pytorchjob`` (``auto`` already resolved).
        config_path: The staged ``run_config.json``.
        task_config: The task's ``dsl.TaskConfig`` passthrough.
        run_id: The KFP run id.
        task_name: The KFP task name.
        params: The ``train_model`` parameters.

    Returns:
        The manifest.
    """
    from components.training.finetuning import pytorchjob, trainjob

    spec = build_job_spec(config_path, task_config, run_id, task_name, params)
    if backend == "pytorchjob":
        return pytorchjob.build_pytorchjob(spec)
    return trainjob.build_trainjob(spec)


def build_trainjob_manifest(
    config_path: Path, task_config: Any, run_id: str, task_name: str, params: Mapping[str, Any]
) -> dict[str, Any]:
    """The TrainJob manifest running the staged entrypoint (secrets referenced, never copied)."""
    return build_job_manifest("trainjob", config_path, task_config, run_id, task_name, params)


def resolve_backend(plan: RunPlan, api_client: Any, log: Any) -> str:
    """``trainjob`` or ``pytorchjob``: the ``backend`` parameter, or for ``auto`` what the cluster offers.

    Raises:
        TrainingConfigError: The resolved backend is pytorchjob and ``training_image`` is empty.
        BackendSelectionError: ``auto`` found neither backend usable.
    """
    backend = plan.backend
    if backend == "auto":
        from components.training.finetuning import backends

        params = plan.params
        backend = backends.select_backend(
            api_client,
            params.get("runtime_name", "training-hub"),
            params.get("runtime_kind", "ClusterTrainingRuntime"),
            _namespace(params),
            log=log,
        )
        if backend == "pytorchjob":
            require_training_image("auto", params)
    return backend


def _train_on_cluster(
    plan: RunPlan, api_client: Any, log: Any, options: Mapping[str, Any], settings: Mapping[str, Any] | None = None
) -> Trained:
    from components.training.finetuning import kube

    params = plan.params
    _check_workspace_reaches_pods(plan.task_config, plan.run_dir)
    api_client = api_client or kube.load_api_client()
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
    )
    entrypoint.training_hub_call(json.loads(config_path.read_text()), {}, model_path)  # fails here, not in the pod
    manifest = build_job_manifest(backend, config_path, plan.task_config, plan.run_id, plan.task_name, params)
    name = manifest["metadata"]["name"]
    ckpt_dir = plan.run_dir / "checkpoints"
    log(f"submitting {manifest['kind']} {manifest['metadata']['namespace']}/{name}")
    started = time.perf_counter()
    kube.run_trainjob(
        api_client,
        manifest,
        start_timeout_seconds=params.get("start_timeout_seconds", 1800),
        timeout_seconds=params.get("timeout_seconds", 0),
        cleanup_policy=params.get("cleanup_policy", "delete"),
        delete_on_success=params.get("delete_on_success", False),
        metrics_file=str(ckpt_dir / metrics_module.TRAINING_HUB_METRICS_FILES[plan.config.algorithm]),
        log=log,
        timeout_counts_paused_time=bool(params.get("timeout_counts_paused_time", False)),
        **options,
    )
    records = metrics_module.read_metrics(ckpt_dir)
    seconds = records[-1].get("time") or time.perf_counter() - started
    return Trained(find_final_checkpoint(ckpt_dir), records, seconds, name, model_facts, backend=backend)


def publish_outputs(
    plan: RunPlan, trained: Trained, model: Any, metrics: Any, report: Any, facts: dict[str, str], temporary: str | None
) -> TrainOutcome:
    """Copies the model into the artifact and writes its metadata, the KFP metrics and the HTML report."""
    config, final_dir, backend = plan.config, trained.final_dir, trained.backend or plan.backend
    model_dir = local_backend.replace_dir(
        Path(model.path), lambda staging: shutil.copytree(final_dir, staging, dirs_exist_ok=True)
    )
    # The local backend trains in this task: its run directory is scratch (a temporary directory, or a pipeline
    # workspace that kfp.local deletes when the run ends), so the model artifact is the copy that lasts.
    checkpoint_path = str(model.uri if temporary or backend == "local" else final_dir)
    lora_weights = ""
    if config.algorithm == "lora":
        lora_weights = "adapter" if (final_dir / "adapter_config.json").is_file() else "merged"
    metadata = {
        "checkpoint_path": checkpoint_path,
        "base_model": config.base_model,
        "algorithm": config.algorithm,
        "hyperparameters": config.hyperparameters(),
        **facts,
        "trainjob_name": trained.trainjob_name,
        "backend": backend,
        "model_format": "huggingface",
        "lora_weights": lora_weights,
        **trained.extra_metadata,
    }
    model.metadata.update(mask_data(metadata, patterns=False))
    summary = metrics_module.summarize(trained.records, trained.train_seconds)
    if trained.eval_loss is not None:
        summary["eval_loss"] = float(trained.eval_loss)
    if trained.base_eval_loss is not None:
        summary["base_eval_loss"] = float(trained.base_eval_loss)
    for name, value in summary.items():
        metrics.log_metric(name, value)
    shown = {key: metadata[key] for key in ("base_model", "algorithm", "backend", "checkpoint_path")}
    shown.update(trainjob_name=trained.trainjob_name or "(local backend: no TrainJob)", **facts)
    html = render_report(trained.records, summary, config.hyperparameters(), shown)
    write_text_atomically(Path(with_extension(report, ".html")), html)
    return TrainOutcome(model_dir, checkpoint_path, summary, trained.records, metadata, trained.trainjob_name)
