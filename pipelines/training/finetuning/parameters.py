"""The run-time parameters of every fine-tuning pipeline, in dashboard order.

One table serves all six pipelines, so the same concept has the same name everywhere. A parameter's dashboard name
is ``phase_NN_<step>_<man|opt>_<short>`` (the RHOAI fine-tuning guide's scheme: ``phase_01_dataset_man_data_uri``,
``phase_02_train_man_train_model``, ...): ``NN`` orders the steps, ``man`` marks what a user must look at, ``opt``
what has a sensible default. Each row also names the component argument it feeds, so a parameter can be followed
from the dashboard to the component.

:data:`ALGORITHM_DEFAULTS` holds the defaults that differ per algorithm: the guide's hardware table (SFT: 4 nodes x 1
GPU, 4 CPU and 64Gi per pod, with ``INSTRUCTLAB_NCCL_TIMEOUT_MS``; OSFT and LoRA: 1 node x 1 GPU, 8 CPU, 32Gi) and
the learning rates.
"""

from __future__ import annotations

import dataclasses
from typing import Any

ALGORITHMS = ("sft", "osft", "lora")
FLAVORS = ("expert", "minimal")
STEPS = {"dataset": 1, "train": 2, "eval": 3, "registry": 4}
#: Marker for a parameter without default (the dashboard requires a value).
REQUIRED = object()


@dataclasses.dataclass(frozen=True)
class PipelineParameter:
    """One run-time parameter of the fine-tuning pipelines.

    Attributes:
        step: The pipeline step (component) it configures: ``dataset``, ``train``, ``eval`` or ``registry``.
        name: The component argument it feeds.
        short: The tail of its dashboard name (the RHOAI guide's names, e.g. ``train_model``).
        annotation: Its KFP type (``str``, ``int``, ``float``, ``bool``, ``list`` or ``dict``).
        default: Its default, or :data:`REQUIRED`.
        description: One line shown in the dashboard.
        must_look: ``man`` (True) or ``opt`` (False) in the dashboard name.
        minimal: Whether the minimal flavour exposes it (otherwise it is fixed to its default there).
        algorithms: The algorithms it applies to.
    """

    step: str
    name: str
    short: str
    annotation: type
    default: Any
    description: str
    must_look: bool = False
    minimal: bool = False
    algorithms: tuple[str, ...] = ALGORITHMS

    @property
    def dashboard_name(self) -> str:
        """``phase_NN_<step>_<man|opt>_<name>``."""
        kind = "man" if self.must_look else "opt"
        return f"phase_{STEPS[self.step]:02d}_{self.step}_{kind}_{self.short}"


def _p(
    step: str, name: str, short: str, annotation: type, default: Any, description: str, **flags: Any
) -> PipelineParameter:
    return PipelineParameter(step, name, short, annotation, default, description, **flags)


#: A parameter a user must look at, exposed by the minimal flavor too.
MAN_MIN = {"must_look": True, "minimal": True}


