"""KFP component ``train_model``: fine-tune (SFT, OSFT, LoRA, GRPO) as a Kubeflow TrainJob, a PyTorchJob or on CPU.

The arguments follow the RHOAI fine-tuning guide; their defaults live here, once, and the body hands them all to
:func:`~components.training.finetuning.config.train_model_request`.
"""

from kfp import dsl

from components._common.runtime import runtime_component
from components.training.finetuning.parameter_docs import PARAMETER_DOCS

PASSTHROUGHS = [
    dsl.TaskConfigField.KUBERNETES_VOLUMES,
    dsl.TaskConfigField.KUBERNETES_TOLERATIONS,
    dsl.TaskConfigField.KUBERNETES_NODE_SELECTOR,
    dsl.TaskConfigField.KUBERNETES_AFFINITY,
    dsl.TaskConfigField.ENV,
    # The launcher pod's own CPU/memory (compile-time settings): KFP accepts them on a task with passthroughs only
    # when RESOURCES is one; applied to this task, and NOT handed to the training job (job_from_request.py).
    dsl.TaskConfigPassthrough(field=dsl.TaskConfigField.RESOURCES, apply_to_task=True),
]


@runtime_component(
    string_routes={"dataset": "dataset_path"},  # the RHOAI guide's train_model(dataset="path/to/data.jsonl")
    parameter_docs=PARAMETER_DOCS,
    task_config_passthroughs=PASSTHROUGHS,
)
def train_model(
    output_model: dsl.Output[dsl.Model],
    output_metrics: dsl.Output[dsl.Metrics],
    output_loss_chart: dsl.Output[dsl.HTML],
    task_config: dsl.TaskConfig,
    pvc_path: str = "",
    dataset: dsl.Input[dsl.Dataset] = None,
    dataset_path: str = "",
    eval_dataset: dsl.Input[dsl.Dataset] = None,
    training_base_model: str = "Qwen/Qwen2.5-1.5B-Instruct",
    training_algorithm: str = "sft",
    training_backend: str = "",
    training_launcher: str = "auto",
    training_num_epochs: int = 3,
    training_effective_batch_size: int = 128,
    training_max_tokens_per_gpu: int = 64000,
    training_learning_rate: float = 5e-6,
    training_max_seq_len: int = 8192,
    training_lr_scheduler: str = "cosine",
    training_warmup_steps: int = 0,
    training_seed: int = 42,
    training_unfreeze_rank_ratio: float = 0.25,
    training_lora_r: int = 16,
    training_lora_alpha: int = 32,
    training_lora_dropout: float = 0.05,
    training_lora_use_dora: bool = False,
    training_lora_use_rslora: bool = False,
    training_lora_init_weights: str = "true",
    training_lora_load_in_4bit: bool = False,
    training_lora_load_in_8bit: bool = False,
    training_lora_bnb_4bit_quant_type: str = "nf4",
    training_lora_bnb_4bit_compute_dtype: str = "bfloat16",
    training_lora_bnb_4bit_use_double_quant: bool = True,
    training_grpo_iterations: int = 15,
    training_grpo_group_size: int = 8,
    training_grpo_temperature: float = 0.7,
    training_grpo_max_new_tokens: int = 512,
    training_use_liger: bool = False,
    training_gradient_checkpointing: bool = True,
    training_checkpoint_at_epoch: bool = False,
    training_save_final_checkpoint: bool = True,
    training_fsdp_sharding_strategy: str = "FULL_SHARD",
    training_resume: bool = True,
    training_max_steps: int = 0,
    training_checkpoint_interval_steps: int = 0,
    training_mlflow_tracking_uri: str = "",
    training_num_nodes: int = 1,
    training_gpus_per_node: int = 1,
    training_gpu_resource_name: str = "nvidia.com/gpu",
    training_cpu_per_node: str = "",
    training_memory_per_node: str = "",
    training_env_vars: dict = {},
    training_runtime_name: str = "",
    training_runtime_kind: str = "ClusterTrainingRuntime",
    training_image: str = "",
    training_namespace: str = "",
    training_tolerations: list = [],
    training_node_selector: dict = {},
    training_pod_labels: dict = {},
    training_pod_annotations: dict = {},
    training_queue_name: str = "",
    training_hardware_profile: str = "",
    training_cleanup_policy: str = "delete",
    training_delete_on_success: bool = False,
    training_start_timeout_seconds: int = 1800,
    training_timeout_seconds: int = 0,
    training_timeout_counts_paused_time: bool = False,
    training_api_outage_tolerance_seconds: int = 3600,
    training_progress_tracking: bool = True,
    training_progress_metrics_port: int = 28080,
    training_progress_poll_interval_seconds: int = 30,
    training_jit_checkpoint: bool = True,
    training_oci_insecure: bool = False,
    training_oci_ca_bundle: str = "",
    training_copy_model_to_artifact: bool = False,
    hf_token_secret_name: str = "hf-token",
    s3_secret_name: str = "",
    run_id: str = dsl.PIPELINE_JOB_ID_PLACEHOLDER,
    task_name: str = dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
):
    """Fine-tunes ``training_base_model`` on ``dataset``; parameters and outputs are described in the README."""
    arguments = dict(locals())  # every argument by name, taken before the imports below add names
    from components.training.finetuning.config import train_model_request
    from components.training.finetuning.run import run_train_model

    request = train_model_request(arguments)
    run_train_model(request, model=output_model, metrics=output_metrics, report=output_loss_chart)
