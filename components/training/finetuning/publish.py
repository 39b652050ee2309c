"""Publishing a run: the model into the ``Model`` artifact (with metadata), the KFP metrics and the HTML report."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from components._common.files import replace_dir, with_extension, write_text_atomically
from components._common.masking import mask_data
from components.training.finetuning.plan import BackendRun, RunPlan, TrainModelResult
from components.training.finetuning.pod import metrics as metrics_module
from components.training.finetuning.report import render_report


def _samples_seen(name: str) -> float:
    """The sample count in a checkpoint name such as ``samples_640`` or ``samples_64.0`` (0 when there is none)."""
    numbers = re.findall(r"\d+(?:\.\d+)?", name)
    return float(numbers[-1]) if numbers else 0.0


def find_final_checkpoint(ckpt_dir: Path) -> Path:
    """The final Hugging Face checkpoint the training pods left in ``ckpt_dir``.

    The newest ``hf_format/samples_<N>`` (Training Hub SFT and OSFT), else ``final/`` (the ``transformers`` backend,
    :mod:`.hf_trainer.loop`), else ``ckpt_dir`` itself when it holds a model or adapter (Training Hub LoRA saves there).

    Raises:
        FileNotFoundError: No checkpoint.
    """
    candidates = [p for p in (ckpt_dir / "hf_format").glob("*") if (p / "config.json").is_file()]
    if candidates:
        return max(candidates, key=lambda p: (_samples_seen(p.name), p.stat().st_mtime))
    if (ckpt_dir / "final" / "config.json").is_file():
        return ckpt_dir / "final"
    if (ckpt_dir / "config.json").is_file() or (ckpt_dir / "adapter_config.json").is_file():
        return ckpt_dir
    raise FileNotFoundError(f"no final checkpoint (hf_format/* or a model) under {ckpt_dir}")


def publish_outputs(
    plan: RunPlan,
    trained: BackendRun,
    model: Any,
    metrics: Any,
    report: Any,
    facts: dict[str, str],
    temporary: str | None,
) -> TrainModelResult:
    """Copies the model into the artifact and writes its metadata, the KFP metrics and the HTML report."""
    config, final_dir, backend = plan.config, trained.final_dir, trained.backend or plan.backend
    model_dir = replace_dir(Path(model.path), lambda staging: shutil.copytree(final_dir, staging, dirs_exist_ok=True))
    # The local backend trains in this task: its run directory is scratch (a temporary directory, or a pipeline
    # workspace that kfp.local deletes when the run ends), so the model artifact is the copy that lasts.
    checkpoint_path = str(model.uri if temporary or backend == "local" else final_dir)
    lora_weights = ""
    if config.algorithm == "lora":
        lora_weights = "adapter" if (final_dir / "adapter_config.json").is_file() else "merged"
    metadata = {
        "checkpoint_path": checkpoint_path,
        "base_model": config.base_model,
        "algorithm": config.algorithm,
        "hyperparameters": config.hyperparameters(),
        **facts,
        "job_name": trained.job_name,
        "job_kind": trained.job_kind,
        "backend": backend,
        "model_format": "huggingface",
        "lora_weights": lora_weights,
        **trained.extra_metadata,
    }
    model.metadata.update(mask_data(metadata, patterns=False))
    summary = metrics_module.summarize(trained.records, trained.train_seconds)
    if trained.eval_loss is not None:
        summary["eval_loss"] = float(trained.eval_loss)
    if trained.base_eval_loss is not None:
        summary["base_eval_loss"] = float(trained.base_eval_loss)
    for name, value in summary.items():
        metrics.log_metric(name, value)
    shown = {key: metadata[key] for key in ("base_model", "algorithm", "backend", "checkpoint_path")}
    job = f"{trained.job_kind} {trained.job_name}" if trained.job_name else "(local launcher: no cluster job)"
    shown.update(job=job, **facts)
    html = render_report(trained.records, summary, config.hyperparameters(), shown)
    write_text_atomically(Path(with_extension(report, ".html")), html)
    return TrainModelResult(
        model_dir, checkpoint_path, summary, trained.records, metadata, trained.job_name, trained.job_kind
    )