PARAMETERS: tuple[PipelineParameter, ...] = (
    # phase 01: dataset download + validation
    _p(
        "dataset",
        "dataset_uri",
        "data_uri",
        str,
        REQUIRED,
        "Training data: HF Hub 'org/name[:subset][@revision]', s3://bucket/key, http(s)://..., pvc://claim/path or a "
        "local path; jsonl/json/parquet/csv rows in chat 'messages' (or alpaca/sharegpt/prompt-completion) form.",
        must_look=True,
        minimal=True,
    ),
    _p(
        "dataset",
        "train_split_ratio",
        "data_split",
        float,
        0.9,
        "Fraction of rows used for training; the rest is the held-out eval split (1.0 = no eval split).",
        must_look=True,
    ),
    _p("dataset", "subset_count", "subset", int, 0, "Use only this many rows (seeded sample); 0 = all rows."),
    _p("dataset", "seed", "seed", int, 42, "Seed of the train/eval split and the subset sample."),
    _p("dataset", "input_format", "format", str, "auto", "auto | messages | alpaca | sharegpt | prompt_completion."),
    _p("dataset", "hf_split", "hf_split", str, "train", "Split to read from a Hugging Face Hub dataset."),
    _p(
        "dataset",
        "on_invalid",
        "on_invalid",
        str,
        "fail",
        "What to do with rows that break the chat format: fail | drop.",
    ),
    _p(
        "dataset",
        "max_invalid_fraction",
        "max_invalid_fraction",
        float,
        0.0,
        "With on_invalid=drop: fail when more rows than this are bad.",
    ),
    _p(
        "dataset",
        "allow_trailing_user",
        "allow_trailing_user",
        bool,
        False,
        "Accept conversations that end with a user turn.",
    ),
    _p(
        "dataset",
        "tokenizer_source",
        "tokenizer",
        str,
        "",
        "Tokenizer (HF id or path) for token statistics; '' = none.",
    ),
    _p(
        "dataset",
        "max_download_bytes",
        "max_download_bytes",
        int,
        10737418240,
        "Refuse downloads larger than this many bytes.",
    ),
    # phase 02: training
    _p(
        "train",
        "training_base_model",
        "train_model",
        str,
        "Qwen/Qwen2.5-1.5B-Instruct",
        "Base model: HF id, oci://registry/repo:tag (a modelcar image, pulled with the oci-pull-secret-model-download "
        "secret), pvc://claim/path, s3://bucket/prefix or a local path.",
        must_look=True,
        minimal=True,
    ),
    _p("train", "training_num_epochs", "train_epochs", int, 3, "Number of passes over the training split.", **MAN_MIN),
    _p(
        "train",
        "training_effective_batch_size",
        "train_batch",
        int,
        128,
        "Samples per optimizer step across all GPUs (effective batch size).",
        **MAN_MIN,
    ),
    _p(
        "train",
        "training_max_tokens_per_gpu",
        "train_tokens",
        int,
        64000,
        "Max tokens per GPU per micro-batch (memory cap); lower it on OOM.",
        **MAN_MIN,
    ),
    _p("train", "training_num_nodes", "train_workers", int, 1, "Training nodes (pods).", **MAN_MIN),
    _p("train", "training_gpus_per_node", "train_gpu", int, 1, "GPUs (and training processes) per node.", **MAN_MIN),
    _p(
        "train",
        "training_unfreeze_rank_ratio",
        "train_unfreeze",
        float,
        0.25,
        "OSFT: fraction of each weight's singular directions that is trained (the rest stays frozen), in (0, 1].",
        algorithms=("osft",),
        **MAN_MIN,
    ),
    _p("train", "training_lora_r", "train_lora_r", int, 16, "LoRA rank.", algorithms=("lora",), **MAN_MIN),
    _p("train", "training_learning_rate", "learning_rate", float, 5e-6, "Peak learning rate."),
    _p(
        "train",
        "training_max_seq_len",
        "max_seq_len",
        int,
        8192,
        "Longest sample in tokens; longer samples are dropped by training.",
    ),
    _p(
        "train",
        "training_lr_scheduler",
        "lr_scheduler",
        str,
        "cosine",
        "Learning-rate schedule (e.g. cosine, linear, constant).",
    ),
    _p("train", "training_warmup_steps", "lr_warmup", int, 0, "Linear warm-up steps."),
    _p("train", "training_seed", "seed", int, 42, "Training seed."),
    _p("train", "training_lora_alpha", "lora_alpha", int, 32, "LoRA scaling alpha.", algorithms=("lora",)),
    _p("train", "training_lora_dropout", "lora_dropout", float, 0.05, "LoRA dropout.", algorithms=("lora",)),
    _p("train", "training_use_liger", "use_liger", bool, False, "Use Liger kernels."),
    _p("train", "training_checkpoint_at_epoch", "save_epoch", bool, False, "Save a checkpoint after every epoch."),
    _p("train", "training_save_final_checkpoint", "save_final", bool, True, "Save the final model."),
    _p("train", "training_fsdp_sharding_strategy", "fsdp_sharding", str, "FULL_SHARD", "FSDP sharding strategy."),
    _p(
        "train", "training_resume", "resume", bool, True, "Resume from the newest complete checkpoint in the workspace."
    ),
    _p("train", "training_max_steps", "max_steps", int, 0, "Stop after this many optimizer steps; 0 = no limit."),
    _p(
        "train",
        "training_checkpoint_interval_steps",
        "checkpoint_interval",
        int,
        0,
        "Save a resumable checkpoint every N steps (and on SIGTERM); 0 = off.",
    ),
    _p(
        "train",
        "training_mlflow_tracking_uri",
        "mlflow_uri",
        str,
        "",
        "MLflow tracking URI for params, per-step metrics and the model "
        "location ('' = the MLFLOW_TRACKING_URI env var, or off).",
    ),
    _p(
        "train",
        "training_launcher",
        "launcher",
        str,
        "auto",
        "auto (TrainJob when Kubeflow Trainer and the runtime exist, else PyTorchJob) | "
        "trainjob | pytorchjob (Training Operator v1; needs the image) | local (in-process CPU).",
    ),
    _p(
        "train",
        "training_oci_insecure",
        "oci_insecure",
        bool,
        False,
        "oci:// base model: skip TLS verification and allow plain HTTP (in-cluster registries only).",
    ),
    _p(
        "train",
        "training_oci_ca_bundle",
        "oci_ca_bundle",
        str,
        "",
        "oci:// base model: CA bundle (PEM path in the task, or PEM text) for the registry's TLS; '' = system CAs.",
    ),
    _p(
        "train",
        "training_backend",
        "backend",
        str,
        "",
        "Training Hub backend (instructlab-training for SFT, mini-trainer for OSFT); '' = the algorithm's default.",
    ),
    _p(
        "train",
        "training_gpu_resource_name",
        "gpu_resource",
        str,
        "nvidia.com/gpu",
        "Extended resource name of the GPUs.",
    ),
    _p(
        "train", "training_cpu_per_node", "cpu", str, "", "CPU request per training pod (e.g. '8'); '' = the runtime's."
    ),
    _p(
        "train",
        "training_memory_per_node",
        "memory",
        str,
        "",
        "Memory request per training pod (e.g. '32Gi'); '' = the runtime's.",
    ),
    _p(
        "train",
        "training_env_vars",
        "env_vars",
        dict,
        {},
        "Extra environment variables of the training pods (no secrets).",
    ),
    _p("train", "training_runtime_name", "runtime", str, "training-hub", "Trainer runtime the TrainJob references."),
    _p(
        "train",
        "training_runtime_kind",
        "runtime_kind",
        str,
        "ClusterTrainingRuntime",
        "ClusterTrainingRuntime | TrainingRuntime.",
    ),
    _p(
        "train",
        "training_image",
        "image",
        str,
        "",
        "Training image; '' = the runtime's image (required for PyTorchJob).",
    ),
    _p(
        "train",
        "training_namespace",
        "namespace",
        str,
        "",
        "Namespace of the training job; '' = the pipeline's namespace.",
    ),
    _p(
        "train",
        "training_tolerations",
        "tolerations",
        list,
        [],
        "Tolerations of the training pods (Kubernetes JSON objects).",
    ),
    _p("train", "training_node_selector", "node_selector", dict, {}, "Node selector of the training pods."),
    _p("train", "training_pod_labels", "labels", dict, {}, "Extra labels of the training pods."),
    _p("train", "training_pod_annotations", "annotations", dict, {}, "Extra annotations of the training pods."),
    _p(
        "train",
        "training_queue_name",
        "queue_name",
        str,
        "",
        "Kueue LocalQueue to submit the training job to (kueue.x-k8s.io/queue-name); Kueue admits it. '' = no queue.",
    ),
    _p(
        "train",
        "training_cleanup_policy",
        "cleanup_policy",
        str,
        "delete",
        "On any failure after submission (error, timeout, cancel): delete | keep | suspend the training job.",
    ),
    _p(
        "train",
        "training_delete_on_success",
        "delete_on_success",
        bool,
        False,
        "Delete the training job after it succeeds.",
    ),
    _p(
        "train",
        "training_start_timeout_seconds",
        "start_timeout",
        int,
        1800,
        "Fail when the training pods are not running after this many seconds.",
    ),
    _p(
        "train",
        "training_timeout_seconds",
        "timeout",
        int,
        0,
        "Fail (and clean up) after this many seconds in total; 0 = no limit.",
    ),
    _p(
        "train",
        "training_timeout_counts_paused_time",
        "timeout_counts_pause",
        bool,
        False,
        "Count time the job spends paused (suspended from the dashboard) against the timeout.",
    ),
    _p(
        "train",
        "training_progress_tracking",
        "progress_tracking",
        bool,
        True,
        "Show training progress (steps, epochs, loss, ETA) on the OpenShift AI Training Jobs page.",
    ),
    _p(
        "train",
        "training_progress_metrics_port",
        "progress_port",
        int,
        28080,
        "Port of the rank-0 training pod's progress server (1024-65535).",
    ),
    _p(
        "train",
        "training_progress_poll_interval_seconds",
        "progress_poll_interval",
        int,
        30,
        "Seconds between the dashboard controller's progress polls (5-300).",
    ),
    _p(
        "train",
        "training_jit_checkpoint",
        "jit_checkpoint",
        bool,
        True,
        "Save a just-in-time checkpoint when the job is paused or preempted, and resume from it.",
    ),
    # phase 03: evaluation
    _p(
        "eval",
        "task_names",
        "eval_tasks",
        list,
        ["arc_easy"],
        "lm-eval tasks; the held-out split is always evaluated too.",
        **MAN_MIN,
    ),
    _p("eval", "batch_size", "batch", str, "auto", "lm-eval batch size (auto or an integer)."),
    _p("eval", "limit", "limit", int, -1, "Samples per task; -1 = all."),
    _p("eval", "num_fewshot", "num_fewshot", int, -1, "Few-shot examples; -1 = the task's default."),
    _p("eval", "gen_kwargs", "gen_kwargs", dict, {}, 'Generation arguments (e.g. {"temperature": 0}).'),
    _p(
        "eval",
        "model_args",
        "model_args",
        dict,
        {},
        'Extra model arguments of the lm-eval backend (e.g. {"dtype": "bfloat16"}).',
    ),
    _p("eval", "apply_chat_template", "chat_template", bool, True, "Format prompts with the model's chat template."),
    _p("eval", "backend", "backend", str, "hf", "lm-eval model backend: hf | vllm (when in the image)."),
    _p("eval", "seed", "seed", int, 42, "Evaluation seed."),
    _p("eval", "log_samples", "log_samples", bool, False, "Keep per-sample outputs in the results artifact."),
    _p("eval", "max_samples", "heldout_samples", int, 200, "Held-out split: evaluate at most this many conversations."),
    _p("eval", "max_new_tokens", "max_new_tokens", int, 64, "Held-out split: longest generated answer."),
    _p("eval", "device", "device", str, "", "Device for lm-eval (e.g. cuda:0, cpu); '' = a GPU when visible."),
    _p(
        "eval",
        "bootstrap_iters",
        "bootstrap_iters",
        int,
        100000,
        "Bootstrap iterations for metric stderr (0 = no stderr).",
    ),
    _p(
        "eval",
        "allow_empty_eval_dataset",
        "allow_empty_eval",
        bool,
        True,
        "Skip the held-out tasks when the eval split is empty (train_split_ratio 1.0) instead of failing.",
    ),
    # phase 04: registration
    _p(
        "registry",
        "registry_address",
        "address",
        str,
        "",
        "Model Registry host (e.g. the route of the registry service); '' = skip registration.",
        **MAN_MIN,
    ),
    _p(
        "registry",
        "model_name",
        "reg_name",
        str,
        "",
        "Registered model name (required when an address is set).",
        **MAN_MIN,
    ),
    _p("registry", "model_version", "reg_version", str, "", "Version name; '' = derived from the run.", **MAN_MIN),
    _p("registry", "author", "reg_author", str, "", "Author recorded on the version.", must_look=True),
    _p("registry", "registry_port", "port", int, 443, "Model Registry port."),
    _p("registry", "description", "description", str, "", "Description recorded on the version."),
    _p("registry", "model_format_name", "format_name", str, "pytorch", "Model format name (for serving)."),
    _p("registry", "model_format_version", "format_version", str, "1", "Model format version."),
    _p(
        "registry",
        "min_metric_name",
        "min_metric_name",
        str,
        "",
        "Gate: register only when this metric meets min_metric_value.",
    ),
    _p("registry", "min_metric_value", "min_metric_value", float, 0.0, "Gate threshold."),
    _p(
        "registry",
        "model_uri",
        "model_uri",
        str,
        "",
        "Serving URI to register; '' = derived (pvc:// or the S3 upload).",
    ),
    _p(
        "registry",
        "s3_upload_prefix",
        "s3_upload_prefix",
        str,
        "",
        "s3://bucket/prefix to upload the model to before registering.",
    ),
    _p(
        "registry",
        "storage_key",
        "storage_key",
        str,
        "",
        "Data-connection name recorded on the registered artifact (storageKey), so serving finds the S3 credentials.",
    ),
    _p("registry", "is_secure", "is_secure", bool, True, "Verify the registry's TLS certificate."),
    _p(
        "registry",
        "allow_token_over_http",
        "allow_token_over_http",
        bool,
        False,
        "Send the bearer token to a plain http:// registry address (withheld otherwise; trusted networks only).",
    ),
)


