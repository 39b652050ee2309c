"""``train_model``'s request (:class:`TrainModelRequest`) and the validated training setup (:class:`TrainingConfig`).

The request has one field per component parameter, without defaults (they live once, in the component's signature);
the configuration is the pod contract's :class:`~.pod.run_config.Hyperparameters` plus ``base_model``, validated once
before anything trains or is submitted.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from components._common.arguments import require_arguments
from components.training.finetuning.pod.run_config import Hyperparameters, has_field_type

ALGORITHMS = ("sft", "osft", "lora", "grpo", "lora_grpo")
#: The reinforcement-learning algorithms (GRPO: a prompt dataset with a verifiable reward, not chat rows).
GRPO_ALGORITHMS = ("grpo", "lora_grpo")
#: The algorithms that train LoRA adapters (their LoRA settings apply).
LORA_ALGORITHMS = ("lora", "lora_grpo")
#: ``auto`` resolves to ``trainjob`` or ``pytorchjob`` by discovery (:func:`.cluster.launchers.select_launcher`).
LAUNCHERS = ("trainjob", "local", "pytorchjob", "auto")
#: The launchers that run the training in cluster pods.
CLUSTER_LAUNCHERS = ("trainjob", "pytorchjob", "auto")
#: Scheduler names accepted by both the local launcher (``transformers.get_scheduler``) and Training Hub's backends.
LR_SCHEDULERS = ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup")
#: Training Hub's backends per algorithm (training-hub 0.11.2); ``backend=""`` takes the first.
HUB_BACKENDS = {
    "sft": ("instructlab-training",),
    "osft": ("mini-trainer",),
    "lora": ("unsloth",),
    "grpo": ("verl",),  # training_hub.grpo: verl only (full fine-tuning)
    "lora_grpo": ("verl", "art"),  # training_hub.lora_grpo's default is verl; art: one GPU with co-located vLLM
}
#: peft's ``init_lora_weights`` values train_model accepts (``"true"``: peft's default, B = 0; ``"false"``: random
#: B, for tests only). ``loftq`` needs a LoftQ config and is left out.
LORA_INIT_WEIGHTS = ("true", "false", "gaussian", "pissa", "olora", "eva", "orthogonal")
#: bitsandbytes 4-bit types and compute dtypes (transformers' ``BitsAndBytesConfig``).
BNB_4BIT_QUANT_TYPES = ("nf4", "fp4")
BNB_COMPUTE_DTYPES = ("bfloat16", "float16", "float32")
#: ``training_backend`` of transformers.Trainer (:mod:`.hf_trainer`, every algorithm) instead of Training Hub:
#: in-process for ``training_launcher="local"``, under ``torchrun`` in the job's pods otherwise.
TRANSFORMERS_BACKEND = "transformers"
#: The Trainer runtime a TrainJob references when ``training_runtime_name`` is ``""``, by backend: Training Hub's
#: image for its backends, the upstream PyTorch runtime (``torch-distributed``) for the ``transformers`` backend.
TRAINING_HUB_RUNTIME = "training-hub"
TORCH_DISTRIBUTED_RUNTIME = "torch-distributed"
#: FSDP sharding strategies of ``instructlab-training`` (``FSDPOptions.sharding_strategy``).
FSDP_SHARDING_STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD")


class TrainingConfigError(ValueError):
    """A training parameter breaks a rule; the message names the parameter, the value and the rule."""


def runtime_name_of(runtime_name: str, backend: str) -> str:
    """The runtime a TrainJob references: ``training_runtime_name``, or the backend's when it is ``""``."""
    default = TORCH_DISTRIBUTED_RUNTIME if backend == TRANSFORMERS_BACKEND else TRAINING_HUB_RUNTIME
    return str(runtime_name or "").strip() or default


def _fail(name: str, value: Any, rule: str) -> None:
    raise TrainingConfigError(f"train_model parameter training_{name}={value!r}: {rule}")


