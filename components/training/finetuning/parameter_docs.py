"""Descriptions of the ``train_model`` parameters: the component docstring, the dashboard and the README."""

PARAMETER_DOCS = {
    "train_dataset": (
        "Chat JSONL file (or a directory with one `.jsonl` / `train.jsonl`); metadata "
        "`source_uri`/`sha256` are carried into the model metadata."
    ),
    "eval_dataset": (
        "Optional chat JSONL; empty = none. local: `eval_loss` metric; osft: `validation_data_path`; "
        "lora: `eval_data_path`; sft: not used (instructlab-training has no eval file)."
    ),
    "base_model": (
        "HF id (downloaded with `HF_TOKEN`), local path, `pvc://<claim>/<path>` (claim mounted via the "
        "volumes passthrough), `s3://<bucket>/<prefix>` (RHOAI data-connection env). `oci://` is not "
        "supported yet."
    ),
    "task_config": (
        "Volumes (workspace PVC), tolerations, node selector, affinity, env of the task, handed to the TrainJob."
    ),
    "algorithm": ("`sft` \\| `osft` \\| `lora`."),
    "backend": (
        "`trainjob` (Kubeflow Trainer v2) \\| `pytorchjob` (Training Operator v1; needs `training_image`) \\| `auto` "
        "(trainjob when its runtime exists, else pytorchjob) \\| `local`."
    ),
    "num_epochs": ("Passes over the data (>= 1)."),
    "effective_batch_size": ("Samples per optimizer step."),
    "learning_rate": ("Peak learning rate (> 0)."),
    "max_seq_len": ("Longer samples are dropped."),
    "max_tokens_per_gpu": (
        "Padded tokens per micro-batch (gradient accumulation fills the effective batch); >= `max_seq_len`."
    ),
    "lr_scheduler": ("`linear`, `cosine`, `cosine_with_restarts`, `polynomial`, `constant`, `constant_with_warmup`."),
    "warmup_steps": ("Linear warm-up steps."),
    "seed": ("Seed of init, data order and dropout (reaches every algorithm: `random_seed` for SFT)."),
    "unfreeze_rank_ratio": ("OSFT: trained fraction of each target matrix's rank, in (0, 1]."),
    "lora_r": ("LoRA rank (>= 1)."),
    "lora_alpha": ("LoRA scaling alpha."),
    "lora_dropout": ("LoRA dropout, in [0, 1)."),
    "use_liger": ("Liger kernels (Training Hub SFT/OSFT)."),
    "checkpoint_at_epoch": ("Checkpoint after every epoch (local: resumable state)."),
    "save_final_checkpoint": ("Keep the final checkpoint (OSFT: False needs `checkpoint_at_epoch`)."),
    "fsdp_sharding_strategy": ("`FULL_SHARD`, `SHARD_GRAD_OP`, `NO_SHARD`, `HYBRID_SHARD` (SFT)."),
    "resume": ("Resume from the newest complete checkpoint of this run/task; False wipes the run directory first."),
    "max_steps": ("Stop after this many optimizer steps (0 = no limit)."),
    "checkpoint_interval_steps": (
        "Local backend: also save a resumable checkpoint every N steps (0 = off); SIGTERM always saves one."
    ),
    "num_nodes": ("TrainJob nodes (pods); Training Hub's nnodes."),
    "gpus_per_node": ("GPUs per node: numProcPerNode, the GPU resource count and Training Hub's nproc_per_node."),
    "gpu_resource_name": ("Extended resource name of the GPUs (e.g. nvidia.com/gpu, amd.com/gpu)."),
    "cpu_per_node": ("CPU request per node ('' = the runtime's)."),
    "memory_per_node": ("Memory request per node ('' = the runtime's)."),
    "runtime_name": ("The Trainer runtime the TrainJob references."),
    "runtime_kind": ("ClusterTrainingRuntime | TrainingRuntime."),
    "training_image": ("Image override of the trainer ('' = the runtime's image); required for `pytorchjob`."),
    "namespace": ('TrainJob namespace; "" = the pipeline pod\'s namespace.'),
    "tolerations": ("Extra tolerations of the training pods (joined with the task's passthrough)."),
    "node_selector": ("Extra node selector of the training pods."),
    "pod_labels": ("Extra labels of the training pods."),
    "pod_annotations": ("Extra annotations of the training pods."),
    "hf_token_secret_name": ("Secret whose `HF_TOKEN` key becomes the pods' `HF_TOKEN` (optional ref)."),
    "s3_secret_name": (
        "Data-connection secret: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_S3_ENDPOINT`, `AWS_DEFAULT_REGION`."
    ),
    "cleanup_policy": ("On failure/timeout/cancel: `delete` \\| `keep` \\| `suspend` the TrainJob/PyTorchJob."),
    "delete_on_success": ("Delete the TrainJob after it completes."),
    "start_timeout_seconds": ("Fail (and clean up) when the training pods are not running after this long."),
    "timeout_seconds": ("Total deadline (0 = none); also the TrainJob's activeDeadlineSeconds."),
    "timeout_counts_paused_time": (
        "Whether time the job spends paused (suspended from the dashboard) counts against `timeout_seconds`."
    ),
    "progress_tracking": (
        "Show progress (steps, epochs, loss, ETA) on the OpenShift AI Training Jobs page: annotates the job and "
        "serves it from the rank-0 pod."
    ),
    "progress_metrics_port": ("Port of the rank-0 pod's progress server (1024-65535)."),
    "progress_poll_interval_seconds": ("How often the dashboard's controller polls that server (5-300 s)."),
    "jit_checkpoint": (
        "Training Hub saves a just-in-time checkpoint on SIGTERM (pause/preemption); a resumed job continues from it."
    ),
    "workspace_path": ('Pass `dsl.WORKSPACE_PATH_PLACEHOLDER`; "" = a temporary directory (local backend only).'),
    "mlflow_tracking_uri": (
        "MLflow tracking URI ('' = `MLFLOW_TRACKING_URI` if set, else no tracking): params, per-step metrics, model "
        "location; the run id goes to the model's `mlflow_run_id`."
    ),
    "run_id": ("The KFP run id (a placeholder by default): names the run directory and the TrainJob; leave as is."),
    "task_name": ("The KFP task name (a placeholder by default); leave as is."),
    "model": (
        "The final model in Hugging Face save_pretrained layout (weights + tokenizer); metadata: "
        "checkpoint_path (its real location on the workspace PVC), base_model, algorithm, "
        "hyperparameters, dataset_uri, dataset_sha256, trainjob_name (the TrainJob or PyTorchJob), "
        "backend (the one used), mlflow_run_id ('' without tracking)."
    ),
    "metrics": (
        "final_loss, min_loss, steps, train_seconds, tokens_per_second (the last value logged); eval_loss "
        "for local runs."
    ),
    "report": (
        "HTML: the loss and learning-rate curves (embedded PNG), summary, hyper-parameters and the TrainJob name."
    ),
}
