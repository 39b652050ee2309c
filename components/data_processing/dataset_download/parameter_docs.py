"""Descriptions of the ``dataset_download`` parameters and outputs: the docstring, the dashboard and the README."""

PARAMETER_DOCS = {
    "dataset_uri": (
        "Hub id `org/name[:subset][@revision]` (token from env HF_TOKEN), `s3://bucket/key-or-prefix/` (RHOAI "
        "data-connection env vars), `http(s)://.../file.jsonl`, `pvc://claim/path` (under $KFP_FINETUNE_PVC_ROOT, "
        "default /mnt/pvc) or a local path. Files: .jsonl, .json, .parquet, .csv (+.gz)."
    ),
    "train_dataset": (
        "Train split, JSONL of chat `messages` rows; metadata dataset_uri, dataset_revision, dataset_sha256, "
        "dataset_rows, dataset_format (components/_common/dataset_metadata.py)."
    ),
    "eval_dataset": "Eval split, same form (an empty file with rows=0 when train_split_ratio is 1.0).",
    "report": "Markdown report: source, revision, detected format, counts, every rejected row, split, token stats.",
    "metrics": "Row counts, rejects per rule (rejected_<rule>), token statistics.",
    "train_split_ratio": "Fraction of the kept rows used for training, in (0, 1]; 1.0 = no eval split.",
    "subset_count": "Rows to keep, drawn with `seed` (0 = all; more than available warns and keeps all).",
    "seed": "Seed of the subset and the split; same input and seed give byte-identical files.",
    "input_format": (
        "auto | messages | alpaca | sharegpt | prompt_completion (auto detects from the first rows); GRPO's prompt "
        "rows: reward_answer | reward_tool_call."
    ),
    "hf_split": "Split of a Hub dataset to read.",
    "on_invalid": "fail (any bad row fails the task) | drop (drop and count bad rows).",
    "max_invalid_fraction": "With on_invalid=drop, the largest rejected fraction accepted, in [0, 1].",
    "allow_trailing_user": "Accept conversations that end on a user turn.",
    "max_seq_len": "Token limit for token statistics (computed only with tokenizer_source); 0 = none.",
    "tokenizer_source": 'HF id or local directory of a tokenizer for token statistics ("" = none).',
    "max_download_bytes": "Refuse remote downloads larger than this many bytes.",
    "max_line_bytes": (
        "Largest JSONL line, .json array element or CSV record (default 16 MiB); a longer one is rejected "
        "(rule record_too_large, with its line) without being held in memory."
    ),
    "max_decompressed_bytes": (
        "Most one .gz file may expand to (default 32 GiB, 8x the step's 4 GiB memory request); beyond it the step "
        "fails naming the file and the limit (rule decompressed_too_large)."
    ),
    "download_deadline_s": "Deadline of the whole download in seconds, every attempt and file included (default 3 h).",
    "pvc_path": (
        "The run's workspace: pass `dsl.WORKSPACE_PATH_PLACEHOLDER` (the pipelines do), so that this first step "
        'mounts it and fails at once, in one line, when it is not writable; "" = none.'
    ),
}
