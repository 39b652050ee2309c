"""The run-time parameters of every fine-tuning pipeline, in dashboard order.

One table serves all six pipelines, so the same concept has the same name everywhere. A parameter's dashboard name
is ``phase_NN_<step>_<man|opt>_<name>``: ``NN`` orders the steps, ``man`` marks what a user must look at, ``opt`` what
has a sensible default. ``<name>`` is the component argument it feeds, so a name stays the same from the pipeline
parameter down to the component and the pure function.
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
        name: The component argument it feeds (and the tail of its dashboard name).
        annotation: Its KFP type (``str``, ``int``, ``float``, ``bool``, ``list`` or ``dict``).
        default: Its default, or :data:`REQUIRED`.
        description: One line shown in the dashboard.
        must_look: ``man`` (True) or ``opt`` (False) in the dashboard name.
        minimal: Whether the minimal flavour exposes it (otherwise it is fixed to its default there).
        algorithms: The algorithms it applies to.
    """

    step: str
    name: str
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
        return f"phase_{STEPS[self.step]:02d}_{self.step}_{kind}_{self.name}"


def _p(step: str, name: str, annotation: type, default: Any, description: str, **flags: Any) -> PipelineParameter:
    return PipelineParameter(step, name, annotation, default, description, **flags)


PARAMETERS: tuple[PipelineParameter, ...] = (
    # phase 01: dataset download + validation
    _p(
        "dataset",
        "dataset_uri",
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
        float,
        0.9,
        "Fraction of rows used for training; the rest is the held-out eval split (1.0 = no eval split).",
    ),
    _p("dataset", "subset_count", int, 0, "Use only this many rows (seeded sample); 0 = all rows."),
    _p("dataset", "seed", int, 42, "Seed of the train/eval split and the subset sample."),
    _p("dataset", "input_format", str, "auto", "auto | messages | alpaca | sharegpt | prompt_completion."),
    _p("dataset", "hf_split", str, "train", "Split to read from a Hugging Face Hub dataset."),
    _p("dataset", "on_invalid", str, "fail", "What to do with rows that break the chat format: fail | drop."),
    _p("dataset", "max_invalid_fraction", float, 0.0, "With on_invalid=drop: fail when more rows than this are bad."),
    _p("dataset", "allow_trailing_user", bool, False, "Accept conversations that end with a user turn."),
    _p("dataset", "tokenizer_source", str, "", "Tokenizer (HF id or path) for token statistics; '' = none."),
    _p("dataset", "max_download_bytes", int, 10737418240, "Refuse downloads larger than this many bytes."),
    # phase 02: training
    _p(
        "train",
        "base_model",
        str,
        "Qwen/Qwen2.5-1.5B-Instruct",
        "Base model: HF id, pvc://claim/path, s3://bucket/prefix or a local path.",
        must_look=True,
        minimal=True,
    ),
    _p("train", "num_epochs", int, 3, "Number of passes over the training split.", minimal=True),
    _p("train", "effective_batch_size", int, 128, "Samples per optimizer step across all GPUs.", minimal=True),
    _p(
        "train",
        "max_tokens_per_gpu",
        int,
        64000,
        "Token budget per GPU per micro-batch; lower it on OOM.",
        minimal=True,
    ),
    _p("train", "learning_rate", float, 5e-6, "Peak learning rate."),
    _p("train", "max_seq_len", int, 8192, "Longest sample in tokens; longer samples are dropped by training."),
    _p("train", "lr_scheduler", str, "cosine", "Learning-rate schedule (e.g. cosine, linear, constant)."),
    _p("train", "warmup_steps", int, 0, "Linear warm-up steps."),
    _p("train", "seed", int, 42, "Training seed."),
    _p(
        "train",
        "unfreeze_rank_ratio",
        float,
        0.25,
        "OSFT: fraction of each weight's singular directions that is trained (the rest stays frozen), in (0, 1].",
        minimal=True,
        algorithms=("osft",),
    ),
    _p("train", "lora_r", int, 16, "LoRA rank.", minimal=True, algorithms=("lora",)),
    _p("train", "lora_alpha", int, 32, "LoRA scaling alpha.", algorithms=("lora",)),
    _p("train", "lora_dropout", float, 0.05, "LoRA dropout.", algorithms=("lora",)),
    _p("train", "use_liger", bool, False, "Use Liger kernels."),
    _p("train", "checkpoint_at_epoch", bool, False, "Save a checkpoint after every epoch."),
    _p("train", "save_final_checkpoint", bool, True, "Save the final model."),
    _p("train", "fsdp_sharding_strategy", str, "FULL_SHARD", "FSDP sharding strategy."),
    _p("train", "resume", bool, True, "Resume from the newest complete checkpoint in the workspace."),
    _p("train", "max_steps", int, 0, "Stop after this many optimizer steps; 0 = no limit."),
    _p(
        "train",
        "checkpoint_interval_steps",
        int,
        0,
        "Save a resumable checkpoint every N steps (and on SIGTERM); 0 = off.",
    ),
    _p(
        "train",
        "mlflow_tracking_uri",
        str,
        "",
        "MLflow tracking URI for params, per-step metrics and the model "
        "location ('' = the MLFLOW_TRACKING_URI env var, or off).",
    ),
    _p(
        "train",
        "backend",
        str,
        "auto",
        "auto (TrainJob when Kubeflow Trainer and the runtime exist, else PyTorchJob) | "
        "trainjob | pytorchjob (Training Operator v1; needs training_image) | local (in-process CPU).",
    ),
    _p("train", "num_nodes", int, 1, "Training nodes (pods).", minimal=True),
    _p("train", "gpus_per_node", int, 1, "GPUs (and training processes) per node.", minimal=True),
    _p("train", "gpu_resource_name", str, "nvidia.com/gpu", "Extended resource name of the GPUs."),
    _p("train", "cpu_per_node", str, "", "CPU request per node (e.g. '8'); '' = the runtime's."),
    _p("train", "memory_per_node", str, "", "Memory request per node (e.g. '64Gi'); '' = the runtime's."),
    _p("train", "runtime_name", str, "training-hub", "Trainer runtime the TrainJob references."),
    _p("train", "runtime_kind", str, "ClusterTrainingRuntime", "ClusterTrainingRuntime | TrainingRuntime."),
    _p("train", "training_image", str, "", "Training image; '' = the runtime's image."),
    _p("train", "namespace", str, "", "Namespace of the TrainJob; '' = the pipeline's namespace."),
    _p("train", "tolerations", list, [], "Tolerations of the training pods (Kubernetes JSON objects)."),
    _p("train", "node_selector", dict, {}, "Node selector of the training pods."),
    _p("train", "pod_labels", dict, {}, "Extra labels of the training pods."),
    _p("train", "pod_annotations", dict, {}, "Extra annotations of the training pods."),
    _p(
        "train", "cleanup_policy", str, "delete", "On failure, timeout or cancel: delete | keep | suspend the TrainJob."
    ),
    _p("train", "delete_on_success", bool, False, "Delete the TrainJob after it succeeds."),
    _p("train", "start_timeout_seconds", int, 1800, "Fail when the training pods are not running after this long."),
    _p("train", "timeout_seconds", int, 0, "Fail (and clean up) after this long in total; 0 = no limit."),
    _p(
        "train",
        "timeout_counts_paused_time",
        bool,
        False,
        "Count time the job spends paused (suspended from the dashboard) against timeout_seconds.",
    ),
    _p(
        "train",
        "progress_tracking",
        bool,
        True,
        "Show training progress (steps, epochs, loss, ETA) on the OpenShift AI Training Jobs page.",
    ),
    _p(
        "train",
        "jit_checkpoint",
        bool,
        True,
        "Save a just-in-time checkpoint when the job is paused or preempted, and resume from it.",
    ),
    # phase 03: evaluation
    _p(
        "eval",
        "task_names",
        list,
        ["arc_easy"],
        "lm-eval tasks; the held-out split is always evaluated too.",
        minimal=True,
    ),
    _p("eval", "batch_size", str, "auto", "lm-eval batch size (auto or an integer)."),
    _p("eval", "limit", int, -1, "Samples per task; -1 = all."),
    _p("eval", "num_fewshot", int, -1, "Few-shot examples; -1 = the task's default."),
    _p("eval", "gen_kwargs", dict, {}, 'Generation arguments (e.g. {"temperature": 0}).'),
    _p("eval", "model_args", dict, {}, 'Extra model arguments of the lm-eval backend (e.g. {"dtype": "bfloat16"}).'),
    _p("eval", "apply_chat_template", bool, True, "Format prompts with the model's chat template."),
    _p("eval", "backend", str, "hf", "lm-eval model backend: hf | vllm (when in the image)."),
    _p("eval", "seed", int, 42, "Evaluation seed."),
    _p("eval", "log_samples", bool, False, "Keep per-sample outputs in the results artifact."),
    _p("eval", "max_samples", int, 200, "Held-out split: evaluate at most this many conversations."),
    _p("eval", "max_new_tokens", int, 64, "Held-out split: longest generated answer."),
    _p("eval", "device", str, "", "Device for lm-eval (e.g. cuda:0, cpu); '' = a GPU when visible."),
    _p("eval", "bootstrap_iters", int, 100000, "Bootstrap iterations for metric stderr (0 = no stderr)."),
    _p(
        "eval",
        "allow_empty_eval_dataset",
        bool,
        True,
        "Skip the held-out tasks when the eval split is empty (train_split_ratio 1.0) instead of failing.",
    ),
    # phase 04: registration
    _p(
        "registry",
        "registry_address",
        str,
        "",
        "Model Registry host (e.g. the route of the registry service); '' = skip registration.",
        minimal=True,
    ),
    _p("registry", "registry_port", int, 443, "Model Registry port."),
    _p("registry", "model_name", str, "", "Registered model name.", minimal=True),
    _p("registry", "model_version", str, "", "Version name; '' = derived from the run.", minimal=True),
    _p("registry", "author", str, "", "Author recorded on the version."),
    _p("registry", "description", str, "", "Description recorded on the version."),
    _p("registry", "model_format_name", str, "pytorch", "Model format name (for serving)."),
    _p("registry", "model_format_version", str, "1", "Model format version."),
    _p("registry", "min_metric_name", str, "", "Gate: register only when this metric meets min_metric_value."),
    _p("registry", "min_metric_value", float, 0.0, "Gate threshold."),
    _p("registry", "model_uri", str, "", "Serving URI to register; '' = derived (pvc:// or the S3 upload)."),
    _p("registry", "s3_upload_prefix", str, "", "s3://bucket/prefix to upload the model to before registering."),
    _p(
        "registry",
        "storage_key",
        str,
        "",
        "Data-connection name recorded on the registered artifact (storageKey), so serving finds the S3 credentials.",
    ),
    _p("registry", "is_secure", bool, True, "Verify the registry's TLS certificate."),
)


def parameters_for(algorithm: str, flavor: str) -> list[PipelineParameter]:
    """The parameters a pipeline exposes, in dashboard order.

    Args:
        algorithm: ``sft``, ``osft`` or ``lora``.
        flavor: ``expert`` (every knob) or ``minimal`` (the few that matter).

    Returns:
        The exposed parameters.

    Raises:
        ValueError: Unknown algorithm or flavor.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    if flavor not in FLAVORS:
        raise ValueError(f"flavor must be one of {FLAVORS}, got {flavor!r}")
    selected = [p for p in PARAMETERS if algorithm in p.algorithms and (flavor == "expert" or p.minimal)]
    return sorted(selected, key=lambda p: (STEPS[p.step], not p.must_look, PARAMETERS.index(p)))


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
