"""Supervised fine-tuning (SFT) of a chat model with Training Hub on Kubeflow Trainer v2.

Compile: ``PYTHONPATH=$(pwd) python pipelines/training/sft/pipeline.py`` writes ``pipeline.yaml`` beside
this file. Edit the compile-time constants below, or the run-time parameters of
``sft_pipeline`` (its signature), as the RHOAI guide's *Editing Existing Pipelines* describes.
"""

# =============================================================================
# PVC Configuration (COMPILE-TIME settings)
# =============================================================================
PVC_SIZE = "50Gi"
PVC_STORAGE_CLASS = "nfs-csi"
PVC_ACCESS_MODES = ["ReadWriteMany"]
PIPELINE_NAME = "sft-pipeline"

# =============================================================================
# Step images (COMPILE-TIME settings): every step runs on the project's image, built from the Containerfile
# =============================================================================
IMAGE = ""  # "" = the published quay.io/kfp-finetune/kfp-finetune:<version>; or your build (README, "Run on a cluster")
EVAL_IMAGE = ""  # "" = IMAGE if set, else the published <version>-cuda build (the CPU one when EVAL_GPUS = 0)

# The steps' other settings are compile-time too: pass them to pipeline_settings below (e.g. eval_cpu_limit="8",
# dataset_memory_request="4Gi"; pipelines/training/finetuning/settings.py names every one). KFP_FINETUNE_<NAME>
# environment variables and `kfp-finetune compile` flags override them.
# =============================================================================

from kfp import compiler, dsl  # noqa: E402

from pipelines.training.finetuning import tasks  # noqa: E402
from pipelines.training.finetuning.settings import pipeline_settings  # noqa: E402

#: The constants above, then KFP_FINETUNE_* variables, then `kfp-finetune compile` flags.
SETTINGS = pipeline_settings(
    pvc_size=PVC_SIZE,
    pvc_storage_class=PVC_STORAGE_CLASS,
    pvc_access_modes=PVC_ACCESS_MODES,
    pipeline_name=PIPELINE_NAME,
    image=IMAGE,
    eval_image=EVAL_IMAGE,
)
#: The four components, each built for the step images above.
dataset_download, train_model, lm_eval, model_registry = tasks.step_components(SETTINGS)


