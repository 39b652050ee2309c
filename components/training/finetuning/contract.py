"""The launcher <-> pod contract: what ``train_model`` sends to the training pods and what they send back.

To the pods: ``run_config.json`` (:class:`RunConfig`, decoded strictly). Back: the step and progress records
(re-exported from the pod modules that write them). The launcher imports nothing else from ``pod/``; standard
library only (the training images carry no dependencies).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from components.training.finetuning.pod.hub_settings import (  # noqa: F401 - what Training Hub's backends take
    ignored_settings,
    settings_not_supported,
    unsupported_settings,
)
from components.training.finetuning.pod.inputs import count_chat_rows, load_chat_rows, resolve_base_model  # noqa: F401
from components.training.finetuning.pod.metrics import (  # noqa: F401 - the pod's records, read by the launcher
    LOCAL_METRICS_FILE,
    TRAINING_HUB_METRICS_FILES,
    JsonlTail,
    normalize_records,
    read_metrics,
    read_reward_history,
)

#: The version written into, and required of, every ``run_config.json``; raise it when a field changes.
RUN_CONFIG_VERSION = 3
RUN_CONFIG_FILE = "run_config.json"
ALGORITHMS = ("sft", "osft", "lora", "grpo", "lora_grpo")
#: The reinforcement-learning algorithms (GRPO: a prompt dataset with a verifiable reward, not chat rows).
GRPO_ALGORITHMS = ("grpo", "lora_grpo")
#: The algorithms that train LoRA adapters (their LoRA settings apply).
LORA_ALGORITHMS = ("lora", "lora_grpo")
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
#: FSDP sharding strategies of ``instructlab-training`` (``FSDPOptions.sharding_strategy``).
FSDP_SHARDING_STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD")
#: The Training Hub pods' code (standard library only at import), staged under ``<run dir>/code/`` (``launch.py``);
#: the ``transformers`` backend stages these and its trainer (``transformers_backend.STAGED_MODULES``).
POD_MODULES = (
    "components._common.s3",
    "components.training.finetuning.contract",
    "components.training.finetuning.pod.checkpoints",
    "components.training.finetuning.pod.entrypoint",
    "components.training.finetuning.pod.hub_compat",
    "components.training.finetuning.pod.hub_settings",
    "components.training.finetuning.pod.inputs",
    "components.training.finetuning.pod.metrics",
    "components.training.finetuning.pod.progress_server",
    "components.training.finetuning.pod.rewards",
    "components.training.finetuning.pod.trainer_status",
)
#: The module a Training Hub pod runs (``python entrypoint.py --config run_config.json``).
POD_ENTRYPOINT = "components.training.finetuning.pod.entrypoint"
#: Where the rank-0 pod writes its final progress JSON when the container ends (Kubernetes' default path).
TERMINATION_LOG = "/dev/termination-log"


class TrainingConfigError(ValueError):
    """A training parameter breaks a rule; the message names the parameter, the value and the rule."""


def _fail(name: str, value: Any, rule: str) -> None:
    raise TrainingConfigError(f"train_model parameter training_{name}={value!r}: {rule}")


class RunConfigError(ValueError):
    """A run config is not this version's :class:`RunConfig`; the message names the file and the field."""


