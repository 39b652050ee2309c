"""Publishing a run: the ``Model`` artifact, its metadata, the KFP metrics, the report (never half-written)."""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path
from typing import Any

from components._common.files import replace_dir, with_extension, write_text_atomically
from components._common.masking import mask_data
from components._common.model_location import (
    STORAGE_ARTIFACT,
    STORAGE_WORKSPACE,
    ModelManifest,
    build_manifest,
    write_manifest,
)
from components.training.finetuning.contract import GRPO_ALGORITHMS
from components.training.finetuning.plan import LauncherRun, RunPlan, TrainModelResult
from components.training.finetuning.report import render_report, summarize
from components.training.finetuning.reward_gate import reward_gate


class PublishError(OSError):
    """An output could not be written (disk full, read-only, no permission); the message is one line."""


def free_bytes(path: Path) -> int | None:
    """Free bytes on the file system holding ``path`` (or its nearest existing parent); ``None`` when unknown."""
    existing = next((candidate for candidate in (path, *path.parents) if candidate.exists()), path)
    with contextlib.suppress(OSError):
        return shutil.disk_usage(existing).free
    return None


def _mib(count: int | None) -> str:
    return "unknown" if count is None else f"{count / 2**20:.1f} MiB"


def write_output(what: str, target: Path, needed: int, write: Any) -> Any:
    """Runs ``write()`` (atomic) for ``what`` at ``target`` after checking ``needed`` bytes against the free space.

    Raises:
        PublishError: ``train_model: cannot write <what> to <target>: <cause> (<free> free there, <needed> needed)``.
    """

    def space() -> str:
        return f"{_mib(free_bytes(target.parent))} free there, {_mib(needed)} needed; nothing half-written was left"

    free = free_bytes(target.parent)
    if free is not None and needed > free:
        raise PublishError(
            f"train_model: cannot write {what} to {target}: not enough space ({space()}); free space on that volume "
            "or give the output a larger one"
        )
    try:
        return write()
    except (OSError, shutil.Error) as error:
        cause = " ".join(str(error).split())
        if isinstance(error, shutil.Error) and error.args and isinstance(error.args[0], list) and error.args[0]:
            first = error.args[0][0]  # shutil.Error's argument: a list of (source, destination, why)
            cause = str(first[2]) if isinstance(first, tuple) and len(first) == 3 else str(first)
        raise PublishError(f"train_model: cannot write {what} to {target}: {cause} ({space()})") from None


def find_final_checkpoint(ckpt_dir: Path) -> Path:
    """The newest ``hf_format/samples_<N>`` (SFT, OSFT), else ``final/`` (transformers), else ``ckpt_dir`` (LoRA).

    Raises:
        FileNotFoundError: No checkpoint.
    """

    def samples_seen(path: Path) -> tuple[float, float]:  # samples_640 or samples_64.0; 0 without a number
        numbers = re.findall(r"\d+(?:\.\d+)?", path.name)
        return (float(numbers[-1]) if numbers else 0.0), path.stat().st_mtime

    candidates = [p for p in (ckpt_dir / "hf_format").glob("*") if (p / "config.json").is_file()]
    if candidates:
        return max(candidates, key=samples_seen)
    if (ckpt_dir / "final" / "config.json").is_file():
        return ckpt_dir / "final"
    if (ckpt_dir / "config.json").is_file() or (ckpt_dir / "adapter_config.json").is_file():
        return ckpt_dir
    raise FileNotFoundError(f"no final checkpoint (hf_format/* or a model) under {ckpt_dir}")


def publish_model(
    model: Any, final_dir: Path, on_workspace: bool, copy_to_artifact: bool
) -> tuple[Path, ModelManifest]:
    """Writes the ``Model`` artifact: the manifest, plus the files with ``copy_to_artifact`` or off the workspace.

    Returns:
        ``(the directory holding the model, the manifest written)``.
    """
    target = Path(model.path)
    in_artifact = copy_to_artifact or not on_workspace
    storage = STORAGE_WORKSPACE if on_workspace else STORAGE_ARTIFACT
    manifest = build_manifest(final_dir, storage, in_artifact)

    def write(staging: Path) -> None:
        if in_artifact:
            shutil.copytree(final_dir, staging, dirs_exist_ok=True)
        write_manifest(staging, manifest)

    needed = manifest.total_bytes if in_artifact else 2**16
    write_output("the model", target, needed, lambda: replace_dir(target, write))
    return (target if storage == STORAGE_ARTIFACT else final_dir), manifest


def publish_outputs(
    plan: RunPlan,
    trained: LauncherRun,
    model: Any,
    metrics: Any,
    report: Any,
    facts: dict[str, str],
    temporary: str | None,
) -> TrainModelResult:
    """Writes the ``Model`` artifact (:func:`publish_model`) with its metadata, the KFP metrics and the HTML report."""
    config, final_dir, launcher = plan.config, trained.final_dir, trained.launcher or plan.launcher
    # The local launcher's run directory is scratch (kfp.local deletes it): the model artifact is the copy that lasts.
    scratch = bool(temporary) or launcher == "local"
    model_dir, manifest = publish_model(model, final_dir, not scratch, plan.request.output.copy_model_to_artifact)
    checkpoint_path = str(model.uri if scratch else final_dir)
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
        "backend": launcher,
        "model_format": "huggingface",
        "lora_weights": lora_weights,
        **trained.extra_metadata,
        **manifest.metadata(),
    }
    model.metadata.update(mask_data(metadata, patterns=False))
    summary = summarize(trained.records, trained.train_seconds)
    if trained.eval_loss is not None:
        summary["eval_loss"] = float(trained.eval_loss)
    if trained.base_eval_loss is not None:
        summary["base_eval_loss"] = float(trained.base_eval_loss)
    if config.algorithm in GRPO_ALGORITHMS:  # the reward gate's decision and numbers (the registry gates on them)
        gate = reward_gate(trained.rewards)
        print(gate.line(), flush=True)
        summary.update(gate.metrics())
    for name, value in summary.items():
        metrics.log_metric(name, value)
    shown = {key: metadata[key] for key in ("base_model", "algorithm", "backend", "checkpoint_path")}
    job = f"{trained.job_kind} {trained.job_name}" if trained.job_name else "(local launcher: no cluster job)"
    shown.update(job=job, **facts)
    html = render_report(trained.records, summary, config.hyperparameters(), shown)
    report_path = Path(with_extension(report, ".html"))
    write_output("the report", report_path, len(html.encode()), lambda: write_text_atomically(report_path, html))
    return TrainModelResult(
        model_dir, checkpoint_path, summary, trained.records, metadata, trained.job_name, trained.job_kind
    )