#: instructlab-training (Training Hub's SFT backend) falls back to torch's default collective timeout (10 minutes)
#: when ``INSTRUCTLAB_NCCL_TIMEOUT_MS`` is unset; SFT pipelines set that value explicitly so that it shows in the
#: dashboard and can be raised for slow multi-node networks.
NCCL_TIMEOUT_ENV = {"INSTRUCTLAB_NCCL_TIMEOUT_MS": "600000"}
_ONE_NODE = {
    "train.training_num_nodes": 1,
    "train.training_gpus_per_node": 1,
    "train.training_cpu_per_node": "8",
    "train.training_memory_per_node": "32Gi",
}
#: Defaults that differ per algorithm (``"<step>.<name>"`` keys), from the guide's hardware table.
ALGORITHM_DEFAULTS: dict[str, dict[str, Any]] = {
    "sft": {
        "train.training_learning_rate": 2e-05,
        "train.training_num_nodes": 4,
        "train.training_gpus_per_node": 1,
        "train.training_cpu_per_node": "4",
        "train.training_memory_per_node": "64Gi",
        "train.training_env_vars": NCCL_TIMEOUT_ENV,
    },
    "osft": dict(_ONE_NODE),
    "lora": {**_ONE_NODE, "train.training_learning_rate": 0.0002},
}


