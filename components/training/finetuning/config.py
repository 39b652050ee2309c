"""The validated training configuration shared by every backend (``local``, ``trainjob``, ``pytorchjob``, ``auto``).

One :class:`TrainingConfig` holds every hyper-parameter of ``train_model``; it is validated once, before anything is
trained or submitted, and travels as JSON to the TrainJob pods (see :mod:`.pod.entrypoint`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

ALGORITHMS = ("sft", "osft", "lora")
#: ``auto`` resolves to ``trainjob`` or ``pytorchjob`` by discovery (:func:`.cluster.backends.select_backend`).
BACKENDS = ("trainjob", "local", "pytorchjob", "auto")
#: The backends that run the entrypoint in cluster pods.
CLUSTER_BACKENDS = ("trainjob", "pytorchjob", "auto")
#: Scheduler names accepted by both the local backend (``transformers.get_scheduler``) and Training Hub's backends.
LR_SCHEDULERS = ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup")
#: Training Hub's backends per algorithm (training-hub 0.11.2); ``hub_backend=""`` takes the first.
HUB_BACKENDS = {"sft": ("instructlab-training",), "osft": ("mini-trainer",), "lora": ("unsloth",)}
#: ``training_backend`` of the project's own trainer (:mod:`.hf_trainer`, every algorithm) instead of Training Hub:
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


#: ``train_model``'s argument for each internal name that is not simply ``training_<name>``.
COMPONENT_ARGUMENTS = {
    "hub_backend": "training_backend",
    "backend": "training_launcher",
    "training_image": "training_image",
}


def component_argument(name: str) -> str:
    """The ``train_model`` argument (the name a user sets) of an internal parameter name."""
    return COMPONENT_ARGUMENTS.get(name, f"training_{name}")


def default_runtime_name(hub_backend: str) -> str:
    """The runtime of a ``training_backend``: ``torch-distributed`` for ``transformers``, else ``training-hub``."""
    return TORCH_DISTRIBUTED_RUNTIME if hub_backend == TRANSFORMERS_BACKEND else TRAINING_HUB_RUNTIME


def runtime_name_of(runtime_name: str, hub_backend: str) -> str:
    """The runtime a TrainJob references: ``training_runtime_name``, or the backend's when it is ``""``."""
    return str(runtime_name or "").strip() or default_runtime_name(hub_backend)


