"""The run-time parameters of every fine-tuning pipeline, in dashboard order.

One table serves all six pipelines, so the same concept has the same name everywhere. A parameter's dashboard name
is ``phase_NN_<step>_<man|opt>_<short>`` (the RHOAI fine-tuning guide's scheme: ``phase_01_dataset_man_data_uri``,
``phase_02_train_man_train_model``, ...): ``NN`` orders the steps, ``man`` marks what a user must look at, ``opt``
what has a sensible default. Each row names the component argument it feeds, so a parameter can be followed from the
dashboard to the component.

A row states only what the pipelines decide: the dashboard name, ``man``/``opt``, whether the minimal flavor exposes
it, and the algorithms it applies to. Its type, default and description are the component's own (its signature and
``parameter_docs.py``, read by :mod:`.component_parameters`); the only pipeline defaults that differ from the
component's are declared here, in :data:`PIPELINE_DEFAULTS` (every pipeline) and :data:`ALGORITHM_DEFAULTS` (per
algorithm: the guide's hardware table — SFT: 4 nodes x 1 GPU, 4 CPU and 64Gi per pod, with
``INSTRUCTLAB_NCCL_TIMEOUT_MS``; OSFT and LoRA: 1 node x 1 GPU, 8 CPU, 32Gi — and the learning rates), and in a
pipeline module's own declaration. ``tests/test_parameter_sources.py`` fails on any other difference.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pipelines.training.finetuning.component_parameters import REQUIRED, ComponentParameter, component_parameters

ALGORITHMS = ("sft", "osft", "lora")
FLAVORS = ("expert", "minimal")
STEPS = {"dataset": 1, "train": 2, "eval": 3, "registry": 4}
#: The default of a row that does not declare its own: the component's.
_COMPONENT_DEFAULT = object()

__all__ = ["ALGORITHM_DEFAULTS", "PARAMETERS", "PIPELINE_DEFAULTS", "REQUIRED", "PipelineParameter", "parameters_for"]


@dataclasses.dataclass(frozen=True)
class PipelineParameter:
    """One run-time parameter of the fine-tuning pipelines.

    Attributes:
        step: The pipeline step (component) it configures: ``dataset``, ``train``, ``eval`` or ``registry``.
        name: The component argument it feeds.
        short: The tail of its dashboard name (the RHOAI guide's names, e.g. ``train_model``).
        must_look: ``man`` (True) or ``opt`` (False) in the dashboard name.
        minimal: Whether the minimal flavour exposes it (otherwise it is fixed to its default there).
        algorithms: The algorithms it applies to.
        declared_default: A default the pipelines declare instead of the component's (see :func:`with_defaults`).
    """

    step: str
    name: str
    short: str
    must_look: bool = False
    minimal: bool = False
    algorithms: tuple[str, ...] = ALGORITHMS
    declared_default: Any = _COMPONENT_DEFAULT

    @property
    def dashboard_name(self) -> str:
        """``phase_NN_<step>_<man|opt>_<name>``."""
        kind = "man" if self.must_look else "opt"
        return f"phase_{STEPS[self.step]:02d}_{self.step}_{kind}_{self.short}"

    @property
    def component_parameter(self) -> ComponentParameter:
        """The component's declaration of this parameter (type, default, description)."""
        try:
            return component_parameters(self.step)[self.name]
        except KeyError:
            raise LookupError(f"the {self.step} component has no plain parameter {self.name!r}") from None

    @property
    def annotation(self) -> type:
        """Its KFP type (``str``, ``int``, ``float``, ``bool``, ``list`` or ``dict``), from the component."""
        return self.component_parameter.annotation

    @property
    def default(self) -> Any:
        """The declared default, else the component's (or :data:`REQUIRED`)."""
        if self.declared_default is _COMPONENT_DEFAULT:
            return self.component_parameter.default
        return self.declared_default

    @property
    def description(self) -> str:
        """The component's description, shown in the dashboard."""
        return self.component_parameter.description


def _p(step: str, name: str, short: str, **flags: Any) -> PipelineParameter:
    return PipelineParameter(step, name, short, **flags)


#: A parameter a user must look at, exposed by the minimal flavor too.
MAN_MIN = {"must_look": True, "minimal": True}


PARAMETERS: tuple[PipelineParameter, ...] = (
    # phase 01: dataset download + validation
    _p("dataset", "dataset_uri", "data_uri", **MAN_MIN),
    _p("dataset", "train_split_ratio", "data_split", must_look=True),
    _p("dataset", "subset_count", "subset"),
    _p("dataset", "seed", "seed"),
    _p("dataset", "input_format", "format"),
    _p("dataset", "hf_split", "hf_split"),
    _p("dataset", "on_invalid", "on_invalid"),
    _p("dataset", "max_invalid_fraction", "max_invalid_fraction"),
    _p("dataset", "allow_trailing_user", "allow_trailing_user"),
    _p("dataset", "tokenizer_source", "tokenizer"),
    _p("dataset", "max_download_bytes", "max_download_bytes"),
    # phase 02: training
    _p("train", "training_base_model", "train_model", **MAN_MIN),
    _p("train", "training_num_epochs", "train_epochs", **MAN_MIN),
    _p("train", "training_effective_batch_size", "train_batch", **MAN_MIN),
    _p("train", "training_max_tokens_per_gpu", "train_tokens", **MAN_MIN),
    _p("train", "training_num_nodes", "train_workers", **MAN_MIN),
    _p("train", "training_gpus_per_node", "train_gpu", **MAN_MIN),
    _p("train", "training_unfreeze_rank_ratio", "train_unfreeze", **MAN_MIN, algorithms=("osft",)),
    _p("train", "training_lora_r", "train_lora_r", **MAN_MIN, algorithms=("lora",)),
    _p("train", "training_learning_rate", "learning_rate"),
    _p("train", "training_max_seq_len", "max_seq_len"),
    _p("train", "training_lr_scheduler", "lr_scheduler"),
    _p("train", "training_warmup_steps", "lr_warmup"),
    _p("train", "training_seed", "seed"),
    _p("train", "training_lora_alpha", "lora_alpha", algorithms=("lora",)),
    _p("train", "training_lora_dropout", "lora_dropout", algorithms=("lora",)),
    _p("train", "training_use_liger", "use_liger"),
    _p("train", "training_checkpoint_at_epoch", "save_epoch"),
    _p("train", "training_save_final_checkpoint", "save_final"),
    _p("train", "training_fsdp_sharding_strategy", "fsdp_sharding"),
    _p("train", "training_resume", "resume"),
    _p("train", "training_max_steps", "max_steps"),
    _p("train", "training_checkpoint_interval_steps", "checkpoint_interval"),
    _p("train", "training_mlflow_tracking_uri", "mlflow_uri"),
    _p("train", "training_launcher", "launcher"),
    _p("train", "training_oci_insecure", "oci_insecure"),
    _p("train", "training_oci_ca_bundle", "oci_ca_bundle"),
    _p("train", "training_backend", "backend"),
    _p("train", "training_gpu_resource_name", "gpu_resource"),
    _p("train", "training_cpu_per_node", "cpu"),
    _p("train", "training_memory_per_node", "memory"),
    _p("train", "training_env_vars", "env_vars"),
    _p("train", "training_runtime_name", "runtime"),
    _p("train", "training_runtime_kind", "runtime_kind"),
    _p("train", "training_image", "image"),
    _p("train", "training_namespace", "namespace"),
    _p("train", "training_tolerations", "tolerations"),
    _p("train", "training_node_selector", "node_selector"),
    _p("train", "training_pod_labels", "labels"),
    _p("train", "training_pod_annotations", "annotations"),
    _p("train", "training_queue_name", "queue_name"),
    _p("train", "training_cleanup_policy", "cleanup_policy"),
    _p("train", "training_delete_on_success", "delete_on_success"),
    _p("train", "training_start_timeout_seconds", "start_timeout"),
    _p("train", "training_timeout_seconds", "timeout"),
    _p("train", "training_timeout_counts_paused_time", "timeout_counts_pause"),
    _p("train", "training_progress_tracking", "progress_tracking"),
    _p("train", "training_progress_metrics_port", "progress_port"),
    _p("train", "training_progress_poll_interval_seconds", "progress_poll_interval"),
    _p("train", "training_jit_checkpoint", "jit_checkpoint"),
    # phase 03: evaluation
    _p("eval", "task_names", "eval_tasks", **MAN_MIN),
    _p("eval", "batch_size", "batch"),
    _p("eval", "limit", "limit"),
    _p("eval", "num_fewshot", "num_fewshot"),
    _p("eval", "gen_kwargs", "gen_kwargs"),
    _p("eval", "model_args", "model_args"),
    _p("eval", "apply_chat_template", "chat_template"),
    _p("eval", "backend", "backend"),
    _p("eval", "seed", "seed"),
    _p("eval", "log_samples", "log_samples"),
    _p("eval", "max_samples", "heldout_samples"),
    _p("eval", "max_new_tokens", "max_new_tokens"),
    _p("eval", "device", "device"),
    _p("eval", "bootstrap_iters", "bootstrap_iters"),
    _p("eval", "allow_empty_eval_dataset", "allow_empty_eval"),
    # feeds only the base model's evaluation (beside training); the fine-tuned evaluation always runs
    _p("eval", "enabled", "evaluate_base_model", minimal=True),
    # phase 04: registration
    _p("registry", "registry_address", "address", **MAN_MIN),
    _p("registry", "model_name", "reg_name", **MAN_MIN),
    _p("registry", "model_version", "reg_version", **MAN_MIN),
    _p("registry", "author", "reg_author", must_look=True),
    _p("registry", "registry_port", "port"),
    _p("registry", "description", "description"),
    _p("registry", "model_format_name", "format_name"),
    _p("registry", "model_format_version", "format_version"),
    _p("registry", "min_metric_name", "min_metric_name"),
    _p("registry", "min_metric_value", "min_metric_value"),
    _p("registry", "min_improvement_metric", "min_improvement_metric"),
    _p("registry", "min_improvement", "min_improvement"),
    _p("registry", "max_regression", "max_regression"),
    _p("registry", "max_regression_relative", "max_regression_relative"),
    _p("registry", "model_uri", "model_uri"),
    _p("registry", "s3_upload_prefix", "s3_upload_prefix"),
    _p("registry", "storage_key", "storage_key"),
    _p("registry", "is_secure", "is_secure"),
    _p("registry", "allow_token_over_http", "allow_token_over_http"),
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
#: Defaults every pipeline sets unlike its component (``"<step>.<name>"`` keys): the component stays neutral (no
#: benchmark unless asked, an empty held-out split is an error), while a pipeline evaluates one small benchmark and
#: accepts ``train_split_ratio`` 1.0 (no held-out split).
PIPELINE_DEFAULTS: dict[str, Any] = {
    "eval.task_names": ["arc_easy"],
    "eval.allow_empty_eval_dataset": True,
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
        The exposed parameters, with the pipelines' declared defaults (:data:`PIPELINE_DEFAULTS`,
        :data:`ALGORITHM_DEFAULTS`).

    Raises:
        ValueError: Unknown algorithm or flavor.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    if flavor not in FLAVORS:
        raise ValueError(f"flavor must be one of {FLAVORS}, got {flavor!r}")
    selected = [p for p in PARAMETERS if algorithm in p.algorithms and (flavor == "expert" or p.minimal)]
    selected = with_defaults(selected, {**PIPELINE_DEFAULTS, **ALGORITHM_DEFAULTS[algorithm]})
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
    return [
        dataclasses.replace(p, declared_default=defaults[f"{p.step}.{p.name}"])
        if f"{p.step}.{p.name}" in defaults
        else p
        for p in parameters
    ]
