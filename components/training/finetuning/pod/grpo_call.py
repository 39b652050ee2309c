"""The Training Hub ``grpo`` / ``lora_grpo`` call of a GRPO run (the pod entrypoint's, standard library only)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.training.finetuning.contract import RunConfig
from components.training.finetuning.pod import rewards


def count_rows(path: str) -> int:
    """The rows (non-empty lines) of a JSONL file."""
    with open(path, encoding="utf-8") as handle:
        return sum(1 for line in handle if line.strip())


def first_row(path: str) -> dict[str, Any]:
    """The first row of a JSONL file (``{}`` when it has none)."""
    import json

    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                return json.loads(line)
    return {}


def grpo_kwargs(run_config: RunConfig, model_path: str, env: Mapping[str, str]) -> dict[str, Any]:
    """Training Hub ``grpo`` / ``lora_grpo`` keywords (training-hub 0.11.2, ``algorithms/lora_grpo.py``).

    ``reward_answer`` rows get this project's verifiable reward (:func:`.rewards.compute_score`, verl's signature);
    ``reward_tool_call`` rows get none, so Training Hub scores them with its ``tool_call_reward``. Every row trains
    (``n_train``); the eval split is the pipeline's, not Training Hub's (``n_val=0``).
    """
    hp = run_config.hyperparameters
    kwargs: dict[str, Any] = {
        "model_path": model_path,
        "ckpt_output_dir": run_config.ckpt_output_dir,
        "data_path": run_config.data_path,
        "n_train": count_rows(run_config.data_path),
        "n_val": 0,
        "num_iterations": hp.grpo_iterations,
        "group_size": hp.grpo_group_size,
        "prompt_batch_size": hp.effective_batch_size,
        "learning_rate": hp.learning_rate,
        "temperature": hp.grpo_temperature,
        "max_tokens": hp.grpo_max_new_tokens,
        "max_prompt_length": hp.max_seq_len,
        "n_gpus": max(run_config.nproc_per_node, 1),
        "nnodes": int(env["PET_NNODES"]) if str(env.get("PET_NNODES", "")).isdigit() else 1,
    }
    if "target_tool_name" not in first_row(run_config.data_path):
        kwargs["reward_fn"] = rewards.compute_score
    if hp.algorithm == "lora_grpo":
        kwargs.update(lora_r=hp.lora_r, lora_alpha=hp.lora_alpha)
    if hp.backend and hp.algorithm == "lora_grpo":  # grpo() refuses a backend keyword: verl only
        kwargs["backend"] = hp.backend
    kwargs.update(run_config.mlflow.training_hub_kwargs())
    return kwargs
