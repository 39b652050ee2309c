"""The trainer core: SFT, OSFT and LoRA with TRL's ``SFTTrainer`` (+ ``peft``, + mini-trainer's OSFT model).

Used in-process by the ``local`` launcher and under ``torchrun`` by the ``transformers`` backend's pods. Rank 0 alone
writes ``output_dir``::

      metrics.jsonl                      one record per optimizer step (see ..pod.metrics)
      checkpoints/step_<N>/              the Trainer's checkpoint after step N, put in place whole
      checkpoints/step_<N>/done.json     written last: {"step", "epoch", "offset", "elapsed"}
      final/                             the trained model + tokenizer (LoRA merged)
      adapter/                           LoRA only: the adapter alone
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components._common.files import replace_dir
from components.training.finetuning.hf_trainer import callbacks, osft, preemption
from components.training.finetuning.hf_trainer.data import LocalTrainingError, chat_dataset, template_marks_assistant
from components.training.finetuning.pod import metrics as metrics_module

if TYPE_CHECKING:
    from components.training.finetuning.config import TrainingConfig

FINAL_DIR = "final"
ADAPTER_DIR = "adapter"
CHECKPOINTS_DIR = "checkpoints"
KEEP_CHECKPOINTS = 2  # complete checkpoints kept
#: ``fsdp_sharding_strategy`` values that shard full fine-tuning (FSDP2) on GPUs; others replicate with DDP.
SHARDING_STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD")
#: The algorithms that train a peft adapter (saved alone, then merged into the final model).
ADAPTER_ALGORITHMS = ("lora", "lora_grpo")


@dataclasses.dataclass
class TrainingResult:
    """What a run produced (``records``: the whole run's, before a resume too)."""

    final_model_dir: Path
    metrics_path: Path
    records: list[dict[str, Any]]
    train_seconds: float
    resumed_from: Path | None = None
    adapter_dir: Path | None = None
    eval_loss: float | None = None
    base_eval_loss: float | None = None


def lora_config(config: TrainingConfig) -> Any:
    """The run's peft ``LoraConfig``: rank, alpha, dropout, DoRA, rsLoRA and the init, on every linear layer."""
    from peft import LoraConfig

    init = {"true": True, "false": False}.get(config.lora_init_weights, config.lora_init_weights)
    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        use_dora=config.lora_use_dora,
        use_rslora=config.lora_use_rslora,
        init_lora_weights=init,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )


def quantization_config(config: TrainingConfig) -> Any:
    """QLoRA's ``BitsAndBytesConfig`` (4 or 8 bits; ``None`` without).

    Raises:
        LocalTrainingError: No CUDA device: bitsandbytes quantises on CUDA only.
    """
    if not (config.algorithm == "lora" and (config.lora_load_in_4bit or config.lora_load_in_8bit)):
        return None
    if not _cuda():
        bits = 4 if config.lora_load_in_4bit else 8
        raise LocalTrainingError(
            f"train_model parameter training_lora_load_in_{bits}bit=True: QLoRA loads the base model with "
            "bitsandbytes, which needs a CUDA GPU and this process sees none; train without quantisation here "
            "(training_lora_load_in_4bit/8bit=False) or on a GPU (training_launcher='trainjob')"
        )
    import torch
    from transformers import BitsAndBytesConfig

    if config.lora_load_in_8bit:
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type=config.lora_bnb_4bit_quant_type,
        bnb_4bit_compute_dtype=getattr(torch, config.lora_bnb_4bit_compute_dtype),
        bnb_4bit_use_double_quant=config.lora_bnb_4bit_use_double_quant,
    )


