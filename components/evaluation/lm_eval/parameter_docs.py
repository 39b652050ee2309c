"""Descriptions of the ``lm_eval`` parameters and outputs: the component docstring, the dashboard and the README."""

PARAMETER_DOCS = {
    "model": (
        "Optional when `model_source` is given. `train_model`'s manifest of weights on the workspace (read in place "
        "and checked; mount the workspace with `pvc_path`), or a `save_pretrained` directory: a full model or a PEFT "
        "adapter loaded on its base through lm-eval's `peft=`. The base is the adapter's `base_model_name_or_path` "
        "when reachable here, else `model.metadata[\"base_model\"]`; the tokenizer is the adapter's, else the base's."
    ),
    "task_names": (
        "lm-eval task, group or tag names. Built-in names need their datasets (see *Disconnected "
        "clusters*). An entry that is a local directory (`/...` or `./...`) of task YAMLs evaluates every task "
        "they declare (staged like `custom_tasks`). May be empty when `eval_dataset` is given."
    ),
    "eval_dataset": (
        'Held-out chat JSONL (rows `{"messages": [...]}`, last turn from the assistant; a directory '
        "holding exactly one `*.jsonl` also works). Adds `heldout_generation` and `heldout_perplexity`."
    ),
    "baseline_results": (
        "The `results` output of the base model's evaluation (same tasks and settings; or lm-eval's own results "
        "JSON): the report and Metrics show base, delta and whether it is beyond noise (see *Base model → "
        "fine-tuned*); a skipped baseline is reported as such."
    ),
    "model_source": (
        "A local path or Hub id evaluated **instead of** `model` (e.g. the base model, to produce a baseline). With "
        "`pvc_path`, a Hub id, `s3://` prefix or `oci://` reference is first downloaded once per run into the "
        "workspace (`<pvc_path>/train_model/model_cache/`), where training and the fine-tuned evaluation reuse it."
    ),
    "pvc_path": (
        'The run\'s workspace: pass `dsl.WORKSPACE_PATH_PLACEHOLDER` (the pipelines do); "" = none (the model '
        "must then be in the artifact or a path of this pod). `lmevaljob` and `evalhub` need it: they read the model "
        "in place there and the held-out task written there, through the PVC mounted at this path."
    ),
    "batch_size": ("`auto`, `auto:N` (re-detect N times) or a positive integer."),
    "limit": ("Documents per task; `-1` = all. `0` is refused."),
    "num_fewshot": ("Few-shot examples; `-1` = each task's default."),
    "gen_kwargs": (
        "Generation settings for every generative task (benchmarks and `heldout_generation`), e.g. "
        '`{"max_new_tokens": 128}`, `{"temperature": 0.7}`, `{"until": ["\\n\\n"]}`. '
        "`max_new_tokens`/`max_tokens` are renamed to lm-eval's `max_gen_toks` so that they win over a "
        "task's own length; a positive `temperature` without `do_sample` turns sampling on."
    ),
    "model_args": (
        'Extra lm-eval model arguments, e.g. `{"dtype": "bfloat16", "trust_remote_code": true, '
        '"max_length": 4096}`. `pretrained`/`peft`/`lora_local_path` are refused (use '
        "`model`/`model_source`), and so are credential keys (`token`, ...): the Hub token comes from the "
        "`HF_TOKEN` environment variable."
    ),
    "apply_chat_template": (
        "Render prompts with the tokenizer's chat template (refused with a clear error if the tokenizer "
        "has none). `False` for base models: plain-text prompts."
    ),
    "backend": (
        "`hf` (transformers) or `vllm` (needs an image with vLLM; adapters are loaded as LoRA with `lora_local_path`)."
    ),
    "seed": ("Seed of Python, NumPy, torch and the few-shot sampler."),
    "log_samples": ("Keep every per-document sample (prompt, response, scores) in the results JSON."),
    "max_samples": (
        "Conversations of `eval_dataset` used: the first ones of the file (`dataset_download` already "
        "shuffled it); `-1` = all."
    ),
    "max_new_tokens": ("Most tokens generated per held-out answer (`gen_kwargs` may override it)."),
    "custom_tasks": (
        "A directory of lm-eval task YAMLs and their data files, added to the task index. Relative paths "
        "in a YAML resolve against the pod's working directory, so write `${TASK_DIR}` for the directory "
        "itself, e.g. `data_files: {test: ${TASK_DIR}/questions.jsonl}`."
    ),
    "device": ('Torch device for `hf`; `""` = `cuda` when a GPU is visible, else `cpu`.'),
    "bootstrap_iters": ("Bootstrap resamples for standard errors of non-mean metrics (`0` = none)."),
    "enabled": (
        "`False` writes *skipped* outputs (results with a `skipped` reason, no metrics) without evaluating: how a "
        "pipeline parameter turns the base-model evaluation off (`kfp.local` has no `dsl.If`)."
    ),
    "skip_unusable_model_source": (
        "Write *skipped* outputs instead of failing when `model_source` cannot be evaluated as asked (a URI lm-eval "
        "cannot load, a path this pod lacks, a failed download, no chat template while `apply_chat_template`). The "
        "pipelines' base-model evaluation sets it, so such a base model still trains and registers (without deltas)."
    ),
    "allow_empty_eval_dataset": (
        "Skip the held-out tasks instead of failing when `eval_dataset` has no rows (`dataset_download` "
        "with `train_split_ratio=1.0` writes an empty split). With no `task_names` either, the run writes "
        "empty outputs."
    ),
    "eval_backend": (
        "Where the evaluation runs: `lm-eval` (in this step), `lmevaljob` (a TrustyAI `LMEvalJob`; RHOAI >= 2.16) "
        "or `evalhub` (EvalHub at `evalhub_url`; RHOAI >= 3.4). Same results, comparison and report."
    ),
    "hardware_profile": (
        "A RHOAI Hardware Profile's name, read at run time: applied to the LMEvalJob, passed to EvalHub, compared "
        "with this pod and recorded for `lm-eval`. '' = none."
    ),
    "evalhub_url": ("EvalHub's URL (`https://evalhub...`), for `eval_backend=evalhub`."),
    "eval_timeout_seconds": ("How long a remote evaluation may take (`lmevaljob`, `evalhub`; `0` = no limit)."),
    "eval_cleanup_policy": (
        "What happens to the LMEvalJob once its results are read, or when it fails or the run is cancelled: "
        "`delete`, `keep` or `suspend` (as `train_model`'s `training_cleanup_policy`)."
    ),
    "metrics": (
        "`<task>/<metric>` (`<task>/<metric>/<filter>` for filtered metrics such as gsm8k's `strict-match`) and "
        "`<name>_stderr` where lm-eval computes one, finite values only; e.g. `arc_easy/acc`, "
        "`heldout_generation/chrf`, `heldout_perplexity/token_loss`. With `baseline_results`, also `<name>/base` and "
        "`<name>/delta` (tuned − base) for every metric both runs have."
    ),
    "results": (
        "The full lm-eval results JSON (`samples` when `log_samples`). Metadata: `model`, `base_model`, `backend`, "
        "`tasks`, `apply_chat_template`, `heldout_rows` (evaluated), `heldout_rows_available`, `lm_eval_version`; "
        "with a baseline `verdict`, `baseline_model` and `comparison` (what `model_registry`'s gates read; see *Base "
        "model → fine-tuned*), or `baseline_skipped`; when this run was skipped, `skipped`."
    ),
    "report": (
        "With a baseline, a leading verdict (e.g. `held-out chrF +18.2 (better); arc_easy acc −0.4 pts (within "
        "noise)`); run settings; a table per task (with base, Δ, ± stderr of Δ and change against a baseline); the "
        "first generations of each generative task."
    ),
}
