"""Descriptions of the ``train_model`` parameters: the component docstring, the dashboard and the README."""

PARAMETER_DOCS = {
    "dataset_path": (
        "Training JSONL as a path (absolute, or relative to `pvc_path`) when no dataset artifact is wired; "
        '`dataset="path/to/data.jsonl"` (the guide\'s form) lands here.'
    ),
    "dataset": (
        "Chat JSONL file (or a directory with one `.jsonl` / `train.jsonl`); metadata "
        "`dataset_uri`/`dataset_sha256` (`components/_common/dataset_metadata.py`) are carried into the model metadata."
    ),
    "eval_dataset": (
        "Optional chat JSONL; empty = none. local: `eval_loss` metric; osft: `validation_data_path`; "
        "lora: `eval_data_path`; sft: not used (instructlab-training has no eval file)."
    ),
    "training_base_model": (
        "HF id (downloaded with `HF_TOKEN`), local path, `pvc://<claim>/<path>` (claim mounted via the "
        "volumes passthrough), `s3://<bucket>/<prefix>` (RHOAI data-connection env), or "
        "`oci://<registry>/<repository>[:<tag>|@sha256:<digest>]` (a modelcar's `/models` or an ORAS artifact, "
        "pulled once per run into the workspace with the `OCI_PULL_SECRET_MODEL_DOWNLOAD` config.json)."
    ),
    "task_config": (
        "Volumes (workspace PVC), tolerations, node selector, affinity, env of the task, handed to the TrainJob."
    ),
    "training_algorithm": (
        "`sft` | `osft` | `lora` | `grpo` | `lora_grpo` (case-insensitive: the guide's `OSFT` works). GRPO trains on "
        "a prompt dataset with a verifiable reward (`dataset_download`'s `reward_answer` / `reward_tool_call` rows)."
    ),
    "training_backend": (
        "What trains: Training Hub's backend `instructlab-training` (SFT), `mini-trainer` (OSFT), `unsloth` (LoRA), "
        "'' = the algorithm's default; or `transformers`: the project's own transformers/peft trainer (any "
        "algorithm) under torchrun in the job's pods (DDP; NCCL on GPUs, gloo on CPU), on the `torch-distributed` "
        "runtime by default."
    ),
    "training_launcher": (
        "`trainjob` (Kubeflow Trainer v2) | `pytorchjob` (Training Operator v1; needs `training_image`) | `auto` "
        "(trainjob when its runtime exists, else pytorchjob) | `local`."
    ),
    "training_num_epochs": ("Passes over the data (>= 1)."),
    "training_effective_batch_size": ("Samples per optimizer step."),
    "training_learning_rate": ("Peak learning rate (> 0)."),
    "training_max_seq_len": ("Longer samples are dropped."),
    "training_max_tokens_per_gpu": (
        "Padded tokens per micro-batch (gradient accumulation fills the effective batch); >= `max_seq_len`."
    ),
    "training_lr_scheduler": (
        "`linear`, `cosine`, `cosine_with_restarts`, `polynomial`, `constant`, `constant_with_warmup`."
    ),
    "training_warmup_steps": ("Linear warm-up steps."),
    "training_seed": ("Seed of init, data order and dropout (reaches every algorithm: `random_seed` for SFT)."),
    "training_unfreeze_rank_ratio": ("OSFT: trained fraction of each target matrix's rank, in (0, 1]."),
    "training_lora_r": ("LoRA rank (>= 1)."),
    "training_lora_alpha": ("LoRA scaling alpha."),
    "training_lora_dropout": ("LoRA dropout, in [0, 1)."),
    "training_lora_use_dora": (
        "LoRA: DoRA (weight-decomposed LoRA: a trained magnitude per output row besides the low-rank direction); "
        "peft's `use_dora`, Training Hub `lora_sft`'s `use_dora` (training-hub >= 0.6.0)."
    ),
    "training_lora_use_rslora": (
        "LoRA: rank-stabilised scaling `lora_alpha / sqrt(lora_r)` instead of `lora_alpha / lora_r` (peft's and "
        "Training Hub `lora_sft`'s `use_rslora`)."
    ),
    "training_lora_init_weights": (
        "LoRA: peft's `init_lora_weights`: `true` (B = 0, the adapter starts as the base model), `gaussian`, "
        "`pissa`, `olora`, `eva`, `orthogonal`, or `false` (random B: tests only)."
    ),
    "training_lora_load_in_4bit": (
        "QLoRA: load the frozen base model in 4 bits (bitsandbytes; needs a CUDA GPU); Training Hub `lora_sft`'s "
        "`load_in_4bit`."
    ),
    "training_lora_load_in_8bit": ("QLoRA: load the frozen base model in 8 bits (bitsandbytes; needs a CUDA GPU)."),
    "training_lora_bnb_4bit_quant_type": ("QLoRA 4-bit: `nf4` | `fp4`."),
    "training_lora_bnb_4bit_compute_dtype": ("QLoRA 4-bit: compute dtype `bfloat16` | `float16` | `float32`."),
    "training_lora_bnb_4bit_use_double_quant": ("QLoRA 4-bit: also quantise the quantisation constants."),
    "training_grpo_iterations": (
        "GRPO: training iterations (Training Hub's `num_iterations`; the local launcher's optimizer steps); each one "
        "samples `effective_batch_size` prompts."
    ),
    "training_grpo_group_size": (
        "GRPO: completions sampled per prompt (>= 2); each one's advantage is its reward against its group's mean."
    ),
    "training_grpo_temperature": ("GRPO: sampling temperature of the completions (> 0)."),
    "training_grpo_max_new_tokens": ("GRPO: most tokens per completion (Training Hub's `max_tokens`)."),
    "training_use_liger": ("Liger kernels (Training Hub SFT/OSFT)."),
    "training_gradient_checkpointing": (
        "Recompute activations in the backward pass instead of keeping them (less memory, ~30% more compute). "
        "The local launcher and `training_backend=transformers` honour both; Training Hub's backends always "
        "recompute (when the model supports it), so False there runs as True, with a note in the log."
    ),
    "training_checkpoint_at_epoch": ("Checkpoint after every epoch (local: resumable state)."),
    "training_save_final_checkpoint": ("Keep the final checkpoint (OSFT: False needs `checkpoint_at_epoch`)."),
    "training_fsdp_sharding_strategy": (
        "`FULL_SHARD`, `SHARD_GRAD_OP`, `NO_SHARD`, `HYBRID_SHARD`: SFT's FSDP (Training Hub's, or FSDP2 in the "
        "`transformers` backend; its LoRA and OSFT use DDP)."
    ),
    "training_resume": (
        "Resume from the newest complete checkpoint of this run/task; False wipes the run directory first."
    ),
    "training_max_steps": ("Stop after this many optimizer steps (0 = no limit)."),
    "training_checkpoint_interval_steps": (
        "Local launcher and `transformers` backend: also save a resumable checkpoint every N steps (0 = off); SIGTERM "
        "always saves one."
    ),
    "training_num_nodes": ("TrainJob nodes (pods); Training Hub's nnodes."),
    "training_gpus_per_node": (
        "GPUs per node: numProcPerNode, the GPU resource count and Training Hub's nproc_per_node."
    ),
    "training_gpu_resource_name": ("Extended resource name of the GPUs (e.g. nvidia.com/gpu, amd.com/gpu)."),
    "training_cpu_per_node": ("CPU request per node ('' = the runtime's)."),
    "training_memory_per_node": ("Memory request per node ('' = the runtime's)."),
    "training_runtime_name": (
        "The Trainer runtime the TrainJob references; '' = the backend's: `torch-distributed` for "
        "`training_backend='transformers'`, else `training-hub`."
    ),
    "training_runtime_kind": ("ClusterTrainingRuntime | TrainingRuntime."),
    "training_image": ("Image override of the trainer ('' = the runtime's image); required for `pytorchjob`."),
    "training_namespace": ('TrainJob namespace; "" = the pipeline pod\'s namespace.'),
    "training_env_vars": (
        "Literal environment variables of the training pods (secrets: use the mounted secrets instead); SFT "
        "pipelines set `INSTRUCTLAB_NCCL_TIMEOUT_MS`."
    ),
    "training_tolerations": ("Extra tolerations of the training pods (joined with the task's passthrough)."),
    "training_node_selector": ("Extra node selector of the training pods."),
    "training_pod_labels": ("Extra labels of the training pods."),
    "training_pod_annotations": ("Extra annotations of the training pods."),
    "hf_token_secret_name": ("Secret whose `HF_TOKEN` key becomes the pods' `HF_TOKEN` (optional ref)."),
    "s3_secret_name": (
        "Data-connection secret: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_S3_ENDPOINT`, `AWS_DEFAULT_REGION`."
    ),
    "training_oci_insecure": (
        "oci:// base models: skip TLS verification and allow plain HTTP (in-cluster registries only); default verifies."
    ),
    "training_oci_ca_bundle": (
        "oci:// base models: CA bundle (PEM file path in the task, or PEM text) that verifies the registry's TLS "
        "certificate; '' = the system CAs (or REQUESTS_CA_BUNDLE)."
    ),
    "training_copy_model_to_artifact": (
        "Also copy the trained weights into the `output_model` artifact (the pipeline root's object store), as "
        "every run did before. Costs the model's size three times per run: the launcher pod's disk (evicted "
        "without ephemeral storage), the upload, and each reading step's download; and it stays in the object store "
        "for every run. Off: the artifact holds a manifest and the steps read the weights on the workspace, which is "
        "deleted when the run succeeds (keep the model with the registry's modelcar_uri or s3_upload_prefix)."
    ),
    "training_queue_name": (
        "Kueue LocalQueue to submit the job to (label `kueue.x-k8s.io/queue-name`); Kueue admits it, the step waits "
        "logging the queue state and never resumes it itself; '' = no queue."
    ),
    "training_hardware_profile": (
        "A RHOAI Hardware Profile's name (RHOAI >= 2.19), read at run time: its resources, node selector, "
        "tolerations and Kueue queue go into the job's pods (its accelerator count must equal "
        "`training_gpus_per_node`). '' = none."
    ),
    "training_cleanup_policy": (
        "When the job failed or timed out, or the run was cancelled: `delete` | `keep` | `suspend` the "
        "TrainJob/PyTorchJob (never for the launcher's own trouble, e.g. an API outage); when the API cannot be "
        "reached the error names the `kubectl` command."
    ),
    "training_delete_on_success": ("Delete the TrainJob after it completes."),
    "training_start_timeout_seconds": ("Fail (and clean up) when the training pods are not running after this long."),
    "training_timeout_seconds": ("Total deadline (0 = none); also the TrainJob's activeDeadlineSeconds."),
    "training_timeout_counts_paused_time": (
        "Whether time the job spends paused (suspended from the dashboard) counts against `training_timeout_seconds`."
    ),
    "training_api_outage_tolerance_seconds": (
        "How long the step keeps following through an unreachable or erroring Kubernetes API (0 = as long as "
        "`training_timeout_seconds` allows); then it fails, leaving the job running, and names it."
    ),
    "training_progress_tracking": (
        "Show progress (steps, epochs, loss, ETA) on the OpenShift AI Training Jobs page: annotates the job and "
        "serves it from the rank-0 pod."
    ),
    "training_progress_metrics_port": ("Port of the rank-0 pod's progress server (1024-65535)."),
    "training_progress_poll_interval_seconds": ("How often the dashboard's controller polls that server (5-300 s)."),
    "training_jit_checkpoint": (
        "The training pods (Training Hub, or the `transformers` backend at the end of the running step) save a "
        "just-in-time checkpoint on SIGTERM (pause/preemption); a resumed job continues from it."
    ),
    "pvc_path": ('Pass `dsl.WORKSPACE_PATH_PLACEHOLDER`; "" = a temporary directory (local launcher only).'),
    "training_mlflow_tracking_uri": (
        "MLflow tracking URI ('' = `MLFLOW_TRACKING_URI` if set, else no tracking): params, per-step metrics, model "
        "location; the run id goes to the model's `mlflow_run_id`."
    ),
    "run_id": ("The KFP run id (a placeholder by default): names the run directory and the TrainJob; leave as is."),
    "task_name": ("The KFP task name (a placeholder by default); leave as is."),
    "output_model": (
        "The final model. From a cluster job: a manifest (`kfp_finetune_model.json`: the weights' directory on "
        "the workspace PVC, each file's size and fingerprint, their digest), not the weights, which the evaluation "
        "and registry steps read in place (`components/_common/model_location.py`); with "
        "training_copy_model_to_artifact or the local launcher, also the files in Hugging Face save_pretrained "
        "layout. Metadata: weights_path, weights_storage (`workspace` or `artifact`), weights_bytes, "
        "weights_digest, weights_in_artifact, checkpoint_path (its real location on the workspace PVC), "
        "base_model, algorithm, "
        "hyperparameters, dataset_uri, dataset_sha256, job_name and job_kind (the TrainJob or PyTorchJob; empty "
        "for the local launcher), backend (the launcher used: `trainjob`, `pytorchjob` or `local`), "
        "mlflow_run_id ('' without tracking); for an oci:// base model also "
        "base_model_digest (the manifest digest it resolved to), base_model_resolved (the reference pinned to it) "
        "and base_model_path (the pulled copy on the workspace)."
    ),
    "output_metrics": (
        "final_loss, min_loss, steps, train_seconds, tokens_per_second (the last value logged); eval_loss "
        "and base_eval_loss (the base model's held-out loss before training) for local runs."
    ),
    "output_loss_chart": (
        "HTML: the loss and learning-rate curves (embedded PNG), summary, hyper-parameters and the TrainJob name."
    ),
}
