"""The ``local`` launcher: the trainer core (:mod:`..hf_trainer.training`) in this process, on CPU (or one device).

It needs ``torch`` and ``transformers`` (+ ``peft`` for LoRA): the runtime image, or ``kfp.local``'s environment.
"""

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

FINAL_DIR, CHECKPOINTS_DIR = training.FINAL_DIR, training.CHECKPOINTS_DIR


def train_locally(
    config: TrainingConfig,
    train_data: Path,
    output_dir: Path,
    model_path: str | None = None,
    eval_data: Path | None = None,
    log: Callable[[str], None] = print,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> training.TrainingResult:
    """Fine-tunes ``config.base_model`` on the chat JSONL ``train_data`` in this process (:func:`.training.train`).

    ``model_path`` defaults to ``config.base_model`` (resolve URIs first); a SIGTERM while training saves a
    checkpoint at the end of the running step and exits with status 143 (``SystemExit``).
    """
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
    """Runs a validated ``train_model`` plan with the ``local`` launcher (:func:`train_locally`, ``<run dir>/output``).

    The base model is the one staged on the workspace (an ``oci://`` pull) or the resolved ``base_model``.
    """
    config = plan.config
    model_path, model_facts = stage_base_model(plan, log)
    if model_path is None:
        model_path = resolve_base_model(
            config.base_model, plan.run_dir / "model_cache", pvc_mounts(plan.task_config), os.environ
        )
    if config.algorithm in GRPO_ALGORITHMS:
        return _train_grpo_plan(plan, model_path, model_facts, on_step, log)
    result = train_locally(
        config,
        plan.data_file,
        plan.run_dir / "output",
        model_path=model_path,
        eval_data=plan.eval_file,
        on_step=on_step,
    )
    extra: dict[str, Any] = {"resumed_from": str(result.resumed_from or ""), **model_facts}
    if result.adapter_dir is not None:
        extra["adapter_path"] = str(result.adapter_dir)
    return LauncherRun(
        result.final_model_dir,
        result.records,
        result.train_seconds,
        "",
        extra,
        result.eval_loss,
        "local",
        base_eval_loss=result.base_eval_loss,
    )


def _train_grpo_plan(
    plan: RunPlan, model_path: str, model_facts: dict[str, Any], on_step: Any, log: Any
) -> LauncherRun:
    """GRPO / LoRA-GRPO with TRL's ``GRPOTrainer`` (:mod:`..hf_trainer.grpo`) on the checked reward rows."""
    from components.training.finetuning.hf_trainer import grpo

    result, rewards = grpo.train_grpo(
        plan.config,
        plan.run_dir / "output",
        model_path,
        load_reward_rows(plan.data_file, "train_dataset"),
        log=log,
        on_step=on_step,
    )
    extra: dict[str, Any] = {**model_facts, "reward_history": [round(value, 4) for value in rewards]}
    if result.adapter_dir is not None:
        extra["adapter_path"] = str(result.adapter_dir)
    return LauncherRun(result.final_model_dir, result.records, result.train_seconds, "", extra, launcher="local",
                       rewards=rewards)  # fmt: skip
