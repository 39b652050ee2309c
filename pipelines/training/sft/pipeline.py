"""Supervised fine-tuning (SFT) of a chat model with Training Hub on Kubeflow Trainer v2.

``PYTHONPATH=$(pwd) python pipelines/training/sft/pipeline.py`` writes ``pipeline.yaml`` beside it;
edit it as the RHOAI guide's *Editing Existing Pipelines* describes.
"""

# =============================================================================
# PVC Configuration (COMPILE-TIME settings)
# =============================================================================
PVC_SIZE = "50Gi"
PVC_STORAGE_CLASS = "nfs-csi"
PVC_ACCESS_MODES = ["ReadWriteMany"]
PIPELINE_NAME = "sft-pipeline"

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
def sft_pipeline(
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
    phase_02_train_man_train_epochs: int = 3,
    phase_02_train_man_train_batch: int = 128,
    phase_02_train_man_train_tokens: int = 64000,
    phase_02_train_man_train_workers: int = 4,
    phase_02_train_man_train_gpu: int = 1,
    phase_02_train_opt_learning_rate: float = 2e-05,
    phase_02_train_opt_max_seq_len: int = 8192,
    phase_02_train_opt_lr_scheduler: str = "cosine",
    phase_02_train_opt_lr_warmup: int = 0,
    phase_02_train_opt_seed: int = 42,
    phase_02_train_opt_use_liger: bool = False,
    phase_02_train_opt_gradient_checkpointing: bool = True,
    phase_02_train_opt_save_epoch: bool = False,
    phase_02_train_opt_save_final: bool = True,
    phase_02_train_opt_fsdp_sharding: str = "FULL_SHARD",
    phase_02_train_opt_resume: bool = True,
    phase_02_train_opt_max_steps: int = 0,
    phase_02_train_opt_checkpoint_interval: int = 0,
    phase_02_train_opt_mlflow_uri: str = "",
    phase_02_train_opt_launcher: str = "auto",
    phase_02_train_opt_oci_insecure: bool = False,
    phase_02_train_opt_oci_ca_bundle: str = "",
    phase_02_train_opt_backend: str = "",
    phase_02_train_opt_gpu_resource: str = "nvidia.com/gpu",
    phase_02_train_opt_cpu: str = "4",
    phase_02_train_opt_memory: str = "64Gi",
    phase_02_train_opt_env_vars: dict = {"INSTRUCTLAB_NCCL_TIMEOUT_MS": "600000"},  # the NCCL timeout, raisable
    phase_02_train_opt_runtime: str = "",
    phase_02_train_opt_runtime_kind: str = "ClusterTrainingRuntime",
    phase_02_train_opt_image: str = "",
    phase_02_train_opt_namespace: str = "",
    phase_02_train_opt_tolerations: list = [],
    phase_02_train_opt_node_selector: dict = {},
    phase_02_train_opt_labels: dict = {},
    phase_02_train_opt_annotations: dict = {},
    phase_02_train_opt_queue_name: str = "",
    phase_02_train_opt_hardware_profile: str = "",
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
    phase_02_train_opt_copy_model_to_artifact: bool = False,
    phase_03_eval_man_eval_tasks: list = ["arc_easy"],
    phase_03_eval_opt_batch: str = "auto",
    phase_03_eval_opt_limit: int = -1,
    phase_03_eval_opt_num_fewshot: int = -1,
    phase_03_eval_opt_gen_kwargs: dict = {},
    phase_03_eval_opt_model_args: dict = {},
    phase_03_eval_opt_chat_template: bool = True,
    phase_03_eval_opt_backend: str = "hf",
    phase_03_eval_opt_seed: int = 42,
    phase_03_eval_opt_log_samples: bool = False,
    phase_03_eval_opt_heldout_samples: int = 200,
    phase_03_eval_opt_max_new_tokens: int = 64,
    phase_03_eval_opt_device: str = "",
    phase_03_eval_opt_bootstrap_iters: int = 100000,
    phase_03_eval_opt_allow_empty_eval: bool = True,
    phase_03_eval_opt_evaluate_base_model: bool = True,
    phase_03_eval_opt_eval_backend: str = "lm-eval",
    phase_03_eval_opt_hardware_profile: str = "",
    phase_03_eval_opt_evalhub_url: str = "",
    phase_04_registry_man_address: str = "",
    phase_04_registry_man_reg_name: str = "",
    phase_04_registry_man_reg_version: str = "",
    phase_04_registry_man_reg_author: str = "",
    phase_04_registry_opt_port: int = 443,
    phase_04_registry_opt_description: str = "",
    phase_04_registry_opt_format_name: str = "pytorch",
    phase_04_registry_opt_format_version: str = "1",
    phase_04_registry_opt_min_metric_name: str = "",
    phase_04_registry_opt_min_metric_value: float = 0.0,
    phase_04_registry_opt_min_improvement_metric: str = "",
    phase_04_registry_opt_min_improvement: float = 0.0,
    phase_04_registry_opt_max_regression: float = -1.0,
    phase_04_registry_opt_max_regression_relative: bool = False,
    phase_04_registry_opt_model_uri: str = "",
    phase_04_registry_opt_s3_upload_prefix: str = "",
    phase_04_registry_opt_storage_key: str = "",
    phase_04_registry_opt_is_secure: bool = True,
    phase_04_registry_opt_allow_token_over_http: bool = False,
    phase_04_registry_opt_modelcar_uri: str = "",
    phase_04_registry_opt_modelcar_base_image: str = "registry.access.redhat.com/ubi9/ubi-micro:latest",
    phase_04_registry_opt_modelcar_insecure: bool = False,
    phase_04_registry_opt_deploy_inference_service: bool = False,
    phase_04_registry_opt_deploy_hardware_profile: str = "",
):
    r"""Supervised fine-tuning (SFT) of a chat model with Training Hub on Kubeflow Trainer v2.

    Dataset download and validation, a TrainJob, lm-eval evaluation and Model Registry registration; every knob
    exposed.

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
        training_algorithm="sft",
        training_base_model=phase_02_train_man_train_model,
        training_num_epochs=phase_02_train_man_train_epochs,
        training_effective_batch_size=phase_02_train_man_train_batch,
        training_max_tokens_per_gpu=phase_02_train_man_train_tokens,
        training_num_nodes=phase_02_train_man_train_workers,
        training_gpus_per_node=phase_02_train_man_train_gpu,
        training_learning_rate=phase_02_train_opt_learning_rate,
        training_max_seq_len=phase_02_train_opt_max_seq_len,
        training_lr_scheduler=phase_02_train_opt_lr_scheduler,
        training_warmup_steps=phase_02_train_opt_lr_warmup,
        training_seed=phase_02_train_opt_seed,
        training_use_liger=phase_02_train_opt_use_liger,
        training_gradient_checkpointing=phase_02_train_opt_gradient_checkpointing,
        training_checkpoint_at_epoch=phase_02_train_opt_save_epoch,
        training_save_final_checkpoint=phase_02_train_opt_save_final,
        training_fsdp_sharding_strategy=phase_02_train_opt_fsdp_sharding,
        training_resume=phase_02_train_opt_resume,
        training_max_steps=phase_02_train_opt_max_steps,
        training_checkpoint_interval_steps=phase_02_train_opt_checkpoint_interval,
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
        training_hardware_profile=phase_02_train_opt_hardware_profile,
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
        training_copy_model_to_artifact=phase_02_train_opt_copy_model_to_artifact,
    )
    tasks.set_up_training(training_task, SETTINGS, "Fine-tune (SFT)")

    eval_task = tasks.evaluate_base_and_tuned(
        lm_eval,
        SETTINGS,
        dataset_task,
        training_task,
        base_model=phase_02_train_man_train_model,
        evaluate_base_model=phase_03_eval_opt_evaluate_base_model,
        task_names=phase_03_eval_man_eval_tasks,
        batch_size=phase_03_eval_opt_batch,
        limit=phase_03_eval_opt_limit,
        num_fewshot=phase_03_eval_opt_num_fewshot,
        gen_kwargs=phase_03_eval_opt_gen_kwargs,
        model_args=phase_03_eval_opt_model_args,
        apply_chat_template=phase_03_eval_opt_chat_template,
        backend=phase_03_eval_opt_backend,
        seed=phase_03_eval_opt_seed,
        log_samples=phase_03_eval_opt_log_samples,
        max_samples=phase_03_eval_opt_heldout_samples,
        max_new_tokens=phase_03_eval_opt_max_new_tokens,
        device=phase_03_eval_opt_device,
        bootstrap_iters=phase_03_eval_opt_bootstrap_iters,
        allow_empty_eval_dataset=phase_03_eval_opt_allow_empty_eval,
        eval_backend=phase_03_eval_opt_eval_backend,
        hardware_profile=phase_03_eval_opt_hardware_profile,
        evalhub_url=phase_03_eval_opt_evalhub_url,
    )

    tasks.registry_step(
        model_registry,
        SETTINGS,
        dataset_task,
        training_task,
        eval_task,
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
        min_improvement_metric=phase_04_registry_opt_min_improvement_metric,
        min_improvement=phase_04_registry_opt_min_improvement,
        max_regression=phase_04_registry_opt_max_regression,
        max_regression_relative=phase_04_registry_opt_max_regression_relative,
        model_uri=phase_04_registry_opt_model_uri,
        s3_upload_prefix=phase_04_registry_opt_s3_upload_prefix,
        storage_key=phase_04_registry_opt_storage_key,
        is_secure=phase_04_registry_opt_is_secure,
        allow_token_over_http=phase_04_registry_opt_allow_token_over_http,
        modelcar_uri=phase_04_registry_opt_modelcar_uri,
        modelcar_base_image=phase_04_registry_opt_modelcar_base_image,
        modelcar_insecure=phase_04_registry_opt_modelcar_insecure,
        deploy_inference_service=phase_04_registry_opt_deploy_inference_service,
        deploy_hardware_profile=phase_04_registry_opt_deploy_hardware_profile,
    )


if __name__ == "__main__":
    tasks.compile_beside(sft_pipeline, __file__)