def batch_shape(config: TrainingConfig, world_size: int, longest: int) -> tuple[int, int]:
    """``(per-device micro-batch, accumulation steps)``: the rank's share of a step in ``max_tokens_per_gpu`` chunks.

    Raises:
        LocalTrainingError: ``effective_batch_size`` does not split evenly over the ranks.
    """
    per_rank, remainder = divmod(config.effective_batch_size, world_size)
    if remainder or not per_rank:
        raise LocalTrainingError(
            f"effective_batch_size={config.effective_batch_size} does not split over {world_size} process(es): use a "
            "multiple of num_nodes x processes per node"
        )
    budget = max(1, config.max_tokens_per_gpu // max(longest, 1))
    micro = max(size for size in range(1, min(budget, per_rank) + 1) if per_rank % size == 0)
    return micro, per_rank // micro


def common_arguments(config: TrainingConfig, output_dir: Path) -> dict[str, Any]:
    """The ``TrainingArguments`` that SFT's ``SFTConfig`` and GRPO's ``GRPOConfig`` share (saves: our callbacks)."""
    return {
        "output_dir": str(output_dir),
        "learning_rate": config.learning_rate,
        "lr_scheduler_type": config.lr_scheduler,
        "warmup_steps": config.warmup_steps,
        "seed": config.seed,
        "data_seed": config.seed,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "disable_tqdm": True,
        "use_cpu": not _cuda(),
        **_checkpointing(config.gradient_checkpointing),
    }


def _checkpointing(enabled: bool) -> dict[str, Any]:
    """``training_gradient_checkpointing`` as TrainingArguments spells it (5.x: ``activation_``), non-reentrant."""
    from transformers import TrainingArguments

    name = "activation" if "activation_checkpointing" in TrainingArguments.__dataclass_fields__ else "gradient"
    return {f"{name}_checkpointing": enabled, f"{name}_checkpointing_kwargs": {"use_reentrant": False}}


def _fsdp(config: TrainingConfig, world_size: int) -> dict[str, Any]:
    """FSDP2 for SFT over several GPUs (``HYBRID_SHARD``: replicated across nodes), else nothing: DDP."""
    strategy = config.fsdp_sharding_strategy
    if world_size < 2 or config.algorithm != "sft" or strategy not in SHARDING_STRATEGIES:
        return {}
    fsdp: dict[str, Any] = {
        "fsdp": True,
        "fsdp_config": {"version": 2, "reshard_after_forward": strategy != "SHARD_GRAD_OP"},
    }
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE") or world_size)
    if strategy == "HYBRID_SHARD" and world_size > per_node:
        from accelerate.parallelism_config import ParallelismConfig

        fsdp["parallelism_config"] = ParallelismConfig(dp_replicate_size=world_size // per_node, dp_shard_size=per_node)
    return fsdp


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def process_group() -> Any:
    """Accelerate's ``PartialState``: torchrun's process group (``cpu=True`` on CPU, where the default ignores it)."""
    from accelerate import PartialState

    return PartialState(cpu=not _cuda())


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


def prepare_trainer(trainer: Any) -> None:
    """Removes the Trainer's own step printer (the lines are StepMetrics') and status reporter (rank 0's server's)."""
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    for callback in list(trainer.callback_handler.callbacks):
        if type(callback).__name__ == "KubeflowCallback":  # added whenever the Trainer status endpoint is set
            trainer.remove_callback(callback)


def save_final(trainer: Any, algorithm: str, output_dir: Path) -> tuple[Path, Path | None]:
    """Every rank (a sharded model's state is gathered); rank 0 writes the final model and the adapter (LoRA)."""
    state = trainer.accelerator.get_state_dict(trainer.model_wrapped)  # full state dict on rank 0 (FSDP: gathered)
    if not trainer.is_world_process_zero():
        return output_dir / FINAL_DIR, None
    model = trainer.accelerator.unwrap_model(trainer.model)
    adapter_dir = None
    if algorithm in ADAPTER_ALGORITHMS:
        adapter_dir = replace_dir(output_dir / ADAPTER_DIR, model.save_pretrained)
        model, state = model.merge_and_unload(), None
    elif algorithm == "osft":
        model, state = osft.plain_model(model, state)

    def save(directory: Path) -> None:
        model.save_pretrained(directory, **({"state_dict": state} if state is not None else {}))
        trainer.processing_class.save_pretrained(directory)

    return replace_dir(output_dir / FINAL_DIR, save), adapter_dir


def train(
    config: TrainingConfig,
    output_dir: Path,
    model_path: str,
    train_rows: Iterable[dict[str, Any]],
    eval_rows: Iterable[dict[str, Any]] | None = None,
    *,
    data_label: str = "train_dataset",
    log: Callable[[str], None] = print,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    checkpoint_on_sigterm: bool = True,
) -> TrainingResult:
    """Fine-tunes the model at ``model_path`` on ``train_rows``, in this process or as one rank under torchrun.

    Args:
        config: The validated training configuration.
        output_dir: Where everything goes (see the module docstring); shared by the ranks.
        model_path: Local directory or HF id to load.
        train_rows: Checked chat rows (string contents).
        eval_rows: Checked chat rows scored before (fresh start) and after training.
        data_label: Names the training data in errors.
        log: Progress sink (rank 0 only).
        on_step: Called on rank 0 with each step's record once it is written (e.g. MLflow logging).
        checkpoint_on_sigterm: Save a checkpoint on SIGTERM (a paused job's just-in-time checkpoint).

    Raises:
        SystemExit: Status 143 after a SIGTERM (the checkpoint is saved first).
        LocalTrainingError: The data, the batch settings or QLoRA's device cannot be trained.
    """
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    state = process_group()
    main = state.is_main_process

    def say(line: str) -> None:
        if main:
            log(line)

    quantization = quantization_config(config)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    samples, longest = chat_dataset(tokenizer, train_rows, config.max_seq_len, data_label)
    eval_samples = None
    if eval_rows is not None:
        eval_samples, _ = chat_dataset(tokenizer, eval_rows, config.max_seq_len, "eval_dataset")
    steps_per_epoch = math.ceil(len(samples) / config.effective_batch_size)
    total_steps = steps_per_epoch * config.num_epochs
    total_steps = min(total_steps, config.max_steps) if config.max_steps else total_steps
    root = output_dir / CHECKPOINTS_DIR
    micro, accumulation = batch_shape(config, state.num_processes, longest)
    fsdp = _fsdp(config, state.num_processes) if _cuda() else {}  # accelerate shards on GPUs only; CPU ranks: DDP
    arguments = SFTConfig(
        **common_arguments(config, root / ".trainer"),
        per_device_train_batch_size=micro,
        per_device_eval_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        max_steps=total_steps,
        max_length=config.max_seq_len,
        assistant_only_loss=template_marks_assistant(tokenizer),
        model_init_kwargs={"dtype": "auto"} if quantization else None,  # else TRL loads float32
        bf16=False,
        ddp_broadcast_buffers=False,  # buffers (OSFT's frozen factors) are equal on every rank
        ddp_find_unused_parameters=False,
        include_num_input_tokens_seen="non_padding",
        average_tokens_across_devices=True,  # a step's loss over all its label tokens
        **fsdp,
    )
    checkpoint = preemption.newest_complete_checkpoint(root) if config.resume else None
    metrics_path = output_dir / metrics_module.LOCAL_METRICS_FILE
    marker = preemption.read_marker(checkpoint) if checkpoint is not None else None
    records: list[dict[str, Any]] = []
    if marker is not None:
        say(
            f"resuming from {checkpoint} (epoch {marker.get('epoch', 0)}, sample {marker.get('offset', 0)}, "
            f"step {marker['step']})"
        )
        records = _keep_records_up_to(metrics_path, marker["step"]) if main else []
    elif main:
        metrics_path.unlink(missing_ok=True)
    state.wait_for_everyone()  # every rank chose its checkpoint before rank 0 may write a newer one
    progress = callbacks.StepMetrics(
        metrics_path, records, total_steps, log=say, on_step=on_step, elapsed_before=(marker or {}).get("elapsed", 0.0)
    )
    schedule = callbacks.SaveSchedule(config.checkpoint_interval_steps, config.checkpoint_at_epoch, steps_per_epoch)
    publisher = callbacks.CheckpointPublisher(
        root, KEEP_CHECKPOINTS, steps_per_epoch, config.effective_batch_size, len(samples), progress.elapsed
    )
    if state.num_processes > 1:
        mode = f"FSDP2 {config.fsdp_sharding_strategy}" if fsdp else "DDP (every process holds the model)"
        say(f"data-parallel over {state.num_processes} process(es): {mode}")
    replicated = state.num_processes > 1 and not fsdp
    extra = [osft.ProjectionCallback(replicated)] if config.algorithm == "osft" else []
    model = osft.load_osft_model(model_path, config.unfreeze_rank_ratio) if config.algorithm == "osft" else model_path
    trainer = SFTTrainer(
        model=model,  # a path: TRL loads it (float32, or quantised) and attaches the adapter
        args=arguments,
        train_dataset=samples,
        eval_dataset=eval_samples,
        processing_class=tokenizer,
        callbacks=[progress, schedule, publisher, *extra],
        quantization_config=quantization,
        peft_config=lora_config(config) if config.algorithm == "lora" else None,
    )
    prepare_trainer(trainer)
    base_eval_loss = None
    if eval_samples is not None and checkpoint is None:
        base_eval_loss = trainer.evaluate()["eval_loss"]  # LoRA and OSFT start as the base model
        say(f"held-out loss of the base model: {base_eval_loss:.4f}")
    started = time.perf_counter()
    with preemption.sigterm_flag(log=say) if checkpoint_on_sigterm else contextlib.nullcontext() as schedule.flag:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)
    train_seconds = time.perf_counter() - started
    if schedule.stopped:
        say(f"SIGTERM: checkpoint saved; exiting with {preemption.SIGTERM_EXIT_CODE} so the job restarts and resumes")
        raise SystemExit(preemption.SIGTERM_EXIT_CODE)
    eval_loss = trainer.evaluate()["eval_loss"] if eval_samples is not None else None
    final_dir, adapter_dir = save_final(trainer, config.algorithm, output_dir)
    say(f"saved the final model to {final_dir}")
    state.wait_for_everyone()
    return TrainingResult(
        final_dir, metrics_path, progress.records, train_seconds, checkpoint, adapter_dir, eval_loss, base_eval_loss
    )
