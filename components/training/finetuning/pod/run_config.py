"""The launcher -> pod contract: ``run_config.json``, written by ``train_model`` and read by every training pod.

Decoding is strict: a missing, unknown or mistyped field, or another :data:`RUN_CONFIG_VERSION`, fails with one line
naming the file and the field, so a launcher and a pod script of different releases never half-agree. Standard library
only: the training images carry none of the project's dependencies.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

#: The version written into, and required of, every ``run_config.json``; raise it when a field changes.
RUN_CONFIG_VERSION = 3
RUN_CONFIG_FILE = "run_config.json"


class RunConfigError(ValueError):
    """A run config is not this version's :class:`RunConfig`; the message names the file and the field."""


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
    """Every setting that shapes training (``train_model``'s ``training_*`` values, validated by the launcher).

    The field names are Training Hub's where it has the setting (``num_epochs``, ``learning_rate``, ...); the
    launcher's :class:`~..config.TrainingConfig` extends this type with ``base_model``.
    """

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


@dataclasses.dataclass(frozen=True)
class ProgressSettings:
    """The dashboard progress server of the rank-0 pod (:mod:`.progress_server`).

    Attributes:
        enabled: Serve progress at all.
        port: The port it listens on.
        termination_log: Where the final progress JSON is written when the container ends.
    """

    enabled: bool
    port: int
    termination_log: str


@dataclasses.dataclass(frozen=True)
class MlflowSettings:
    """Training Hub's own MLflow logging (all empty: off).

    Attributes:
        tracking_uri: The tracking server (never one with credentials in it).
        experiment_name: The experiment.
        run_name: The run's name (``<job name>-training-hub``).
    """

    tracking_uri: str
    experiment_name: str
    run_name: str

    def training_hub_kwargs(self) -> dict[str, str]:
        """Training Hub's ``mlflow_tracking_uri`` / ``mlflow_experiment_name`` / ``mlflow_run_name``, each when set."""
        values = {"tracking_uri": self.tracking_uri, "experiment_name": self.experiment_name, "run_name": self.run_name}
        return {f"mlflow_{key}": value for key, value in values.items() if value}


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """What a training pod needs to call Training Hub, as ``train_model`` staged it on the workspace.

    Attributes:
        version: :data:`RUN_CONFIG_VERSION` of the writer.
        base_model: The model as the user named it (HF id, path, ``pvc://``, ``s3://``, ``oci://``).
        model_path: A copy already staged on the workspace (an ``oci://`` pull); ``""``: resolve ``base_model``.
        data_path: The training JSONL on the workspace.
        eval_data_path: The eval JSONL on the workspace (``""``: none).
        ckpt_output_dir: Training Hub's ``ckpt_output_dir``.
        model_cache_dir: Where ``s3://`` and Hub models are downloaded.
        pvc_mounts: Mount path by PVC claim name (for ``pvc://`` models).
        nproc_per_node: Processes (GPUs) per node, for the node count where only ``WORLD_SIZE`` is set.
        hyperparameters: The training settings.
        progress: The progress server's settings.
        jit_checkpoint: Training Hub's ``enable_jit_checkpoint`` (save on SIGTERM).
        mlflow: Training Hub's MLflow settings.
    """

    version: int
    base_model: str
    model_path: str
    data_path: str
    eval_data_path: str
    ckpt_output_dir: str
    model_cache_dir: str
    pvc_mounts: dict[str, str]
    nproc_per_node: int
    hyperparameters: Hyperparameters
    progress: ProgressSettings
    jit_checkpoint: bool
    mlflow: MlflowSettings


_SCALARS: dict[str, Any] = {"str": str, "int": int, "float": (int, float), "bool": bool}
_NESTED = {"Hyperparameters": Hyperparameters, "ProgressSettings": ProgressSettings, "MlflowSettings": MlflowSettings}


def has_field_type(value: Any, type_name: str) -> bool:
    """Whether ``value`` is of the annotated type ``type_name`` (``str``, ``int``, ``float``, ``bool``, or a str map).

    JSON's ``true`` is no ``int``; an ``int`` is a ``float``.
    """
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
    """A :class:`RunConfig` from parsed JSON, strictly (see the module docstring).

    Args:
        data: The parsed JSON.
        source: Where it came from, named in errors (the file's path).

    Raises:
        RunConfigError: Another version, or a missing, unknown or mistyped field.
    """
    if isinstance(data, dict) and data.get("version") != RUN_CONFIG_VERSION:
        raise RunConfigError(
            f"{source}: field version={data.get('version')!r}: this entrypoint reads run config version "
            f"{RUN_CONFIG_VERSION}; stage the run again with the same train_model release as this entrypoint"
        )
    return _decode(RunConfig, data, source, "")


def load_run_config(path: Path) -> RunConfig:
    """Reads and decodes ``run_config.json``.

    Raises:
        RunConfigError: The file is not JSON, or not this version's run config (names the file and the field).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as error:
        raise RunConfigError(f"{path}: not JSON ({error})") from None
    return decode_run_config(data, str(path))


def encode_run_config(config: RunConfig) -> str:
    """``config`` as the JSON text of ``run_config.json``, checked by decoding it back (fail here, not in the pod).

    Raises:
        RunConfigError: ``config`` is not a valid :class:`RunConfig` of this version.
    """
    text = json.dumps(dataclasses.asdict(config), indent=1, sort_keys=True)
    decode_run_config(json.loads(text), "the run config being written")
    return text
