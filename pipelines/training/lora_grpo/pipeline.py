"""LoRA-GRPO (reinforcement learning from a verifiable reward): trains low-rank adapters on a prompt dataset.

``PYTHONPATH=$(pwd) python pipelines/training/lora_grpo/pipeline.py`` writes ``pipeline.yaml`` beside it;
edit it as the RHOAI guide's *Editing Existing Pipelines* describes.
"""

# =============================================================================
# PVC Configuration (COMPILE-TIME settings)
# =============================================================================
PVC_SIZE = "50Gi"
PVC_STORAGE_CLASS = "nfs-csi"
PVC_ACCESS_MODES = ["ReadWriteMany"]
PIPELINE_NAME = "lora-grpo-pipeline"

# Step images (COMPILE-TIME settings): "" = the published quay.io/kfp-finetune/kfp-finetune:<version>
IMAGE = ""  # or your build of the Containerfile (README, "Run on a cluster")
EVAL_IMAGE = ""  # "" = IMAGE if set, else the published <version>-cuda build (the CPU one when eval_gpus is 0)
# Other settings (settings.py) are pipeline_settings keywords; KFP_FINETUNE_<NAME> and compile flags override all.

from kfp import dsl  # noqa: E402

from pipelines.training.finetuning import tasks  # noqa: E402
from pipelines.training.finetuning.settings import pipeline_settings  # noqa: E402

SETTINGS = pipeline_settings(PVC_SIZE, PVC_STORAGE_CLASS, PVC_ACCESS_MODES, PIPELINE_NAME, IMAGE, EVAL_IMAGE)
dataset_download, train_model, lm_eval, model_registry = tasks.step_components(SETTINGS)


