"""``transformers.Trainer`` callbacks for the project's contracts: metrics records, checkpoints, SIGTERM (README)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from components.training.finetuning.hf_trainer import preemption
from components.training.finetuning.pod import metrics as metrics_module


class StepMetrics(TrainerCallback):
    """Writes each step's record (rank 0), logs it and calls ``on_step``; GRPO's mean rewards go to :attr:`rewards`."""

    def __init__(
        self,
        path: Path,
        records: list[dict[str, Any]],
        total_steps: int,
        *,
        log: Callable[[str], None],
        on_step: Callable[[dict[str, Any]], None] | None,
        elapsed_before: float = 0.0,
    ) -> None:
        self.path, self.records, self.total_steps = path, records, total_steps
        self.log, self.on_step = log, on_step
        self.elapsed_before = elapsed_before
        self._started = self._step_started = time.perf_counter()
        self._tokens = 0
        self.rewards: list[float] = []

    def elapsed(self) -> float:
        """Training seconds of the whole run (before a resume included)."""
        return self.elapsed_before + time.perf_counter() - self._started

    def on_train_begin(self, args, state, control, **kwargs):
        """Starts the clocks (and the token count, which a resumed Trainer restores)."""
        self._started = self._step_started = time.perf_counter()
        self._tokens = state.num_input_tokens_seen

    def on_log(self, args, state, control, logs=None, **kwargs):
        """Turns the Trainer's step log (``loss``, ``learning_rate``; GRPO: ``reward``) into the step record."""
        if not logs or "loss" not in logs:  # eval lines and the final summary are not steps
            return
        now = time.perf_counter()
        tokens, self._tokens = state.num_input_tokens_seen - self._tokens, state.num_input_tokens_seen
        record = {
            "step": state.global_step,
            "epoch": state.epoch,
            "loss": float(logs["loss"]),
            "lr": float(logs.get("learning_rate") or 0),  # absent only in logs that are not steps
            "tokens_per_second": tokens / max(now - self._step_started, 1e-9),
            "time": self.elapsed(),
            "total_steps": self.total_steps,
        }
        self._step_started = now
        self.records.append(record)
        if state.is_world_process_zero:
            metrics_module.append_record(self.path, record)
            self.log(
                f"step {record['step']}/{self.total_steps} epoch {record['epoch']:.2f} loss {record['loss']:.4f} "
                f"lr {record['lr']:.3g}"
            )
            if self.on_step is not None:
                self.on_step(record)
        if "reward" in logs:
            self.rewards.append(float(logs["reward"]))
            self.log(f"step {state.global_step}/{self.total_steps} mean reward {logs['reward']:.3f}")


class SaveSchedule(TrainerCallback):
    """Saves every ``interval`` steps (not at the last), with ``at_epoch`` at each epoch's end, and after a SIGTERM.

    A SIGTERM on any rank (``flag``) makes every rank save and stop after the same step (one all-reduce per step).
    """

    def __init__(self, interval: int, at_epoch: bool, steps_per_epoch: int) -> None:
        self.interval, self.at_epoch, self.steps_per_epoch = interval, at_epoch, steps_per_epoch
        self.flag: preemption.SigtermFlag | None = None
        self.stopped = False

    def on_step_end(self, args, state, control, **kwargs):
        """Asks for a save when the step is due one; for a stop as well after a SIGTERM."""
        step = state.global_step
        if self.interval and step % self.interval == 0 and step < state.max_steps:
            control.should_save = True
        if self.at_epoch and step % self.steps_per_epoch == 0:
            control.should_save = True
        if self.flag is not None and _any_rank(self.flag.requested):  # a collective: every rank, every step
            control.should_save = control.should_training_stop = self.stopped = True


def _any_rank(flag: bool) -> bool:
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return flag
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(value)
    return bool(value.item())


class CheckpointPublisher(TrainerCallback):
    """Puts each checkpoint the Trainer saved into ``root/step_<N>`` whole, marker last (rank 0, once all saved)."""

    def __init__(self, root: Path, keep: int, epoch_steps: int, batch: int, samples: int, elapsed: Callable) -> None:
        self.root, self.keep, self.steps_per_epoch = root, keep, epoch_steps
        self.batch_size, self.samples, self.elapsed = batch, samples, elapsed

    def on_save(self, args, state, control, **kwargs):
        """Publishes ``checkpoint-<N>`` (every rank waits for all to have saved; rank 0 moves it)."""
        from accelerate import PartialState

        PartialState().wait_for_everyone()  # every rank wrote its part (RNG states) of the checkpoint
        if not state.is_world_process_zero:
            return
        epoch, done = divmod(state.global_step, self.steps_per_epoch)
        info = {"epoch": epoch, "offset": min(done * self.batch_size, self.samples), "elapsed": self.elapsed()}
        source = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        preemption.publish_checkpoint(source, self.root, state.global_step, info, self.keep)
