"""The trainer core: SFT, OSFT and LoRA with ``transformers`` (+ ``peft``), on one process or data-parallel ranks.

Used in-process by the ``local`` launcher (:mod:`..local.trainer`) and, under ``torchrun``, by the ``transformers``
backend's training pods (:mod:`.pod_worker`). Assistant-only loss from the chat template, seeded and reproducible.
With several ranks (:class:`.distributed.Distributed`) every rank tokenizes the same data and walks the same sample
order; each optimizer step's batch is split over the ranks (rank ``r`` takes samples ``r, r + world, ...``), the
gradients are averaged by ``DistributedDataParallel`` and every loss is normalised by the label tokens of the whole
batch, so a step is the same step whatever the number of ranks. Rank 0 alone writes. Layout of ``output_dir``::

    metrics.jsonl                      one record per optimizer step (see ..pod.metrics)
    checkpoints/step_<N>/state.pt      resumable state (model, optimizer, scheduler, RNG) after optimizer step N
    checkpoints/step_<N>/done.json     written last: {"step", "epoch", "offset", "elapsed"} marks it complete
    final/                             the trained model + tokenizer (save_pretrained layout; LoRA merged)
    adapter/                           LoRA only: the adapter alone

Checkpoints (:class:`.preemption.CheckpointWriter`: staged, marker last, renamed into place; the newest two kept) are
written at the end of each epoch (``checkpoint_at_epoch``), every ``checkpoint_interval_steps`` steps, and on SIGTERM
at the end of the running step (:func:`.preemption.save_on_sigterm`; the ranks agree on the stop, rank 0 saves, all
exit 143). ``resume`` restarts from the newest complete one (:func:`.preemption.newest_complete_checkpoint`) at the
same sample of the same epoch, so an interrupted and resumed run ends with the same steps and losses as an
uninterrupted one. Older ``checkpoints/epoch_<e>`` ones (marker without ``offset``: the end of epoch ``e``) are resumed
from too.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components._common.files import replace_dir
from components.training.finetuning.hf_trainer import osft, preemption
from components.training.finetuning.hf_trainer.data import (
    IGNORE_INDEX,
    Sample,
    micro_batches,
    summed_token_loss,
    tokenize_dataset,
)
from components.training.finetuning.hf_trainer.distributed import Distributed
from components.training.finetuning.pod import metrics as metrics_module

if TYPE_CHECKING:
    from components.training.finetuning.config import TrainingConfig

FINAL_DIR = "final"
ADAPTER_DIR = "adapter"
CHECKPOINTS_DIR = "checkpoints"
#: Complete checkpoints kept (older ones are deleted once a newer one is in place).
KEEP_CHECKPOINTS = 2


@dataclasses.dataclass
class TrainingResult:
    """What a run produced.

    Attributes:
        final_model_dir: The trained model in ``save_pretrained`` layout (merged for LoRA).
        metrics_path: The per-step JSONL file.
        records: The step records of the whole run (including steps before a resume).
        train_seconds: Wall-clock seconds of this process's training loop.
        resumed_from: The checkpoint training resumed from, or ``None``.
        adapter_dir: LoRA only: the adapter directory.
        eval_loss: Mean assistant-token loss on the eval data after training, when eval data was given.
        base_eval_loss: The same loss of the base model before training (a fresh start only; ``None`` on resume),
            so that a run shows whether training improved on the base model.
    """

    final_model_dir: Path
    metrics_path: Path
    records: list[dict[str, Any]]
    train_seconds: float
    resumed_from: Path | None = None
    adapter_dir: Path | None = None
    eval_loss: float | None = None
    base_eval_loss: float | None = None


def _seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    torch.manual_seed(seed)


def _load_model(config: TrainingConfig, model_source: str, device: Any = None):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_source)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    _seed_everything(config.seed)
    model = AutoModelForCausalLM.from_pretrained(model_source, dtype="float32")
    if config.gradient_checkpointing and getattr(model, "supports_gradient_checkpointing", False):
        # Non-reentrant: also right when only adapters (LoRA) or a subspace (OSFT) require gradients.
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    if config.algorithm == "lora":
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=config.lora_r,
            lora_alpha=config.lora_alpha,
            lora_dropout=config.lora_dropout,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
    elif config.algorithm == "osft":
        osft.attach_osft(model, config.unfreeze_rank_ratio)
    if device is not None:
        model = model.to(device)
    return model, tokenizer


def _optimizer_and_scheduler(model: Any, config: TrainingConfig, total_steps: int):
    import torch
    from transformers import get_scheduler

    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=config.learning_rate, weight_decay=0.0)
    scheduler = get_scheduler(
        config.lr_scheduler, optimizer, num_warmup_steps=config.warmup_steps, num_training_steps=total_steps
    )
    return optimizer, scheduler


def _capture_state(model, optimizer, scheduler, dist: Distributed) -> dict[str, Any]:
    """The resumable state of *now*: model, optimizer, scheduler, both RNGs (gathered by every rank when sharded)."""
    import torch

    return {
        "model": dist.model_state(model),
        "optimizer": dist.optimizer_state(model, optimizer),
        "scheduler": scheduler.state_dict(),
        "rng": torch.get_rng_state(),
        "python_rng": random.getstate(),
    }


def _restore_checkpoint(checkpoint: Path, model, optimizer, scheduler, dist: Distributed) -> dict[str, Any]:
    """Loads a checkpoint's state; returns its marker (``step``, ``epoch``, ``offset`` when mid-epoch, ``elapsed``)."""
    import torch

    state = torch.load(checkpoint / "state.pt", weights_only=False, map_location="cpu")
    dist.load_state(model, optimizer, state["model"], state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["rng"])
    random.setstate(state["python_rng"])
    marker = preemption.read_marker(checkpoint)
    assert marker is not None  # newest_complete_checkpoint only returns marked checkpoints
    return marker