def parameters_for(algorithm: str, flavor: str) -> list[PipelineParameter]:
    """The parameters a pipeline exposes, in dashboard order.

    Args:
        algorithm: ``sft``, ``osft`` or ``lora``.
        flavor: ``expert`` (every knob) or ``minimal`` (the few that matter).

    Returns:
        The exposed parameters, with the algorithm's defaults (:data:`ALGORITHM_DEFAULTS`).

    Raises:
        ValueError: Unknown algorithm or flavor.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    if flavor not in FLAVORS:
        raise ValueError(f"flavor must be one of {FLAVORS}, got {flavor!r}")
    selected = [p for p in PARAMETERS if algorithm in p.algorithms and (flavor == "expert" or p.minimal)]
    selected = with_defaults(selected, ALGORITHM_DEFAULTS[algorithm])
    order = {(p.step, p.name): index for index, p in enumerate(PARAMETERS)}
    return sorted(selected, key=lambda p: (STEPS[p.step], not p.must_look, order[p.step, p.name]))


def with_defaults(parameters: list[PipelineParameter], defaults: dict[str, Any]) -> list[PipelineParameter]:
    """Returns ``parameters`` with some defaults replaced.

    Args:
        parameters: Parameters from :func:`parameters_for`.
        defaults: ``{"<step>.<name>": value}`` overrides declared by a pipeline module.

    Raises:
        ValueError: An override names no parameter of the table.
    """
    known = {f"{p.step}.{p.name}" for p in PARAMETERS}
    unknown = sorted(set(defaults) - known)
    if unknown:
        raise ValueError(f"unknown parameter default(s) {unknown}; use '<step>.<name>' from {sorted(known)[:5]}...")
    return [dataclasses.replace(p, default=defaults.get(f"{p.step}.{p.name}", p.default)) for p in parameters]
