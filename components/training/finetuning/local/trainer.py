"""The ``local`` launcher: the trainer core (:mod:`..hf_trainer.training`) in this process, on CPU (or one device)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components._common.reward_rows import load_reward_rows
from components.training.finetuning.contract import GRPO_ALGORITHMS, load_chat_rows, resolve_base_model
from components.training.finetuning.hf_trainer import training
from components.training.finetuning.plan import LauncherRun, RunPlan
from components.training.finetuning.staging import pvc_mounts, stage_base_model

if TYPE_CHECKING:
    from components.training.finetuning.config import TrainingConfig


def train_locally(
    config: TrainingConfig,
    train_data: Path,
    output_dir: Path,
    model_path: str | None = None,
    eval_data: Path | None = None,
    log: Callable[[str], None] = print,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> training.TrainingResult:
    """Fine-tunes ``model_path`` (default ``config.base_model``) on the chat JSONL ``train_data`` in this process."""
    return training.train(
        config,
        Path(output_dir),
        model_path or config.base_model,
        load_chat_rows(train_data, "train_dataset"),
        load_chat_rows(eval_data, "eval_dataset") if eval_data is not None else None,
        data_label=str(train_data),
        log=log,
        on_step=on_step,
    )


def train_plan(plan: RunPlan, on_step: Callable[[dict[str, Any]], None] | None = None, log: Any = print) -> LauncherRun:
    """Runs a validated ``train_model`` plan with the ``local`` launcher into ``<run dir>/output``."""
    config = plan.config
    model_path, extra = stage_base_model(plan, log)
    if model_path is None:
        model_path = resolve_base_model(
            config.base_model, plan.run_dir / "model_cache", pvc_mounts(plan.task_config), os.environ
        )
    output_dir = plan.run_dir / "output"
    rewards: list[float] = []
    if config.algorithm in GRPO_ALGORITHMS:
        from components.training.finetuning.hf_trainer import grpo

        rows = load_reward_rows(plan.data_file, "train_dataset")
        result, rewards = grpo.train_grpo(config, output_dir, model_path, rows, log=log, on_step=on_step)
        extra = {**extra, "reward_history": [round(value, 4) for value in rewards]}
    else:
        result = train_locally(config, plan.data_file, output_dir, model_path, plan.eval_file, on_step=on_step)
        extra = {"resumed_from": str(result.resumed_from or ""), **extra}
    if result.adapter_dir is not None:
        extra["adapter_path"] = str(result.adapter_dir)
    return LauncherRun(
        result.final_model_dir,
        result.records,
        result.train_seconds,
        extra_metadata=extra,
        eval_loss=result.eval_loss,
        launcher="local",
        base_eval_loss=result.base_eval_loss,
        rewards=rewards,
    )