@dataclasses.dataclass
class _Position:
    """Where the loop is: optimizer steps done, the epoch, and samples of that epoch's order done."""

    step: int = 0
    epoch: int = 0
    offset: int = 0


def _resume_position(marker: dict[str, Any], samples_per_epoch: int) -> _Position:
    """The position after a checkpoint; an end-of-epoch one (or an old one without ``offset``) starts the next."""
    offset = marker.get("offset")
    if offset is None or offset >= samples_per_epoch:
        return _Position(marker["step"], marker["epoch"] + 1, 0)
    return _Position(marker["step"], marker["epoch"], offset)


def _keep_records_up_to(metrics_path: Path, step: int) -> list[dict[str, Any]]:
    """Drops records after ``step`` (logged after the checkpoint, about to be redone) and returns the rest (rank 0)."""
    try:
        kept = [record for record in metrics_module.read_metrics(metrics_path) if record["step"] <= step]
    except metrics_module.MetricsFileError:  # missing or without a complete line: nothing to keep
        kept = []
    metrics_path.unlink(missing_ok=True)
    for record in kept:
        metrics_module.append_record(metrics_path, record)
    return kept


def _epoch_order(sample_count: int, seed: int, epoch: int) -> list[int]:
    order = list(range(sample_count))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order


def _save_final(
    model: Any, tokenizer: Any, config: TrainingConfig, output_dir: Path, state: dict[str, Any] | None = None
) -> tuple[Path, Path | None]:
    """Rank 0: the final model (``state``: the gathered full state dict of a sharded model) and the LoRA adapter."""
    adapter_dir = None
    if config.algorithm == "lora":
        adapter_dir = replace_dir(output_dir / ADAPTER_DIR, model.save_pretrained)
        model = model.merge_and_unload()
    elif config.algorithm == "osft":
        osft.merge_osft(model)

    def save(directory: Path) -> None:
        model.save_pretrained(directory, **({"state_dict": state} if state is not None else {}))
        tokenizer.save_pretrained(directory)

    return replace_dir(output_dir / FINAL_DIR, save), adapter_dir


def rank_micro_batches(batch: list[Sample], max_tokens_per_gpu: int, dist: Distributed) -> list[list[Sample] | None]:
    """This rank's micro-batches of ``batch`` (samples ``rank, rank + world, ...``), padded with ``None``.

    Padded to the count of the rank with the most, so that every rank runs as many forward passes (a sharded model's
    are collectives).
    """
    counts = [
        len(list(micro_batches(batch[rank :: dist.world_size], max_tokens_per_gpu))) for rank in range(dist.world_size)
    ]
    mine: list[list[Sample] | None] = list(micro_batches(batch[dist.rank :: dist.world_size], max_tokens_per_gpu))
    return mine + [None] * (max(counts) - len(mine))


def evaluate_loss(
    model: Any, samples: list[Sample], pad_token_id: int, max_tokens_per_gpu: int, dist: Distributed | None = None
) -> float:
    """Mean assistant-token cross-entropy of ``model`` on ``samples`` (no gradients; split over the ranks)."""
    import torch

    dist = dist or Distributed()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in rank_micro_batches(samples, max_tokens_per_gpu, dist):
            if batch is None and not dist.sharded:
                continue
            loss, tokens = summed_token_loss(model, batch or samples[:1], pad_token_id, dist.device)
            if batch is not None:
                total, count = total + float(loss), count + tokens
    total, count = dist.sum(total, count)
    return total / max(count, 1)