@dataclasses.dataclass(frozen=True)
class TrainModelRequest:
    """``train_model``'s arguments, as the component received them (see the component for each one's meaning).

    Built only by :func:`train_model_request` from the wrapper's arguments; no field has a default. ``dataset``,
    ``eval_dataset`` and ``task_config`` are the KFP input artifacts and passthrough (artifact-like objects:
    ``path``, ``uri``, ``metadata``; or ``None``).
    """

    task_config: Any
    pvc_path: str
    dataset: Any
    dataset_path: str
    eval_dataset: Any
    training_base_model: str
    training_algorithm: str
    training_backend: str
    training_launcher: str
    training_num_epochs: int
    training_effective_batch_size: int
    training_max_tokens_per_gpu: int
    training_learning_rate: float
    training_max_seq_len: int
    training_lr_scheduler: str
    training_warmup_steps: int
    training_seed: int
    training_unfreeze_rank_ratio: float
    training_lora_r: int
    training_lora_alpha: int
    training_lora_dropout: float
    training_lora_use_dora: bool
    training_lora_use_rslora: bool
    training_lora_init_weights: str
    training_lora_load_in_4bit: bool
    training_lora_load_in_8bit: bool
    training_lora_bnb_4bit_quant_type: str
    training_lora_bnb_4bit_compute_dtype: str
    training_lora_bnb_4bit_use_double_quant: bool
    training_grpo_iterations: int
    training_grpo_group_size: int
    training_grpo_temperature: float
    training_grpo_max_new_tokens: int
    training_use_liger: bool
    training_gradient_checkpointing: bool
    training_checkpoint_at_epoch: bool
    training_save_final_checkpoint: bool
    training_fsdp_sharding_strategy: str
    training_resume: bool
    training_max_steps: int
    training_checkpoint_interval_steps: int
    training_mlflow_tracking_uri: str
    training_num_nodes: int
    training_gpus_per_node: int
    training_gpu_resource_name: str
    training_cpu_per_node: str
    training_memory_per_node: str
    training_env_vars: dict
    training_runtime_name: str
    training_runtime_kind: str
    training_image: str
    training_namespace: str
    training_tolerations: list
    training_node_selector: dict
    training_pod_labels: dict
    training_pod_annotations: dict
    training_queue_name: str
    training_hardware_profile: str
    training_cleanup_policy: str
    training_delete_on_success: bool
    training_start_timeout_seconds: int
    training_timeout_seconds: int
    training_timeout_counts_paused_time: bool
    training_api_outage_tolerance_seconds: int
    training_progress_tracking: bool
    training_progress_metrics_port: int
    training_progress_poll_interval_seconds: int
    training_jit_checkpoint: bool
    training_oci_insecure: bool
    training_oci_ca_bundle: str
    training_copy_model_to_artifact: bool
    hf_token_secret_name: str
    s3_secret_name: str
    run_id: str
    task_name: str


#: The output artifacts: handed to ``run_train_model`` by the wrapper, not part of the request.
OUTPUTS = ("output_model", "output_metrics", "output_loss_chart")


def train_model_request(arguments: Mapping[str, Any]) -> TrainModelRequest:
    """``train_model``'s arguments (the wrapper's ``dict(locals())``) but the outputs, each under its own name.

    Raises:
        TypeError: ``arguments`` lacks a field of the request, or has a name that is neither a field nor an output.
    """
    names = [field.name for field in dataclasses.fields(TrainModelRequest)]
    require_arguments("train_model", arguments, [*names, *OUTPUTS])
    return TrainModelRequest(**{name: arguments[name] for name in names})


