"""``train_model``'s arguments as typed option groups: ``training_num_epochs`` -> ``request.training.num_epochs``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from components._common import arguments
from components.training.finetuning.contract import TRANSFORMERS_BACKEND, TrainingConfigError, TrainingOptions

#: ``auto`` resolves to ``trainjob`` or ``pytorchjob`` by discovery (:func:`.cluster.launchers.select_launcher`).
LAUNCHERS = ("trainjob", "local", "pytorchjob", "auto")
#: The launchers that run the training in cluster pods.
CLUSTER_LAUNCHERS = ("trainjob", "pytorchjob", "auto")
#: The runtime a TrainJob references when ``training_runtime_name`` is ``""``: Training Hub's, or for the
#: ``transformers`` backend the upstream PyTorch runtime.
TRAINING_HUB_RUNTIME = "training-hub"
TORCH_DISTRIBUTED_RUNTIME = "torch-distributed"


def runtime_name_of(runtime_name: str, backend: str) -> str:
    """The runtime a TrainJob references: ``training_runtime_name``, or the backend's when it is ``""``."""
    default = TORCH_DISTRIBUTED_RUNTIME if backend == TRANSFORMERS_BACKEND else TRAINING_HUB_RUNTIME
    return str(runtime_name or "").strip() or default


@dataclasses.dataclass(frozen=True)
class TrainingConfig(TrainingOptions):
    """The training group (``training_<field>``): the contract's :class:`~.contract.TrainingOptions` and the model."""

    base_model: str

    def validate(self) -> None:
        """Checks every field (:meth:`.contract.TrainingOptions.validate`) and that ``base_model`` names a model."""
        super().validate()
        if not self.base_model.strip():
            raise TrainingConfigError(
                f"train_model parameter training_base_model={self.base_model!r}: must name a model (HF id, path, "
                "pvc://, s3:// or oci:// URI)"
            )

    def training_settings(self) -> TrainingOptions:
        """The training options as the run config carries them to the pods (``base_model`` left out)."""
        return TrainingOptions(**{f.name: getattr(self, f.name) for f in dataclasses.fields(TrainingOptions)})

    def hyperparameters(self) -> dict[str, Any]:
        """The fields that shape training, for metadata and reports (``base_model`` left out)."""
        return dataclasses.asdict(self.training_settings())


@dataclasses.dataclass(frozen=True)
class JobOptions:
    """The job group (``training_<field>``): which launcher, and the TrainJob's or PyTorchJob's pods and lifecycle."""

    launcher: str
    num_nodes: int
    gpus_per_node: int
    gpu_resource_name: str
    cpu_per_node: str
    memory_per_node: str
    env_vars: dict
    runtime_name: str
    runtime_kind: str
    image: str
    namespace: str
    tolerations: list
    node_selector: dict
    pod_labels: dict
    pod_annotations: dict
    queue_name: str
    hardware_profile: str
    cleanup_policy: str
    delete_on_success: bool
    start_timeout_seconds: int
    timeout_seconds: int
    timeout_counts_paused_time: bool
    api_outage_tolerance_seconds: int
    jit_checkpoint: bool


@dataclasses.dataclass(frozen=True)
class ProgressOptions:
    """The progress group (``training_progress_<field>``): the dashboard progress of the training pods."""

    tracking: bool
    metrics_port: int
    poll_interval_seconds: int


@dataclasses.dataclass(frozen=True)
class OciOptions:
    """The OCI group (``training_oci_<field>``): TLS of an ``oci://`` base model's registry."""

    insecure: bool
    ca_bundle: str


@dataclasses.dataclass(frozen=True)
class OutputOptions:
    """The output group (``training_<field>``): MLflow tracking and a copy of the weights in the model artifact."""

    mlflow_tracking_uri: str
    copy_model_to_artifact: bool


@dataclasses.dataclass(frozen=True)
class SecretNames:
    """The secrets group: names of Kubernetes secrets the training pods read (never their values)."""

    hf_token_secret_name: str
    s3_secret_name: str


@dataclasses.dataclass(frozen=True)
class TrainModelRequest:
    """``train_model``'s arguments in groups; built only by :func:`train_model_request`, no field has a default."""

    task_config: Any
    pvc_path: str
    dataset: Any
    dataset_path: str
    eval_dataset: Any
    run_id: str
    task_name: str
    training: TrainingConfig
    job: JobOptions
    progress: ProgressOptions
    oci: OciOptions
    output: OutputOptions
    secrets: SecretNames


#: Each group of the request: its type, and the prefix its fields take as component parameters.
GROUPS: dict[str, tuple[type, str]] = {
    "training": (TrainingConfig, "training_"),
    "job": (JobOptions, "training_"),
    "progress": (ProgressOptions, "training_progress_"),
    "oci": (OciOptions, "training_oci_"),
    "output": (OutputOptions, "training_"),
    "secrets": (SecretNames, ""),
}
#: The output artifacts: handed to ``run_train_model`` by the wrapper, not part of the request.
OUTPUTS = ("output_model", "output_metrics", "output_loss_chart")
#: The parameters taken case-insensitively (the guide writes ``OSFT``).
LOWER_CASED = ("training_algorithm", "training_lora_init_weights")


def parameter_fields() -> dict[str, tuple[str | None, str]]:
    """Every component parameter the request holds: ``name -> (its group or None, the field that holds it)``."""
    return arguments.parameter_fields(TrainModelRequest, GROUPS)


def train_model_request(values: Mapping[str, Any]) -> TrainModelRequest:
    """``train_model``'s arguments (the wrapper's ``dict(locals())``) but the outputs, each in its group."""
    lowered = {name: values[name].strip().lower() for name in LOWER_CASED if isinstance(values.get(name), str)}
    return arguments.grouped_request("train_model", TrainModelRequest, GROUPS, {**values, **lowered}, OUTPUTS)


def check_env_vars(env_vars: Mapping[str, Any]) -> None:
    """Refuses a ``training_env_vars`` value shaped like a secret: it would be written into the job in plain text."""
    from components._common.masking import looks_like_secret

    for name, value in dict(env_vars).items():
        if looks_like_secret(str(value)):
            raise TrainingConfigError(
                f"train_model parameter training_env_vars[{str(name)!r}]: the value looks like a secret (a token, a "
                "password in a URL, a key in a connection string) and would be written into the training job in "
                "plain text: put it in a Kubernetes secret and pass the secret's name instead (hf_token_secret_name, "
                "s3_secret_name, or the task's kubernetes.use_secret_as_env)"
            )
