"""GRPO on the project's trainer (the ``local`` launcher): TRL's ``GRPOTrainer`` with a verifiable reward.

Writes :mod:`.training`'s outputs and ``rewards.json``, the mean reward of every step (the reward gate's history).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components._common.reward_rows import REWARD_TOOL_CALL, prompt_messages, reward_row_format
from components.training.finetuning.hf_trainer import callbacks, training
from components.training.finetuning.hf_trainer.training import TrainingResult
from components.training.finetuning.pod import metrics as metrics_module
from components.training.finetuning.pod.rewards import compute_score

if TYPE_CHECKING:
    from components.training.finetuning.config import TrainingConfig

REWARDS_FILE = "rewards.json"


def answer_reward(completions: list[Any], ground_truth: list[Any], **kwargs: Any) -> list[float]:
    """TRL reward function of ``reward_answer`` rows: :func:`..pod.rewards.compute_score` per completion."""
    return [compute_score("local", _text(completion), truth) for completion, truth in zip(completions, ground_truth)]


def tool_call_reward(
    completions: list[Any], target_tool_name: list[str], target_arguments: list[str], **kwargs: Any
) -> list[float]:
    """TRL reward of ``reward_tool_call`` rows: Training Hub's ``tool_call_reward`` (arguments as JSON text)."""
    from training_hub.algorithms.rewards import tool_call_reward as hub_tool_call_reward

    return [
        hub_tool_call_reward(tool_call_message(_text(completion)), name, json.loads(arguments))
        for completion, name, arguments in zip(completions, target_tool_name, target_arguments)
    ]


def tool_call_message(text: str) -> dict[str, Any]:
    """A completion as the message ``tool_call_reward`` reads: its first JSON object with a ``name`` as the call."""
    decoder = json.JSONDecoder()
    for start in (index for index, character in enumerate(text) if character == "{"):
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("name"), str):
            call = {"name": value["name"], "arguments": value.get("arguments") or {}}
            return {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call}]}
    return {"role": "assistant", "content": text}


def _tool_prompt(row: dict[str, Any]) -> list[dict[str, str]]:
    """A tool-call row's prompt with its tools in the system turn, worded as verl's data preparation does."""
    instruction = (
        "\n\nYou have access to the following tools. To call a tool, respond with a JSON object in this format: "
        '{"name": "tool_name", "arguments": {"arg1": "value1"}}\n\nTools:\n' + json.dumps(row["tools"], indent=2)
    )
    messages = prompt_messages(row)
    if messages[0]["role"] == "system":
        return [{"role": "system", "content": messages[0]["content"] + instruction}, *messages[1:]]
    return [{"role": "system", "content": instruction.lstrip()}, *messages]


def _text(completion: Any) -> str:
    """A TRL completion (a string, or conversational: a list of messages) as its text."""
    if isinstance(completion, list):
        return "".join(str(message.get("content", "")) for message in completion)
    return str(completion)


def _dataset(rows: Iterable[dict[str, Any]]) -> tuple[Any, Callable[..., list[float]]]:
    """TRL's conversational prompt dataset of the checked rows, and the reward function of their format."""
    from datasets import Dataset

    rows = list(rows)
    if reward_row_format(rows[0]) == REWARD_TOOL_CALL:
        columns = {
            "prompt": [_tool_prompt(row) for row in rows],
            "target_tool_name": [row["target_tool_name"] for row in rows],
            "target_arguments": [json.dumps(row["target_arguments"]) for row in rows],
        }
        return Dataset.from_dict(columns), tool_call_reward
    columns = {
        "prompt": [prompt_messages(row) for row in rows],
        "ground_truth": [str(row["ground_truth"]) for row in rows],
    }
    return Dataset.from_dict(columns), answer_reward


def train_grpo(
    config: TrainingConfig,
    output_dir: Path,
    model_path: str,
    rows: Iterable[dict[str, Any]],
    *,
    log: Callable[[str], None] = print,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[TrainingResult, list[float]]:
    """Trains ``grpo`` / ``lora_grpo`` on checked reward rows in this process; returns the mean reward of every step."""
    from trl import GRPOConfig, GRPOTrainer

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    dataset, reward = _dataset(rows)
    arguments = GRPOConfig(
        **training.common_arguments(config, output_dir / training.CHECKPOINTS_DIR / ".trainer"),
        per_device_train_batch_size=config.effective_batch_size * config.grpo_group_size,
        num_generations=config.grpo_group_size,
        max_completion_length=config.grpo_max_new_tokens,
        temperature=config.grpo_temperature,
        max_steps=config.grpo_iterations,
    )
    metrics_path = output_dir / metrics_module.LOCAL_METRICS_FILE
    metrics_path.unlink(missing_ok=True)
    progress = callbacks.StepMetrics(metrics_path, [], config.grpo_iterations, log=log, on_step=on_step)
    trainer = GRPOTrainer(
        model=model_path,
        reward_funcs=reward,
        args=arguments,
        train_dataset=dataset,
        peft_config=training.lora_config(config) if config.algorithm == "lora_grpo" else None,
        callbacks=[progress],
    )
    training.prepare_trainer(trainer)
    started = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - started
    (output_dir / REWARDS_FILE).write_text(json.dumps(progress.rewards), encoding="utf-8")
    final_dir, adapter_dir = training.save_final(trainer, config.algorithm, output_dir)
    log(f"saved the final model to {final_dir}")
    result = TrainingResult(final_dir, metrics_path, progress.records, train_seconds, adapter_dir=adapter_dir)
    return result, progress.rewards
