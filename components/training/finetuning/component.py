"""KFP component ``train_model``: fine-tune (SFT, OSFT, LoRA) as a Kubeflow Trainer TrainJob or in-process on CPU."""

from kfp import dsl

from components._common.runtime import runtime_component
from components.training.finetuning.parameter_docs import PARAMETER_DOCS

#: The trainjob path needs the Kubernetes client and matplotlib; backend="local" on a cluster needs the runtime image
#: (Containerfile: torch, transformers, peft), which is not pip-installed here to keep TrainJob launches light.
PACKAGES = ["kubernetes==30.1.0", "matplotlib==3.11.2", "boto3==1.44.5", "huggingface-hub==2.0.0"]
PACKAGES += ["mlflow-skinny==3.17.2"]  # MLflow tracking: imported only when a tracking URI is set
PACKAGES += ["msgspec==0.22.0"]  # the chat-format decoder (components/_common/chat_format.py)
PASSTHROUGHS = [
    dsl.TaskConfigField.KUBERNETES_VOLUMES,
    dsl.TaskConfigField.KUBERNETES_TOLERATIONS,
    dsl.TaskConfigField.KUBERNETES_NODE_SELECTOR,
    dsl.TaskConfigField.KUBERNETES_AFFINITY,
    dsl.TaskConfigField.ENV,
]


@runtime_component(__file__, packages=PACKAGES, parameter_docs=PARAMETER_DOCS, task_config_passthroughs=PASSTHROUGHS)
def train_model(
    train_dataset: dsl.Input[dsl.Dataset],
    model: dsl.Output[dsl.Model],
    metrics: dsl.Output[dsl.Metrics],
    report: dsl.Output[dsl.HTML],
    base_model: str,
    task_config: dsl.TaskConfig,
    eval_dataset: dsl.Input[dsl.Dataset] = None,
    algorithm: str = "sft",
    backend: str = "trainjob",
    num_epochs: int = 1,
    effective_batch_size: int = 128,
    learning_rate: float = 5e-6,
    max_seq_len: int = 8192,
    max_tokens_per_gpu: int = 64000,
    lr_scheduler: str = "cosine",
    warmup_steps: int = 0,
    seed: int = 42,
    unfreeze_rank_ratio: float = 0.25,
    lora_r: int = 16,
    lora_alpha: int = 32,
    lora_dropout: float = 0.05,
    use_liger: bool = False,
    checkpoint_at_epoch: bool = False,
    save_final_checkpoint: bool = True,
    fsdp_sharding_strategy: str = "FULL_SHARD",
    resume: bool = True,
    max_steps: int = 0,
    checkpoint_interval_steps: int = 0,
    num_nodes: int = 1,
    gpus_per_node: int = 1,
    gpu_resource_name: str = "nvidia.com/gpu",
    cpu_per_node: str = "",
    memory_per_node: str = "",
    runtime_name: str = "training-hub",
    runtime_kind: str = "ClusterTrainingRuntime",
    training_image: str = "",
    namespace: str = "",
    tolerations: list = [],
    node_selector: dict = {},
    pod_labels: dict = {},
    pod_annotations: dict = {},
    hf_token_secret_name: str = "hf-token",
    s3_secret_name: str = "",
    cleanup_policy: str = "delete",
    delete_on_success: bool = False,
    start_timeout_seconds: int = 1800,
    timeout_seconds: int = 0,
    workspace_path: str = "",
    mlflow_tracking_uri: str = "",
    run_id: str = dsl.PIPELINE_JOB_ID_PLACEHOLDER,
    task_name: str = dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
):
    """Fine-tunes ``base_model`` on ``train_dataset``; parameters and outputs are described in the README."""
    from components.training.finetuning.train import run_train_model

    run_train_model(**locals())