def train(
    config: TrainingConfig,
    output_dir: Path,
    model_source: str,
    train_rows: Iterable[dict[str, Any]],
    eval_rows: Iterable[dict[str, Any]] | None = None,
    *,
    data_label: str = "train_dataset",
    log: Callable[[str], None] = print,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    dist: Distributed | None = None,
    checkpoint_on_sigterm: bool = True,
) -> TrainingResult:
    """Fine-tunes the model at ``model_source`` on ``train_rows``, in this process or as one rank of ``dist``.

    A SIGTERM (preemption, KFP cancel, a paused TrainJob) while training saves a checkpoint at the end of the running
    step and exits with status 143 (``SystemExit``); the next run with ``resume`` continues from it.

    Args:
        config: The validated training configuration (a :class:`~..config.TrainingConfig`).
        output_dir: Where metrics, checkpoints and the final model go (see module docstring); shared by the ranks.
        model_source: Local directory or HF id to load.
        train_rows: Checked chat rows (``{"messages": [...]}``, string contents).
        eval_rows: Optional checked chat rows scored before (fresh start) and after training.
        data_label: Names the training data in errors.
        log: Progress sink (one line per step, rank 0).
        on_step: Called on rank 0 with each step's metrics record once it is written (e.g. MLflow logging).
        dist: The process group (default: this process alone).
        checkpoint_on_sigterm: Save a checkpoint on SIGTERM (the just-in-time checkpoint of a paused job).

    Returns:
        The run's outputs (the files and the records are rank 0's; every rank gets the same losses).

    Raises:
        SystemExit: Status 143 after a SIGTERM (the checkpoint is saved first).
    """
    dist = dist or Distributed()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    model, tokenizer = _load_model(config, model_source, dist.device)
    # FSDP where it applies (full fine-tuning, as Training Hub's SFT); LoRA and OSFT replicate the model (DDP).
    wrapped = dist.wrap(model, config.fsdp_sharding_strategy if config.algorithm == "sft" else "")
    if dist.active:
        mode = f"FSDP2 {config.fsdp_sharding_strategy}" if dist.sharded else "DDP (every process holds the model)"
        log(f"data-parallel over {dist.world_size} process(es): {mode}")
    samples = tokenize_dataset(tokenizer, train_rows, config.max_seq_len, data_label)
    steps_per_epoch = math.ceil(len(samples) / config.effective_batch_size)
    total_steps = steps_per_epoch * config.num_epochs
    total_steps = min(total_steps, config.max_steps) if config.max_steps else total_steps
    optimizer, scheduler = _optimizer_and_scheduler(model, config, total_steps)
    eval_samples = None
    if eval_rows is not None:
        eval_samples = tokenize_dataset(tokenizer, eval_rows, config.max_seq_len, "eval_dataset")
    metrics_path = output_dir / metrics_module.LOCAL_METRICS_FILE
    writer = preemption.CheckpointWriter(output_dir / CHECKPOINTS_DIR, keep_last=KEEP_CHECKPOINTS)
    checkpoint = preemption.newest_complete_checkpoint(writer.root) if config.resume else None
    dist.barrier()  # every rank chose its checkpoint before rank 0 may write a newer one
    position, elapsed_before = _Position(), 0.0
    if checkpoint is not None:
        marker = _restore_checkpoint(checkpoint, model, optimizer, scheduler, dist)
        position, elapsed_before = _resume_position(marker, len(samples)), marker.get("elapsed", 0.0)
        log(f"resuming from {checkpoint} (epoch {position.epoch}, sample {position.offset}, step {position.step})")
        records = _keep_records_up_to(metrics_path, position.step) if dist.is_main else []
    else:
        if dist.is_main:
            metrics_path.unlink(missing_ok=True)
        records = []
    base_eval_loss = None
    if eval_samples is not None and checkpoint is None:
        model.eval()  # LoRA and OSFT start as the base model, so this is the base model's held-out loss
        base_eval_loss = evaluate_loss(model, eval_samples, tokenizer.pad_token_id, config.max_tokens_per_gpu, dist)
        log(f"held-out loss of the base model: {base_eval_loss:.4f}")
    started = time.perf_counter()

    def save() -> None:
        """Rank 0 writes the checkpoint of the current position (every rank gathers it first); all wait for it."""
        import torch

        info = {
            "epoch": position.epoch,
            "offset": position.offset,
            "elapsed": elapsed_before + time.perf_counter() - started,
        }
        state = _capture_state(model, optimizer, scheduler, dist)
        if dist.is_main:
            writer.write(position.step, lambda directory: torch.save(state, directory / "state.pt"), info)
        dist.barrier()

    model.train()
    guard_context = preemption.save_on_sigterm(save, at_step_boundary=True, log=log)
    with guard_context if checkpoint_on_sigterm else _unguarded(save, log) as guard:
        while position.epoch < config.num_epochs and position.step < total_steps:
            order = _epoch_order(len(samples), config.seed, position.epoch)
            while position.offset < len(order) and position.step < total_steps:
                step = _Step(wrapped, model, config, tokenizer.pad_token_id, optimizer, scheduler, dist)
                record = step.run(samples, order, position)
                record.update(time=elapsed_before + time.perf_counter() - started, total_steps=total_steps)
                records.append(record)
                if dist.is_main:
                    metrics_module.append_record(metrics_path, record)
                    log(f"step {position.step}/{total_steps} " + _progress(record))
                    if on_step is not None:
                        on_step(record)
                interval = config.checkpoint_interval_steps
                if interval and position.step % interval == 0 and position.step < total_steps:
                    save()
                if dist.any(guard.requested):  # the ranks stop at the same step, whichever got the signal
                    guard.requested = True
                    guard.check()
            if config.checkpoint_at_epoch and position.offset >= len(order):
                save()
            if position.offset >= len(order):
                position.epoch, position.offset = position.epoch + 1, 0
    train_seconds = time.perf_counter() - started
    model.eval()
    eval_loss = None
    if eval_samples is not None:
        eval_loss = evaluate_loss(model, eval_samples, tokenizer.pad_token_id, config.max_tokens_per_gpu, dist)
    final_dir, adapter_dir = output_dir / FINAL_DIR, None
    full_state = dist.model_state(model) if dist.sharded else None
    if dist.is_main:
        final_dir, adapter_dir = _save_final(model, tokenizer, config, output_dir, full_state)
        log(f"saved the final model to {final_dir}")
    dist.barrier()
    return TrainingResult(
        final_dir, metrics_path, records, train_seconds, checkpoint, adapter_dir, eval_loss, base_eval_loss
    )