@dataclasses.dataclass(frozen=True)
class TrainingOptions:
    """The training options group, sent as-is to the pods: field ``x`` is the parameter ``training_x``."""

    algorithm: str
    num_epochs: int
    effective_batch_size: int
    learning_rate: float
    max_seq_len: int
    max_tokens_per_gpu: int
    lr_scheduler: str
    warmup_steps: int
    seed: int
    unfreeze_rank_ratio: float
    lora_r: int
    lora_alpha: int
    lora_dropout: float
    lora_use_dora: bool
    lora_use_rslora: bool
    lora_init_weights: str
    lora_load_in_4bit: bool
    lora_load_in_8bit: bool
    lora_bnb_4bit_quant_type: str
    lora_bnb_4bit_compute_dtype: str
    lora_bnb_4bit_use_double_quant: bool
    grpo_iterations: int
    grpo_group_size: int
    grpo_temperature: float
    grpo_max_new_tokens: int
    use_liger: bool
    gradient_checkpointing: bool
    checkpoint_at_epoch: bool
    save_final_checkpoint: bool
    fsdp_sharding_strategy: str
    resume: bool
    max_steps: int
    checkpoint_interval_steps: int
    backend: str

    def validate(self) -> None:
        """Checks types and ranges of every field; the first broken rule is a :class:`TrainingConfigError`."""
        self._check_types()

        def one_of(name: str, choices: tuple[str, ...]) -> tuple[str, bool, str]:
            return (name, getattr(self, name) in choices, f"must be one of {', '.join(choices)}")

        def at_least(name: str, low: int, rule: str = "") -> tuple[str, bool, str]:
            return (name, getattr(self, name) >= low, rule or f"must be >= {low}")

        backends = HUB_BACKENDS.get(self.algorithm, ())
        checks = [
            one_of("algorithm", ALGORITHMS),
            at_least("num_epochs", 1),
            at_least("effective_batch_size", 1),
            ("learning_rate", math.isfinite(self.learning_rate) and self.learning_rate > 0, "must be finite and > 0"),
            at_least("max_seq_len", 1),
            at_least(
                "max_tokens_per_gpu",
                self.max_seq_len,
                f"must be >= max_seq_len ({self.max_seq_len}) so that the longest kept sample fits a micro-batch",
            ),
            one_of("lr_scheduler", LR_SCHEDULERS),
            at_least("warmup_steps", 0),
            at_least("seed", 0),
            ("unfreeze_rank_ratio", 0 < self.unfreeze_rank_ratio <= 1, "must be in (0, 1]"),
            at_least("lora_r", 1, "LoRA rank must be >= 1"),
            at_least("lora_alpha", 1),
            ("lora_dropout", 0 <= self.lora_dropout < 1, "must be in [0, 1)"),
            one_of("lora_init_weights", LORA_INIT_WEIGHTS),
            (
                "lora_load_in_8bit",
                not (self.lora_load_in_4bit and self.lora_load_in_8bit),
                "QLoRA loads the base model in 4 or in 8 bits, not both: turn one of lora_load_in_4bit/8bit off",
            ),
            one_of("lora_bnb_4bit_quant_type", BNB_4BIT_QUANT_TYPES),
            one_of("lora_bnb_4bit_compute_dtype", BNB_COMPUTE_DTYPES),
            at_least("grpo_iterations", 1),
            at_least(
                "grpo_group_size",
                2,
                "must be >= 2: GRPO's advantage compares the completions of one prompt with each other",
            ),
            (
                "grpo_temperature",
                math.isfinite(self.grpo_temperature) and self.grpo_temperature > 0,
                "must be finite and > 0 (GRPO samples several different completions per prompt)",
            ),
            at_least("grpo_max_new_tokens", 1),
            one_of("fsdp_sharding_strategy", FSDP_SHARDING_STRATEGIES),
            at_least("max_steps", 0, "must be >= 0 (0 = no limit)"),
            at_least("checkpoint_interval_steps", 0, "must be >= 0 (0 = off)"),
            (
                "backend",
                self.backend in ("", TRANSFORMERS_BACKEND, *backends),
                f"must be Training Hub's {self.algorithm} backend ({', '.join(backends)}; '' = its default) or "
                f"{TRANSFORMERS_BACKEND!r} (transformers.Trainer under torchrun)",
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


@dataclasses.dataclass(frozen=True)
class ProgressSettings:
    """The dashboard progress server of the rank-0 pod; ``termination_log``: where its final JSON is written."""

    enabled: bool
    port: int
    termination_log: str


@dataclasses.dataclass(frozen=True)
class MlflowSettings:
    """Training Hub's own MLflow logging (all empty: off; never a tracking URI with credentials in it)."""

    tracking_uri: str
    experiment_name: str
    run_name: str

    def training_hub_kwargs(self) -> dict[str, str]:
        """Training Hub's ``mlflow_tracking_uri`` / ``mlflow_experiment_name`` / ``mlflow_run_name``, each when set."""
        values = {"tracking_uri": self.tracking_uri, "experiment_name": self.experiment_name, "run_name": self.run_name}
        return {f"mlflow_{key}": value for key, value in values.items() if value}


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """What a training pod needs, as staged; ``model_path``: an ``oci://`` pull (``""``: resolve ``base_model``)."""

    version: int
    base_model: str
    model_path: str
    data_path: str
    eval_data_path: str
    ckpt_output_dir: str
    model_cache_dir: str
    pvc_mounts: dict[str, str]
    nproc_per_node: int
    hyperparameters: TrainingOptions
    progress: ProgressSettings
    jit_checkpoint: bool
    mlflow: MlflowSettings


_SCALARS: dict[str, Any] = {"str": str, "int": int, "float": (int, float), "bool": bool}
_NESTED = {"TrainingOptions": TrainingOptions, "ProgressSettings": ProgressSettings, "MlflowSettings": MlflowSettings}


def has_field_type(value: Any, type_name: str) -> bool:
    """Whether ``value`` is of the annotated type ``type_name`` (JSON's ``true`` is no int; an int is a float)."""
    if type_name == "dict[str, str]":
        return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    return isinstance(value, _SCALARS[type_name]) and not (isinstance(value, bool) and type_name in ("int", "float"))


def _decode(cls: Any, data: Any, source: str, prefix: str) -> Any:
    where = prefix.rstrip(".") or "the run config"
    if not isinstance(data, dict):
        raise RunConfigError(f"{source}: {where} must be a JSON object, got {type(data).__name__}")
    fields = dataclasses.fields(cls)
    names = [field.name for field in fields]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise RunConfigError(
            f"{source}: unknown field {prefix}{unknown[0]} (run config version {RUN_CONFIG_VERSION} has "
            f"{', '.join(names)}); stage the run again with the same train_model release as this entrypoint"
        )
    missing = [name for name in names if name not in data]
    if missing:
        raise RunConfigError(
            f"{source}: missing field {prefix}{missing[0]} (run config version {RUN_CONFIG_VERSION}); stage the run "
            "again with the same train_model release as this entrypoint"
        )
    values = {}
    for field in fields:
        value = data[field.name]
        if field.type in _NESTED:
            values[field.name] = _decode(_NESTED[field.type], value, source, f"{prefix}{field.name}.")
            continue
        if not has_field_type(value, field.type):
            raise RunConfigError(f"{source}: field {prefix}{field.name}={value!r} must be of type {field.type}")
        values[field.name] = value
    return cls(**values)


def decode_run_config(data: Any, source: str = RUN_CONFIG_FILE) -> RunConfig:
    """A :class:`RunConfig` from parsed JSON; another version, a missing, unknown or mistyped field: RunConfigError."""
    if isinstance(data, dict) and data.get("version") != RUN_CONFIG_VERSION:
        raise RunConfigError(
            f"{source}: field version={data.get('version')!r}: this entrypoint reads run config version "
            f"{RUN_CONFIG_VERSION}; stage the run again with the same train_model release as this entrypoint"
        )
    return _decode(RunConfig, data, source, "")


def load_run_config(path: Path) -> RunConfig:
    """Reads and decodes ``run_config.json`` (not JSON, or not this version's: :class:`RunConfigError`)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as error:
        raise RunConfigError(f"{path}: not JSON ({error})") from None
    return decode_run_config(data, str(path))


def encode_run_config(config: RunConfig) -> str:
    """``config`` as the JSON text of ``run_config.json``, checked by decoding it back (fail here, not in the pod)."""
    text = json.dumps(dataclasses.asdict(config), indent=1, sort_keys=True)
    decode_run_config(json.loads(text), "the run config being written")
    return text