@dataclasses.dataclass(frozen=True)
class TrainingConfig(Hyperparameters):
    """Every hyper-parameter of one fine-tuning run: :class:`~.pod.run_config.Hyperparameters` plus ``base_model``.

    Each field is the ``train_model`` parameter ``training_<field>``, described once in ``parameter_docs.py``;
    :meth:`validate` holds the rules.
    """

    base_model: str

    @classmethod
    def from_request(cls, request: TrainModelRequest) -> TrainingConfig:
        """The validated training setup of a ``train_model`` request (one explicit line per setting).

        Raises:
            TrainingConfigError: A setting has the wrong type or breaks a rule (names the component parameter).
        """
        config = cls(
            base_model=request.training_base_model,
            algorithm=request.training_algorithm.strip().lower(),
            num_epochs=request.training_num_epochs,
            effective_batch_size=request.training_effective_batch_size,
            learning_rate=request.training_learning_rate,
            max_seq_len=request.training_max_seq_len,
            max_tokens_per_gpu=request.training_max_tokens_per_gpu,
            lr_scheduler=request.training_lr_scheduler,
            warmup_steps=request.training_warmup_steps,
            seed=request.training_seed,
            unfreeze_rank_ratio=request.training_unfreeze_rank_ratio,
            lora_r=request.training_lora_r,
            lora_alpha=request.training_lora_alpha,
            lora_dropout=request.training_lora_dropout,
            lora_use_dora=request.training_lora_use_dora,
            lora_use_rslora=request.training_lora_use_rslora,
            lora_init_weights=request.training_lora_init_weights.strip().lower(),
            lora_load_in_4bit=request.training_lora_load_in_4bit,
            lora_load_in_8bit=request.training_lora_load_in_8bit,
            lora_bnb_4bit_quant_type=request.training_lora_bnb_4bit_quant_type,
            lora_bnb_4bit_compute_dtype=request.training_lora_bnb_4bit_compute_dtype,
            lora_bnb_4bit_use_double_quant=request.training_lora_bnb_4bit_use_double_quant,
            grpo_iterations=request.training_grpo_iterations,
            grpo_group_size=request.training_grpo_group_size,
            grpo_temperature=request.training_grpo_temperature,
            grpo_max_new_tokens=request.training_grpo_max_new_tokens,
            use_liger=request.training_use_liger,
            gradient_checkpointing=request.training_gradient_checkpointing,
            checkpoint_at_epoch=request.training_checkpoint_at_epoch,
            save_final_checkpoint=request.training_save_final_checkpoint,
            fsdp_sharding_strategy=request.training_fsdp_sharding_strategy,
            resume=request.training_resume,
            max_steps=request.training_max_steps,
            checkpoint_interval_steps=request.training_checkpoint_interval_steps,
            backend=request.training_backend,
        )
        config.validate()
        return config

    def validate(self) -> None:
        """Checks types and ranges of every field.

        Raises:
            TrainingConfigError: The first field that breaks a rule (names the ``train_model`` parameter).
        """
        self._check_types()
        checks = [
            (
                "base_model",
                bool(self.base_model.strip()),
                "must name a model (HF id, path, pvc://, s3:// or oci:// URI)",
            ),
            ("algorithm", self.algorithm in ALGORITHMS, f"must be one of {', '.join(ALGORITHMS)}"),
            ("num_epochs", self.num_epochs >= 1, "must be >= 1"),
            ("effective_batch_size", self.effective_batch_size >= 1, "must be >= 1"),
            ("learning_rate", math.isfinite(self.learning_rate) and self.learning_rate > 0, "must be finite and > 0"),
            ("max_seq_len", self.max_seq_len >= 1, "must be >= 1"),
            (
                "max_tokens_per_gpu",
                self.max_tokens_per_gpu >= self.max_seq_len,
                f"must be >= max_seq_len ({self.max_seq_len}) so that the longest kept sample fits a micro-batch",
            ),
            ("lr_scheduler", self.lr_scheduler in LR_SCHEDULERS, f"must be one of {', '.join(LR_SCHEDULERS)}"),
            ("warmup_steps", self.warmup_steps >= 0, "must be >= 0"),
            ("seed", self.seed >= 0, "must be >= 0"),
            ("unfreeze_rank_ratio", 0 < self.unfreeze_rank_ratio <= 1, "must be in (0, 1]"),
            ("lora_r", self.lora_r >= 1, "LoRA rank must be >= 1"),
            ("lora_alpha", self.lora_alpha >= 1, "must be >= 1"),
            ("lora_dropout", 0 <= self.lora_dropout < 1, "must be in [0, 1)"),
            ("lora_init_weights", self.lora_init_weights in LORA_INIT_WEIGHTS, f"must be one of {LORA_INIT_WEIGHTS}"),
            (
                "lora_load_in_8bit",
                not (self.lora_load_in_4bit and self.lora_load_in_8bit),
                "QLoRA loads the base model in 4 or in 8 bits, not both: turn one of lora_load_in_4bit/8bit off",
            ),
            (
                "lora_bnb_4bit_quant_type",
                self.lora_bnb_4bit_quant_type in BNB_4BIT_QUANT_TYPES,
                f"must be one of {', '.join(BNB_4BIT_QUANT_TYPES)}",
            ),
            (
                "lora_bnb_4bit_compute_dtype",
                self.lora_bnb_4bit_compute_dtype in BNB_COMPUTE_DTYPES,
                f"must be one of {', '.join(BNB_COMPUTE_DTYPES)}",
            ),
            ("grpo_iterations", self.grpo_iterations >= 1, "must be >= 1"),
            (
                "grpo_group_size",
                self.grpo_group_size >= 2,
                "must be >= 2: GRPO's advantage compares the completions of one prompt with each other",
            ),
            (
                "grpo_temperature",
                math.isfinite(self.grpo_temperature) and self.grpo_temperature > 0,
                "must be finite and > 0 (GRPO samples several different completions per prompt)",
            ),
            ("grpo_max_new_tokens", self.grpo_max_new_tokens >= 1, "must be >= 1"),
            (
                "fsdp_sharding_strategy",
                self.fsdp_sharding_strategy in FSDP_SHARDING_STRATEGIES,
                f"must be one of {', '.join(FSDP_SHARDING_STRATEGIES)}",
            ),
            ("max_steps", self.max_steps >= 0, "must be >= 0 (0 = no limit)"),
            ("checkpoint_interval_steps", self.checkpoint_interval_steps >= 0, "must be >= 0 (0 = off)"),
            (
                "backend",
                self.backend in ("", TRANSFORMERS_BACKEND, *HUB_BACKENDS.get(self.algorithm, ())),
                f"must be Training Hub's {self.algorithm} backend ({', '.join(HUB_BACKENDS.get(self.algorithm, ()))}"
                f"; '' = its default) or {TRANSFORMERS_BACKEND!r} (transformers.Trainer under torchrun)",
            ),
        ]
        variants = {"lora_use_dora": False, "lora_use_rslora": False, "lora_init_weights": "true"}
        variants |= {"lora_load_in_4bit": False, "lora_load_in_8bit": False}
        for name, default in variants.items():
            if self.algorithm not in LORA_ALGORITHMS and getattr(self, name) != default:
                _fail(name, getattr(self, name), f"a LoRA setting: algorithm {self.algorithm!r} trains no adapter")
        if self.algorithm in GRPO_ALGORITHMS and self.backend == TRANSFORMERS_BACKEND:
            _fail(
                "backend",
                self.backend,
                f"{self.algorithm} trains through Training Hub ({', '.join(HUB_BACKENDS[self.algorithm])}) in the "
                "cluster, or with training_launcher='local' (TRL's GRPOTrainer); the transformers backend has no GRPO",
            )
        for name, ok, rule in checks:
            if not ok:
                _fail(name, getattr(self, name), rule)

    def _check_types(self) -> None:
        for field in dataclasses.fields(self):
            if not has_field_type(getattr(self, field.name), field.type):
                _fail(field.name, getattr(self, field.name), f"must be of type {field.type}")

    def training_settings(self) -> Hyperparameters:
        """The fields that shape training (``base_model`` left out), as the run config carries them to the pods."""
        return Hyperparameters(
            **{field.name: getattr(self, field.name) for field in dataclasses.fields(Hyperparameters)}
        )

    def hyperparameters(self) -> dict[str, Any]:
        """The fields that shape training, for metadata and reports (``base_model`` left out)."""
        return dataclasses.asdict(self.training_settings())


def check_env_vars(env_vars: Mapping[str, Any]) -> None:
    """Refuses a ``training_env_vars`` value shaped like a secret: it would be written into the job in plain text.

    Raises:
        TrainingConfigError: One line naming the variable (never its value) and the secret parameters to use.
    """
    from components._common.masking import looks_like_secret

    for name, value in dict(env_vars).items():
        if looks_like_secret(str(value)):
            raise TrainingConfigError(
                f"train_model parameter training_env_vars[{str(name)!r}]: the value looks like a secret (a token, a "
                "password in a URL, a key in a connection string) and would be written into the training job in "
                "plain text: put it in a Kubernetes secret and pass the secret's name instead (hf_token_secret_name, "
                "s3_secret_name, or the task's kubernetes.use_secret_as_env)"
            )