def _fail(name: str, value: Any, rule: str, source: str) -> None:
    shown = component_argument(name) if source == "train_model" else name
    raise TrainingConfigError(f"{source} parameter {shown}={value!r}: {rule}")


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """Every hyper-parameter of one fine-tuning run (names as in ``train_model``).

    Attributes:
        base_model: HF model id, local directory, ``pvc://<path>``, ``s3://bucket/prefix`` or
            ``oci://registry/repository[:tag|@sha256:digest]`` (pulled by ``train_model``, see :mod:`.oci.model`).
        algorithm: ``sft`` (full fine-tune), ``osft`` (orthogonal subspace fine-tune) or ``lora``.
        num_epochs: Passes over the training data.
        effective_batch_size: Samples per optimizer step (split into micro-batches by ``max_tokens_per_gpu``).
        learning_rate: Peak learning rate.
        max_seq_len: Samples longer than this many tokens are dropped.
        max_tokens_per_gpu: Token budget of one micro-batch (padding included); at least ``max_seq_len``.
        lr_scheduler: Learning-rate schedule, one of :data:`LR_SCHEDULERS`.
        warmup_steps: Linear warm-up steps of the schedule.
        seed: Seed of initialisation, data order and dropout.
        unfreeze_rank_ratio: OSFT: fraction of each target matrix's rank that is trained, in (0, 1].
        lora_r: LoRA rank.
        lora_alpha: LoRA scaling numerator.
        lora_dropout: LoRA dropout probability, in [0, 1).
        use_liger: Use Liger kernels (GPU only; Training Hub SFT/OSFT).
        gradient_checkpointing: Recompute activations in the backward pass (Training Hub's backends always do when
            the model supports it; the local backend follows this setting).
        checkpoint_at_epoch: Save a checkpoint after every epoch.
        save_final_checkpoint: Save the final model (must stay true for ``sft`` on Training Hub, which always does).
        fsdp_sharding_strategy: FSDP strategy of full fine-tuning (``sft``), one of :data:`FSDP_SHARDING_STRATEGIES`
            (Training Hub's instructlab-training, or FSDP2 in the ``transformers`` backend).
        resume: Continue from the newest complete checkpoint in the output directory when there is one.
        max_steps: Stop after this many optimizer steps (0 = no limit).
        checkpoint_interval_steps: Local backend: also save a resumable checkpoint every this many optimizer steps
            (0 = off); a SIGTERM always saves one.
        hub_backend: Training Hub's backend for the algorithm (:data:`HUB_BACKENDS`; ``""`` = its default), or
            :data:`TRANSFORMERS_BACKEND` (the project's own trainer instead of Training Hub).
    """

    base_model: str
    algorithm: str = "sft"
    num_epochs: int = 1
    effective_batch_size: int = 128
    learning_rate: float = 5e-6
    max_seq_len: int = 8192
    max_tokens_per_gpu: int = 64000
    lr_scheduler: str = "cosine"
    warmup_steps: int = 0
    seed: int = 42
    unfreeze_rank_ratio: float = 0.25
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    use_liger: bool = False
    gradient_checkpointing: bool = True
    checkpoint_at_epoch: bool = False
    save_final_checkpoint: bool = True
    fsdp_sharding_strategy: str = "FULL_SHARD"
    resume: bool = True
    max_steps: int = 0
    checkpoint_interval_steps: int = 0
    hub_backend: str = ""

    @classmethod
    def from_params(cls, source: str = "train_model", **params: Any) -> TrainingConfig:
        """Builds and validates a config from keyword parameters, ignoring names that are not hyper-parameters.

        Args:
            source: Where the parameters came from, named in error messages (e.g. ``train_model`` or a file).
            **params: Parameter values by name.

        Returns:
            The validated config.

        Raises:
            TrainingConfigError: A parameter has the wrong type or breaks a rule.
        """
        names = {field.name for field in dataclasses.fields(cls)}
        config = cls(**{name: value for name, value in params.items() if name in names})
        config.validate(source)
        return config

    def validate(self, source: str = "train_model") -> None:
        """Checks types and ranges of every field.

        Args:
            source: Named in error messages as the origin of the parameters.

        Raises:
            TrainingConfigError: The first field that breaks a rule.
        """
        self._check_types(source)
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
            (
                "fsdp_sharding_strategy",
                self.fsdp_sharding_strategy in FSDP_SHARDING_STRATEGIES,
                f"must be one of {', '.join(FSDP_SHARDING_STRATEGIES)}",
            ),
            ("max_steps", self.max_steps >= 0, "must be >= 0 (0 = no limit)"),
            ("checkpoint_interval_steps", self.checkpoint_interval_steps >= 0, "must be >= 0 (0 = off)"),
            (
                "hub_backend",
                self.hub_backend in ("", TRANSFORMERS_BACKEND, *HUB_BACKENDS.get(self.algorithm, ())),
                f"must be Training Hub's {self.algorithm} backend ({', '.join(HUB_BACKENDS.get(self.algorithm, ()))}"
                f"; '' = its default) or {TRANSFORMERS_BACKEND!r} (the project's own trainer under torchrun)",
            ),
        ]
        for name, ok, rule in checks:
            if not ok:
                _fail(name, getattr(self, name), rule, source)

    def _check_types(self, source: str) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            expected = {"str": str, "int": int, "float": (int, float), "bool": bool}[field.type]
            wrong_bool = isinstance(value, bool) and field.type in ("int", "float")
            if not isinstance(value, expected) or wrong_bool:
                _fail(field.name, value, f"must be of type {field.type}", source)

    def hyperparameters(self) -> dict[str, Any]:
        """The fields that shape training, for metadata and reports (``base_model`` left out)."""
        values = dataclasses.asdict(self)
        values.pop("base_model")
        return values

    def to_dict(self) -> dict[str, Any]:
        """All fields as a JSON-ready dict."""
        return dataclasses.asdict(self)