def _unguarded(save: Callable[[], None], log: Callable[[str], None]) -> Any:
    """A guard that is never triggered (no SIGTERM handler): a SIGTERM stops the process without a checkpoint."""
    import contextlib

    return contextlib.nullcontext(preemption.SigtermGuard(save=save, log=log))


def _progress(record: dict[str, Any]) -> str:
    return f"epoch {record['epoch']:.2f} loss {record['loss']:.4f} lr {record['lr']:.3g}"


@dataclasses.dataclass
class _Step:
    """One optimizer step over the next batch of the epoch's order, this rank's share of it."""

    wrapped: Any
    model: Any
    config: TrainingConfig
    pad_token_id: int
    optimizer: Any
    scheduler: Any
    dist: Distributed

    def run(self, samples: list[Sample], order: list[int], position: _Position) -> dict[str, Any]:
        """Trains the batch, advances ``position``, returns the step's record (without time)."""
        step_started = time.perf_counter()
        size = self.config.effective_batch_size
        batch = [samples[index] for index in order[position.offset : position.offset + size]]
        loss, tokens = self._train(batch)
        position.step += 1
        position.offset += len(batch)
        return {
            "step": position.step,
            "epoch": position.epoch + position.offset / len(order),
            "loss": loss,
            "lr": self.scheduler.get_last_lr()[0],
            "tokens_per_second": tokens / max(time.perf_counter() - step_started, 1e-9),
        }

    def _train(self, batch: list[Sample]) -> tuple[float, int]:
        """Gradient accumulation over this rank's micro-batches; returns (mean token loss, input tokens) of the batch.

        Each rank's loss is summed over its tokens and divided by the label tokens of the *whole* batch; DDP and FSDP
        average the gradients over the ranks, hence the factor ``world_size``. Every rank runs as many passes
        (:func:`rank_micro_batches`); a rank short of samples makes zero-weighted ones, so the collectives match.
        """
        import torch

        dist, config = self.dist, self.config
        label_tokens = sum(sum(1 for t in s.labels[1:] if t != IGNORE_INDEX) for s in batch)
        parts = rank_micro_batches(batch, config.max_tokens_per_gpu, dist)
        local_loss = 0.0
        for index, micro_batch in enumerate(parts):
            scale = dist.world_size if micro_batch is not None else 0
            with dist.no_sync(self.wrapped, skip=index < len(parts) - 1):
                loss, _ = summed_token_loss(self.wrapped, micro_batch or batch[:1], self.pad_token_id, dist.device)
                (loss * scale / label_tokens).backward()
            local_loss += float(loss.detach()) if scale else 0.0
        (total_loss,) = dist.sum(local_loss)
        if config.algorithm == "osft":
            osft.project_gradients(self.model)
        torch.nn.utils.clip_grad_norm_([p for p in self.model.parameters() if p.requires_grad], 1.0)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        if config.algorithm == "osft":
            osft.project_parameters(self.model)
        return total_loss / label_tokens, sum(len(sample.input_ids) for sample in batch)