@dsl.pipeline(name=SETTINGS.pipeline_name, pipeline_config=tasks.pipeline_config(SETTINGS))
@tasks.described  # each parameter's description: its component argument's, unless written in Args
def lora_grpo_pipeline(
    phase_01_dataset_man_data_uri: str,
    phase_01_dataset_man_data_split: float = 0.9,
    phase_01_dataset_opt_subset: int = 0,
    phase_01_dataset_opt_seed: int = 42,
    phase_01_dataset_opt_format: str = "auto",
    phase_01_dataset_opt_hf_split: str = "train",
    phase_01_dataset_opt_on_invalid: str = "fail",
    phase_01_dataset_opt_max_invalid_fraction: float = 0.0,
    phase_01_dataset_opt_allow_trailing_user: bool = False,
    phase_01_dataset_opt_tokenizer: str = "",
    phase_01_dataset_opt_max_download_bytes: int = 10737418240,
    phase_02_train_man_train_model: str = "Qwen/Qwen2.5-1.5B-Instruct",
    phase_02_train_man_train_batch: int = 128,
    phase_02_train_man_train_workers: int = 1,
    phase_02_train_man_train_gpu: int = 1,
    phase_02_train_man_train_iterations: int = 15,
    phase_02_train_man_train_group_size: int = 8,
    phase_02_train_man_train_lora_r: int = 16,
    phase_02_train_opt_learning_rate: float = 1e-05,
    phase_02_train_opt_max_seq_len: int = 8192,
    phase_02_train_opt_seed: int = 42,
    phase_02_train_opt_temperature: float = 0.7,
    phase_02_train_opt_max_new_tokens: int = 512,
    phase_02_train_opt_lora_alpha: int = 32,
    phase_02_train_opt_gradient_checkpointing: bool = True,
    phase_02_train_opt_resume: bool = True,
    phase_02_train_opt_mlflow_uri: str = "",
    phase_02_train_opt_launcher: str = "auto",
    phase_02_train_opt_oci_insecure: bool = False,
    phase_02_train_opt_oci_ca_bundle: str = "",
    phase_02_train_opt_backend: str = "",
    phase_02_train_opt_gpu_resource: str = "nvidia.com/gpu",
    phase_02_train_opt_cpu: str = "8",
    phase_02_train_opt_memory: str = "32Gi",
    phase_02_train_opt_env_vars: dict = {},
    phase_02_train_opt_runtime: str = "",
    phase_02_train_opt_runtime_kind: str = "ClusterTrainingRuntime",
    phase_02_train_opt_image: str = "",
    phase_02_train_opt_namespace: str = "",
    phase_02_train_opt_tolerations: list = [],
    phase_02_train_opt_node_selector: dict = {},
    phase_02_train_opt_labels: dict = {},
    phase_02_train_opt_annotations: dict = {},
    phase_02_train_opt_queue_name: str = "",
    phase_02_train_opt_cleanup_policy: str = "delete",
    phase_02_train_opt_delete_on_success: bool = False,
    phase_02_train_opt_start_timeout: int = 1800,
    phase_02_train_opt_timeout: int = 0,
    phase_02_train_opt_timeout_counts_pause: bool = False,
    phase_02_train_opt_api_outage_tolerance: int = 3600,
    phase_02_train_opt_progress_tracking: bool = True,
    phase_02_train_opt_progress_port: int = 28080,
    phase_02_train_opt_progress_poll_interval: int = 30,
    phase_02_train_opt_jit_checkpoint: bool = True,
    phase_04_registry_man_address: str = "",
    phase_04_registry_man_reg_name: str = "",
    phase_04_registry_man_reg_version: str = "",
    phase_04_registry_man_reg_author: str = "",
    phase_04_registry_opt_port: int = 443,
    phase_04_registry_opt_description: str = "",
    phase_04_registry_opt_format_name: str = "pytorch",
    phase_04_registry_opt_format_version: str = "1",
    phase_04_registry_opt_min_metric_name: str = "reward_gate_passed",
    phase_04_registry_opt_min_metric_value: float = 1.0,
    phase_04_registry_opt_model_uri: str = "",
    phase_04_registry_opt_s3_upload_prefix: str = "",
    phase_04_registry_opt_storage_key: str = "",
    phase_04_registry_opt_is_secure: bool = True,
    phase_04_registry_opt_allow_token_over_http: bool = False,
    phase_04_registry_opt_modelcar_uri: str = "",
    phase_04_registry_opt_modelcar_base_image: str = "registry.access.redhat.com/ubi9/ubi-micro:latest",
    phase_04_registry_opt_modelcar_insecure: bool = False,
    phase_04_registry_opt_deploy_inference_service: bool = False,
):
    r"""LoRA-GRPO (reinforcement learning from a verifiable reward): trains low-rank adapters on a prompt dataset.

    Dataset download and validation of the prompt rows (`reward_answer`: `question` + `ground_truth`, scored by the
    project's verifiable reward; `reward_tool_call`: scored by Training Hub's `tool_call_reward`), a TrainJob
    running Training Hub's `lora_grpo` (verl by default; `art`: one GPU with co-located vLLM), or TRL's GRPOTrainer
    with `launcher=local`; the reward gate (the mean reward of the last iterations against the first, a one-sided
    Welch test at 5 %: `train_model`'s `reward_gate_passed` metric); Model Registry registration of a model that
    passed it, then the optional modelcar and KServe deployment.

    Args:
    """
    dataset_task = tasks.dataset_step(
        dataset_download,
        SETTINGS,
        dataset_uri=phase_01_dataset_man_data_uri,
        train_split_ratio=phase_01_dataset_man_data_split,
        subset_count=phase_01_dataset_opt_subset,
        seed=phase_01_dataset_opt_seed,
        input_format=phase_01_dataset_opt_format,
        hf_split=phase_01_dataset_opt_hf_split,
        on_invalid=phase_01_dataset_opt_on_invalid,
        max_invalid_fraction=phase_01_dataset_opt_max_invalid_fraction,
        allow_trailing_user=phase_01_dataset_opt_allow_trailing_user,
        tokenizer_source=phase_01_dataset_opt_tokenizer,
        max_download_bytes=phase_01_dataset_opt_max_download_bytes,
        max_seq_len=phase_02_train_opt_max_seq_len,
    )

    training_task = train_model(
        **tasks.training_inputs(SETTINGS, dataset_task),
        training_algorithm="lora_grpo",
        training_base_model=phase_02_train_man_train_model,
        training_effective_batch_size=phase_02_train_man_train_batch,
        training_num_nodes=phase_02_train_man_train_workers,
        training_gpus_per_node=phase_02_train_man_train_gpu,
        training_grpo_iterations=phase_02_train_man_train_iterations,
        training_grpo_group_size=phase_02_train_man_train_group_size,
        training_lora_r=phase_02_train_man_train_lora_r,
        training_learning_rate=phase_02_train_opt_learning_rate,
        training_max_seq_len=phase_02_train_opt_max_seq_len,
        training_seed=phase_02_train_opt_seed,
        training_grpo_temperature=phase_02_train_opt_temperature,
        training_grpo_max_new_tokens=phase_02_train_opt_max_new_tokens,
        training_lora_alpha=phase_02_train_opt_lora_alpha,
        training_gradient_checkpointing=phase_02_train_opt_gradient_checkpointing,
        training_resume=phase_02_train_opt_resume,
        training_mlflow_tracking_uri=phase_02_train_opt_mlflow_uri,
        training_launcher=phase_02_train_opt_launcher,
        training_oci_insecure=phase_02_train_opt_oci_insecure,
        training_oci_ca_bundle=phase_02_train_opt_oci_ca_bundle,
        training_backend=phase_02_train_opt_backend,
        training_gpu_resource_name=phase_02_train_opt_gpu_resource,
        training_cpu_per_node=phase_02_train_opt_cpu,
        training_memory_per_node=phase_02_train_opt_memory,
        training_env_vars=phase_02_train_opt_env_vars,
        training_runtime_name=phase_02_train_opt_runtime,
        training_runtime_kind=phase_02_train_opt_runtime_kind,
        training_image=phase_02_train_opt_image,
        training_namespace=phase_02_train_opt_namespace,
        training_tolerations=phase_02_train_opt_tolerations,
        training_node_selector=phase_02_train_opt_node_selector,
        training_pod_labels=phase_02_train_opt_labels,
        training_pod_annotations=phase_02_train_opt_annotations,
        training_queue_name=phase_02_train_opt_queue_name,
        training_cleanup_policy=phase_02_train_opt_cleanup_policy,
        training_delete_on_success=phase_02_train_opt_delete_on_success,
        training_start_timeout_seconds=phase_02_train_opt_start_timeout,
        training_timeout_seconds=phase_02_train_opt_timeout,
        training_timeout_counts_paused_time=phase_02_train_opt_timeout_counts_pause,
        training_api_outage_tolerance_seconds=phase_02_train_opt_api_outage_tolerance,
        training_progress_tracking=phase_02_train_opt_progress_tracking,
        training_progress_metrics_port=phase_02_train_opt_progress_port,
        training_progress_poll_interval_seconds=phase_02_train_opt_progress_poll_interval,
        training_jit_checkpoint=phase_02_train_opt_jit_checkpoint,
    )
    tasks.set_up_training(training_task, SETTINGS, "Fine-tune (LoRA-GRPO)")

    tasks.registry_step(
        model_registry,
        SETTINGS,
        dataset_task,
        training_task,
        registry_address=phase_04_registry_man_address,
        model_name=phase_04_registry_man_reg_name,
        model_version=phase_04_registry_man_reg_version,
        author=phase_04_registry_man_reg_author,
        registry_port=phase_04_registry_opt_port,
        description=phase_04_registry_opt_description,
        model_format_name=phase_04_registry_opt_format_name,
        model_format_version=phase_04_registry_opt_format_version,
        min_metric_name=phase_04_registry_opt_min_metric_name,
        min_metric_value=phase_04_registry_opt_min_metric_value,
        model_uri=phase_04_registry_opt_model_uri,
        s3_upload_prefix=phase_04_registry_opt_s3_upload_prefix,
        storage_key=phase_04_registry_opt_storage_key,
        is_secure=phase_04_registry_opt_is_secure,
        allow_token_over_http=phase_04_registry_opt_allow_token_over_http,
        modelcar_uri=phase_04_registry_opt_modelcar_uri,
        modelcar_base_image=phase_04_registry_opt_modelcar_base_image,
        modelcar_insecure=phase_04_registry_opt_modelcar_insecure,
        deploy_inference_service=phase_04_registry_opt_deploy_inference_service,
    )


if __name__ == "__main__":
    tasks.compile_beside(lora_grpo_pipeline, __file__)