@dsl.pipeline(name=SETTINGS.pipeline_name, pipeline_config=tasks.pipeline_config(SETTINGS))
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
    phase_02_train_opt_env_vars: dict = {
        "INSTRUCTLAB_NCCL_TIMEOUT_MS": "600000"
    },  # instructlab-training's collective timeout, shown and raisable
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
        phase_01_dataset_man_data_uri: Hub id `org/name[:subset][@revision]` (token from env HF_TOKEN),
            `s3://bucket/key-or-prefix/` (RHOAI data-connection env vars), `http(s)://.../file.jsonl`,
            `pvc://claim/path` (under $KFP_FINETUNE_PVC_ROOT, default /mnt/pvc) or a local path. Files: .jsonl, .json,
            .parquet, .csv (+.gz).
        phase_01_dataset_man_data_split: Fraction of the kept rows used for training, in (0, 1]; 1.0 = no eval split.
        phase_01_dataset_opt_subset: Rows to keep, drawn with `seed` (0 = all; more than available warns and keeps all).
        phase_01_dataset_opt_seed: Seed of the subset and the split; same input and seed give byte-identical files.
        phase_01_dataset_opt_format: auto | messages | alpaca | sharegpt | prompt_completion (auto detects from the
            first rows); GRPO's prompt rows: reward_answer | reward_tool_call.
        phase_01_dataset_opt_hf_split: Split of a Hub dataset to read.
        phase_01_dataset_opt_on_invalid: fail (any bad row fails the task) | drop (drop and count bad rows).
        phase_01_dataset_opt_max_invalid_fraction: With on_invalid=drop, the largest rejected fraction accepted, in [0,
            1].
        phase_01_dataset_opt_allow_trailing_user: Accept conversations that end on a user turn.
        phase_01_dataset_opt_tokenizer: HF id or local directory of a tokenizer for token statistics ("" = none).
        phase_01_dataset_opt_max_download_bytes: Refuse remote downloads larger than this many bytes.
        phase_02_train_man_train_model: HF id (downloaded with `HF_TOKEN`), local path, `pvc://<claim>/<path>` (claim
            mounted via the volumes passthrough), `s3://<bucket>/<prefix>` (RHOAI data-connection env), or
            `oci://<registry>/<repository>[:<tag>|@sha256:<digest>]` (a modelcar's `/models` or an ORAS artifact, pulled
            once per run into the workspace with the `OCI_PULL_SECRET_MODEL_DOWNLOAD` config.json).
        phase_02_train_man_train_epochs: Passes over the data (>= 1).
        phase_02_train_man_train_batch: Samples per optimizer step.
        phase_02_train_man_train_tokens: Padded tokens per micro-batch (gradient accumulation fills the effective
            batch); >= `max_seq_len`.
        phase_02_train_man_train_workers: TrainJob nodes (pods); Training Hub's nnodes.
        phase_02_train_man_train_gpu: GPUs per node: numProcPerNode, the GPU resource count and Training Hub's
            nproc_per_node.
        phase_02_train_opt_learning_rate: Peak learning rate (> 0).
        phase_02_train_opt_max_seq_len: Longer samples are dropped.
        phase_02_train_opt_lr_scheduler: `linear`, `cosine`, `cosine_with_restarts`, `polynomial`, `constant`,
            `constant_with_warmup`.
        phase_02_train_opt_lr_warmup: Linear warm-up steps.
        phase_02_train_opt_seed: Seed of init, data order and dropout (reaches every algorithm: `random_seed` for SFT).
        phase_02_train_opt_use_liger: Liger kernels (Training Hub SFT/OSFT).
        phase_02_train_opt_gradient_checkpointing: Recompute activations in the backward pass instead of keeping them
            (less memory, ~30% more compute). The local launcher and `training_backend=transformers` honour both;
            Training Hub's backends always recompute (when the model supports it), so False there runs as True, with a
            note in the log.
        phase_02_train_opt_save_epoch: Checkpoint after every epoch (local: resumable state).
        phase_02_train_opt_save_final: Keep the final checkpoint (OSFT: False needs `checkpoint_at_epoch`).
        phase_02_train_opt_fsdp_sharding: `FULL_SHARD`, `SHARD_GRAD_OP`, `NO_SHARD`, `HYBRID_SHARD`: SFT's FSDP
            (Training Hub's, or FSDP2 in the `transformers` backend; its LoRA and OSFT use DDP).
        phase_02_train_opt_resume: Resume from the newest complete checkpoint of this run/task; False wipes the run
            directory first.
        phase_02_train_opt_max_steps: Stop after this many optimizer steps (0 = no limit).
        phase_02_train_opt_checkpoint_interval: Local launcher and `transformers` backend: also save a resumable
            checkpoint every N steps (0 = off); SIGTERM always saves one.
        phase_02_train_opt_mlflow_uri: MLflow tracking URI ('' = `MLFLOW_TRACKING_URI` if set, else no tracking):
            params, per-step metrics, model location; the run id goes to the model's `mlflow_run_id`.
        phase_02_train_opt_launcher: `trainjob` (Kubeflow Trainer v2) | `pytorchjob` (Training Operator v1; needs
            `training_image`) | `auto` (trainjob when its runtime exists, else pytorchjob) | `local`.
        phase_02_train_opt_oci_insecure: oci:// base models: skip TLS verification and allow plain HTTP (in-cluster
            registries only); default verifies.
        phase_02_train_opt_oci_ca_bundle: oci:// base models: CA bundle (PEM file path in the task, or PEM text) that
            verifies the registry's TLS certificate; '' = the system CAs (or REQUESTS_CA_BUNDLE).
        phase_02_train_opt_backend: What trains: Training Hub's backend `instructlab-training` (SFT), `mini-trainer`
            (OSFT), `unsloth` (LoRA), '' = the algorithm's default; or `transformers`: the project's own
            transformers/peft trainer (any algorithm) under torchrun in the job's pods (DDP; NCCL on GPUs, gloo on
            CPU), on the `torch-distributed` runtime by default.
        phase_02_train_opt_gpu_resource: Extended resource name of the GPUs (e.g. nvidia.com/gpu, amd.com/gpu).
        phase_02_train_opt_cpu: CPU request per node ('' = the runtime's).
        phase_02_train_opt_memory: Memory request per node ('' = the runtime's).
        phase_02_train_opt_env_vars: Literal environment variables of the training pods (secrets: use the mounted
            secrets instead); SFT pipelines set `INSTRUCTLAB_NCCL_TIMEOUT_MS`.
        phase_02_train_opt_runtime: The Trainer runtime the TrainJob references; '' = the backend's:
            `torch-distributed` for `training_backend='transformers'`, else `training-hub`.
        phase_02_train_opt_runtime_kind: ClusterTrainingRuntime | TrainingRuntime.
        phase_02_train_opt_image: Image override of the trainer ('' = the runtime's image); required for `pytorchjob`.
        phase_02_train_opt_namespace: TrainJob namespace; "" = the pipeline pod's namespace.
        phase_02_train_opt_tolerations: Extra tolerations of the training pods (joined with the task's passthrough).
        phase_02_train_opt_node_selector: Extra node selector of the training pods.
        phase_02_train_opt_labels: Extra labels of the training pods.
        phase_02_train_opt_annotations: Extra annotations of the training pods.
        phase_02_train_opt_queue_name: Kueue LocalQueue to submit the job to (label `kueue.x-k8s.io/queue-name`); Kueue
            admits it, the step waits logging the queue state and never resumes it itself; '' = no queue.
        phase_02_train_opt_hardware_profile: A RHOAI Hardware Profile's name (RHOAI >= 2.19), read at run time: its
            resources, node selector, tolerations and Kueue queue go into the job's pods (its accelerator count must
            equal `training_gpus_per_node`). '' = none.
        phase_02_train_opt_cleanup_policy: When the job failed or timed out, or the run was cancelled: `delete` |
            `keep` | `suspend` the TrainJob/PyTorchJob (never for the launcher's own trouble, e.g. an API outage); when
            the API cannot be reached the error names the `kubectl` command.
        phase_02_train_opt_delete_on_success: Delete the TrainJob after it completes.
        phase_02_train_opt_start_timeout: Fail (and clean up) when the training pods are not running after this long.
        phase_02_train_opt_timeout: Total deadline (0 = none); also the TrainJob's activeDeadlineSeconds.
        phase_02_train_opt_timeout_counts_pause: Whether time the job spends paused (suspended from the dashboard)
            counts against `training_timeout_seconds`.
        phase_02_train_opt_api_outage_tolerance: How long the step keeps following through an unreachable or
            erroring Kubernetes API (0 = as long as `training_timeout_seconds` allows); then it fails, leaving the job
            running, and names it.
        phase_02_train_opt_progress_tracking: Show progress (steps, epochs, loss, ETA) on the OpenShift AI Training Jobs
            page: annotates the job and serves it from the rank-0 pod.
        phase_02_train_opt_progress_port: Port of the rank-0 pod's progress server (1024-65535).
        phase_02_train_opt_progress_poll_interval: How often the dashboard's controller polls that server (5-300 s).
        phase_02_train_opt_jit_checkpoint: The training pods (Training Hub, or the `transformers` backend at the end
            of the running step) save a just-in-time checkpoint on SIGTERM (pause/preemption); a resumed job continues
            from it.
        phase_02_train_opt_copy_model_to_artifact: Also copy the trained weights into the `output_model` artifact (the
            pipeline root's object store), as every run did before. Costs the model's size three times per run: the
            launcher pod's disk (evicted without ephemeral storage), the upload, and each reading step's download; and
            it stays in the object store for every run. Off: the artifact holds a manifest and the steps read the
            weights on the workspace, which is deleted when the run succeeds (keep the model with the registry's
            modelcar_uri or s3_upload_prefix).
        phase_03_eval_man_eval_tasks: lm-eval task, group or tag names. Built-in names need their datasets (see
            *Disconnected clusters*). An entry that is a local directory (`/...` or `./...`) of task YAMLs evaluates
            every task they declare (staged like `custom_tasks`). May be empty when `eval_dataset` is given.
        phase_03_eval_opt_batch: `auto`, `auto:N` (re-detect N times) or a positive integer.
        phase_03_eval_opt_limit: Documents per task; `-1` = all. `0` is refused.
        phase_03_eval_opt_num_fewshot: Few-shot examples; `-1` = each task's default.
        phase_03_eval_opt_gen_kwargs: Generation settings for every generative task (benchmarks and
            `heldout_generation`), e.g. `{"max_new_tokens": 128}`, `{"temperature": 0.7}`, `{"until": ["\n\n"]}`.
            `max_new_tokens`/`max_tokens` are renamed to lm-eval's `max_gen_toks` so that they win over a task's own
            length; a positive `temperature` without `do_sample` turns sampling on.
        phase_03_eval_opt_model_args: Extra lm-eval model arguments, e.g. `{"dtype": "bfloat16", "trust_remote_code":
            true, "max_length": 4096}`. `pretrained`/`peft`/`lora_local_path` are refused (use `model`/`model_source`),
            and so are credential keys (`token`, ...): the Hub token comes from the `HF_TOKEN` environment variable.
        phase_03_eval_opt_chat_template: Render prompts with the tokenizer's chat template (refused with a clear error
            if the tokenizer has none). `False` for base models: plain-text prompts.
        phase_03_eval_opt_backend: `hf` (transformers) or `vllm` (needs an image with vLLM; adapters are loaded as LoRA
            with `lora_local_path`).
        phase_03_eval_opt_seed: Seed of Python, NumPy, torch and the few-shot sampler.
        phase_03_eval_opt_log_samples: Keep every per-document sample (prompt, response, scores) in the results JSON.
        phase_03_eval_opt_heldout_samples: Conversations of `eval_dataset` used: the first ones of the file
            (`dataset_download` already shuffled it); `-1` = all.
        phase_03_eval_opt_max_new_tokens: Most tokens generated per held-out answer (`gen_kwargs` may override it).
        phase_03_eval_opt_device: Torch device for `hf`; `""` = `cuda` when a GPU is visible, else `cpu`.
        phase_03_eval_opt_bootstrap_iters: Bootstrap resamples for standard errors of non-mean metrics (`0` = none).
        phase_03_eval_opt_allow_empty_eval: Skip the held-out tasks instead of failing when `eval_dataset` has no rows
            (`dataset_download` with `train_split_ratio=1.0` writes an empty split). With no `task_names` either, the
            run writes empty outputs.
        phase_03_eval_opt_evaluate_base_model: Evaluate the base model too, on the same tasks with the same settings,
            before training (it holds the evaluation's GPU while it runs, so training waits for it: one GPU step at a
            time, as the guide's hardware table sizes the cluster; cached on re-runs). The fine-tuned evaluation then
            reports base, fine-tuned and delta per task and metric, whether each change is beyond noise, and feeds the
            registry's improvement and regression gates. An `oci://`, `s3://` or `pvc://` base model, a local path the
            evaluation pod lacks, or a base model without chat template while `phase_03_eval_opt_chat_template` is on
            is skipped (no deltas). `False`: the task only writes a skipped result (its pod still starts, briefly).
        phase_03_eval_opt_eval_backend: Where the evaluation runs: `lm-eval` (in this step), `lmevaljob` (a TrustyAI
            `LMEvalJob`; RHOAI >= 2.16) or `evalhub` (EvalHub at `evalhub_url`; RHOAI >= 3.4). Same results, comparison
            and report.
        phase_03_eval_opt_hardware_profile: A RHOAI Hardware Profile's name, read at run time: applied to the LMEvalJob,
            passed to EvalHub, compared with this pod and recorded for `lm-eval`. '' = none.
        phase_03_eval_opt_evalhub_url: EvalHub's URL (`https://evalhub...`), for `eval_backend=evalhub`.
        phase_04_registry_man_address: Registry REST host or URL (`https://model-registry-rest.apps…`). `""` skips the
            step (status `skipped`).
        phase_04_registry_man_reg_name: Registered model name; `""`: `<algorithm>-<base model's last path part>` from
            the model's metadata (e.g. `osft-Qwen2.5-1.5B-Instruct`). Letters, digits, `. _ : + -`.
        phase_04_registry_man_reg_version: Version name. `""`: the version this run registered before (matched on
            `pipeline_run_id`), else `<UTC yyyymmdd-HHMMSS>-<first 8 chars of the run id>`.
        phase_04_registry_man_reg_author: Author of the version (and owner of a newly created registered model).
        phase_04_registry_opt_port: Port when the address has none.
        phase_04_registry_opt_description: Description of the version (and of a newly created registered model).
        phase_04_registry_opt_format_name: Model format serving runtimes select on (e.g. `vLLM`, `pytorch`).
        phase_04_registry_opt_format_version: Version of that format.
        phase_04_registry_opt_min_metric_name: Gate metric (`""` = no gate). A name found in neither metrics artifact is
            an error, not a silent skip.
        phase_04_registry_opt_min_metric_value: Register only when the metric is `>=` this.
        phase_04_registry_opt_min_improvement_metric: The new task's metric that must improve over the base model, e.g.
            `heldout_generation/chrf` (`""` = no improvement gate). A name that was not compared is an error, not a
            silent skip.
        phase_04_registry_opt_min_improvement: Least improvement of `min_improvement_metric` over the base model, in the
            metric's units and direction (a perplexity improves by going down). `0` = must not get worse.
        phase_04_registry_opt_max_regression: Most any metric of every other task (all but `lm_eval`'s held-out tasks
            and the improvement metric's task) may get worse than the base model's; negative (default) = no regression
            gate. E.g. `0.02` = 2 accuracy points, or 2 % with `max_regression_relative`.
        phase_04_registry_opt_max_regression_relative: `max_regression` is a fraction of the base model's value instead
            of metric units.
        phase_04_registry_opt_model_uri: Explicit serving URI (`pvc://claim/path`, `s3://…`, `oci://…`, `gs://`,
            `hf://`, `http(s)://`), overriding the derived one. A `pvc://` of the run's own workspace claim
            (`…-kfp-workspace`, deleted with the run) is refused: use `modelcar_uri` or `s3_upload_prefix`.
        phase_04_registry_opt_s3_upload_prefix: `s3://bucket/prefix`: upload the model files there (data-connection env
            credentials; one streamed copy from the workspace) and register that URI. Exclusive with `model_uri`.
        phase_04_registry_opt_storage_key: Data-connection secret name recorded on the artifact, for serving to read an
            `s3://` URI.
        phase_04_registry_opt_is_secure: Verify the registry's TLS certificate (needs `https://` and a token). `False`
            for an in-cluster plain-HTTP service.
        phase_04_registry_opt_allow_token_over_http: Send the bearer token to a plain http:// registry address (default
            False: the token is withheld with a warning, since plain HTTP exposes it; only for a trusted in-cluster
            network or service mesh).
        phase_04_registry_opt_modelcar_uri: Push the model as an OCI modelcar (files under `/models`, one layer each, on
            `modelcar_base_image`) to `oci://registry/repository[:tag]` and register it pinned, `oci://…@sha256:…` (`""`
            = no modelcar). The push secret is a Docker `config.json` in the optional secret
            `oci-push-secret-model-upload` (key `OCI_PUSH_SECRET_MODEL_UPLOAD`, or `.dockerconfigjson`). Published even
            without `registry_address`.
        phase_04_registry_opt_modelcar_base_image: The image the model files are layered on (`registry/repository:tag`,
            no scheme).
        phase_04_registry_opt_modelcar_insecure: Plain HTTP or unverified TLS to the OCI registries (in-cluster or test
            registries only).
        phase_04_registry_opt_deploy_inference_service: After a registration that was not gated out, serve the
            registered `oci://` (or `s3://`) model with a KServe InferenceService (vLLM), wait until Ready and send one
            completion as a smoke test. Never changes a service this step did not create for the same registered model.
            RBAC: `rbac.yaml`.
        phase_04_registry_opt_deploy_hardware_profile: A RHOAI Hardware Profile's name, read at deploy time: its
            resources, node selector, tolerations and Kueue queue go into the predictor (replacing `deploy_gpus`). '' =
            none.
    """
    dataset_task = dataset_download(
        pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER,
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
    dataset_task.set_display_name("Download and validate dataset")
    tasks.set_up_dataset(dataset_task, SETTINGS)

    training_task = train_model(
        pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER,
        dataset=dataset_task.outputs["train_dataset"],
        eval_dataset=dataset_task.outputs["eval_dataset"],
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
        hf_token_secret_name=SETTINGS.hf_token_secret,
        s3_secret_name=SETTINGS.s3_secret,
        run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        task_name=dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
    )
    training_task.set_display_name("Fine-tune (SFT)")
    tasks.set_up_training(training_task, SETTINGS)

    # The same tasks and settings for the base model and the fine-tuned model (edit them here, once).
    evaluation_settings = dict(
        pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER,
        eval_dataset=dataset_task.outputs["eval_dataset"],
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
    # The base model, before training (it needs only the base model and the held-out split); its results are the
    # fine-tuned evaluation's baseline. Cached: free on a re-run with the same base model, data and tasks.
    base_eval_task = lm_eval(
        model_source=phase_02_train_man_train_model,
        enabled=phase_03_eval_opt_evaluate_base_model,
        skip_unusable_model_source=True,  # an oci://, s3:// or pvc:// base model: skipped, not failed
        **evaluation_settings,
    )
    base_eval_task.set_display_name("Evaluate base model (lm-eval)")
    tasks.set_up_base_evaluation(base_eval_task, SETTINGS)
    # One GPU step at a time (the guide's hardware table): training starts once the base model's evaluation is done.
    training_task.after(base_eval_task)

    eval_task = lm_eval(
        model=training_task.outputs["output_model"],
        baseline_results=base_eval_task.outputs["results"],
        **evaluation_settings,
    )
    eval_task.set_display_name("Evaluate (lm-eval)")
    tasks.set_up_evaluation(eval_task, SETTINGS)

    registry_task = model_registry(
        pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER,
        model=training_task.outputs["output_model"],
        eval_metrics=eval_task.outputs["metrics"],
        eval_results=eval_task.outputs["results"],
        train_metrics=training_task.outputs["output_metrics"],
        dataset=dataset_task.outputs["train_dataset"],
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
        pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        pipeline_run_name=dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
    )
    registry_task.set_display_name("Register model")
    tasks.set_up_registry(registry_task, SETTINGS)


if __name__ == "__main__":
    from pathlib import Path

    output = Path(__file__).resolve().with_name("pipeline.yaml")
    compiler.Compiler().compile(sft_pipeline, str(output))
    print(f"Compiled pipeline {SETTINGS.pipeline_name!r} to {output}")
