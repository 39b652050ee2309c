"""Metrics files written by Training Hub's backends' own writers, with the fields their training loops log.

* SFT: instructlab-training's ``AsyncStructuredHandler`` (the handler ``setup_metric_logger`` installs), fed the
  per-step dict of ``instructlab/training/main_ds.py``;
* OSFT: mini-trainer's ``AsyncStructuredLogger.log_sync``, fed the ``batch_metrics`` dict of
  ``mini_trainer/train.py``;
* LoRA: Training Hub's ``JSONLLoggingCallback.on_log`` with a real ``transformers.TrainerState``.

The writers are asynchronous (SFT, OSFT): :func:`write_metrics` waits until every line is on disk.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from components.training.finetuning.pod import metrics

LOSSES = (2.0, 1.6, 1.3, 1.1, 1.0, 0.9, 0.85, 0.8)


def _wait_for_lines(path: Path, count: int, timeout: float = 20.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file():
            lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            if len(lines) >= count:
                return lines
        time.sleep(0.01)
    raise TimeoutError(f"{path}: the writer did not write {count} lines in {timeout} s")


def _sft(directory: Path, steps_per_epoch: int, epochs: int, rows: int) -> list[dict]:
    from instructlab.training.logger import AsyncStructuredHandler

    handler = AsyncStructuredHandler(log_dir=directory)
    logger = logging.getLogger(f"kfp-finetune-test.instructlab-metrics.{id(handler)}")
    logger.propagate, logger.level = False, logging.INFO
    logger.addHandler(handler)
    logger.info({"num_gpus": 1, "effective_batch_size": 16, "total_samples": rows}, extra={"hparams": True})
    _wait_for_lines(directory / metrics.TRAINING_HUB_METRICS_FILES["sft"], 1)
    step = 1
    for epoch in range(epochs):
        for _ in range(steps_per_epoch):
            logger.info(
                {
                    "epoch": epoch,
                    "step": step,
                    "rank": 0,
                    "overall_throughput": 12.5,
                    "lr": 1e-5,
                    "cuda_mem_allocated": 1.0,
                    "cuda_malloc_retries": 0,
                    "num_loss_counted_tokens": 400,
                    "num_tokens_rank0": 1000,
                    "batch_size": 16,
                    "num_minibatches": 1,
                    "avg_loss": LOSSES[(step - 1) % len(LOSSES)],
                    "samples_seen": 16 * step,
                    "gradnorm": 0.5 * step,
                    "total_samples": rows,
                    "num_epoch_steps": steps_per_epoch,
                },
                extra={"step": step},
            )
            # One coroutine per line: without waiting, lines can land out of order (as they can in a real run).
            _wait_for_lines(directory / metrics.TRAINING_HUB_METRICS_FILES["sft"], 1 + step)
            step += 1
    logger.removeHandler(handler)
    return _wait_for_lines(directory / metrics.TRAINING_HUB_METRICS_FILES["sft"], 1 + steps_per_epoch * epochs)


def _osft(directory: Path, steps_per_epoch: int, epochs: int) -> list[dict]:
    from mini_trainer.async_structured_logger import AsyncStructuredLogger

    path = directory / metrics.TRAINING_HUB_METRICS_FILES["osft"]
    logger = AsyncStructuredLogger(str(path))
    step = 0
    for epoch in range(epochs):
        for _ in range(steps_per_epoch):
            step += 1
            logger.log_sync(
                {
                    "step": step,
                    "epoch": epoch,
                    "steps_per_epoch": steps_per_epoch,
                    "lr": 2e-5,
                    "grad_norm": 0.3,
                    "loss": LOSSES[(step - 1) % len(LOSSES)],
                    "avg_loss_backward": 1.0,
                    "num_samples": 16,
                    "num_loss_counted_tokens": 400,
                    "batch_num_loss_counted_tokens": 400,
                    "num_total_tokens": 450,
                    "grad_accum": 1,
                    "avg_time_per_minibatch": 0.5,
                    "time_per_batch": 0.5,
                    "tokens_per_second": 900.0,
                    "total_samples_accumulated": 16 * step,
                    "total_tokens_accumulated": 400 * step,
                    "samples_per_second": 32.0,
                    "peak_memory_usage_GB": 0.0,
                    "val_loss": None,
                }
            )
            _wait_for_lines(path, step)  # the writer appends from its own thread: keep the order
    return _wait_for_lines(path, steps_per_epoch * epochs)


def _lora(directory: Path, steps_per_epoch: int, epochs: int) -> list[dict]:
    from training_hub.algorithms.lora import JSONLLoggingCallback
    from transformers import TrainerControl, TrainerState, TrainingArguments

    callback = JSONLLoggingCallback(str(directory))
    total = steps_per_epoch * epochs
    state = TrainerState(max_steps=total, is_world_process_zero=True)
    args = TrainingArguments(output_dir=str(directory / "hf"), report_to="none")
    for step in range(1, total + 1):
        state.global_step, state.epoch = step, step / steps_per_epoch
        loss = LOSSES[(step - 1) % len(LOSSES)]
        callback.on_log(args, state, TrainerControl(), logs={"loss": loss, "grad_norm": 1.0, "learning_rate": 1e-4})
        if step == 2:
            callback.on_log(args, state, TrainerControl(), logs={"eval_loss": 1.7, "eval_runtime": 0.1})
    return _wait_for_lines(directory / metrics.TRAINING_HUB_METRICS_FILES["lora"], total + 1)


def write_metrics(algorithm: str, directory: Path, steps_per_epoch: int, epochs: int, rows: int = 64) -> list[dict]:
    """Writes ``algorithm``'s metrics file into ``directory`` with the backend's real writer; returns its lines.

    ``rows`` is the dataset's size, which instructlab-training logs as ``total_samples``.
    """
    directory.mkdir(parents=True, exist_ok=True)
    if algorithm == "sft":
        return _sft(directory, steps_per_epoch, epochs, rows)
    if algorithm == "osft":
        return _osft(directory, steps_per_epoch, epochs)
    return _lora(directory, steps_per_epoch, epochs)
