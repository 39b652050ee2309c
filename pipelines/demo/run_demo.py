"""``kfp-finetune demo``: a whole fine-tuning pipeline, locally, on the tiny model and the shipped demo data.

The pipeline is the expert flavor of the chosen algorithm, run by ``kfp.local`` (subprocess runner, this
environment) with ``backend="local"`` (in-process CPU training): download/validate → train → evaluate (the held-out
split as a custom lm-eval task) → register (skipped unless a registry address is given).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipelines.demo.demo_data import DEMO_DATASET_PATH

#: Small enough for 2 CPU cores (~10 s of training, well under 90 s in all), long enough (8 epochs of 45 steps) that
#: the tiny model learns the answer format ``a op b = c``; it is too small to learn the arithmetic itself.
DEMO_ARGUMENTS = {
    "training_num_epochs": 8,
    "training_effective_batch_size": 8,
    "training_max_tokens_per_gpu": 4096,
    "training_learning_rate": 3e-3,
    "training_max_seq_len": 256,
    "training_max_steps": 0,
    "training_warmup_steps": 10,
    "training_lora_r": 8,
    "training_unfreeze_rank_ratio": 0.5,
    "training_num_nodes": 1,
}
DEMO_EVAL_ARGUMENTS = {"task_names": [], "max_samples": 20, "max_new_tokens": 16, "batch_size": "8"}


def _prepare_environment() -> None:
    """Offline hubs, and components that install nothing at run time (kfp.local runs them in this environment)."""
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(name, "1")
    os.environ["KFP_FINETUNE_INSTALL_PACKAGES"] = "0"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # A ~100k-parameter model trains fastest on one thread; more threads only contend (4-40x slower on 2 cores).
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def demo_arguments(algorithm: str, base_model: Path, dataset_uri: str, registry_address: str) -> dict[str, Any]:
    """The pipeline arguments of the demo run, by dashboard name."""
    from pipelines.training.finetuning.parameters import parameters_for

    by_step = {
        "dataset": {"dataset_uri": dataset_uri, "train_split_ratio": 0.9, "tokenizer_source": str(base_model)},
        "train": {**DEMO_ARGUMENTS, "training_base_model": str(base_model), "training_launcher": "local"},
        "eval": DEMO_EVAL_ARGUMENTS,
        "registry": {"registry_address": registry_address, "model_name": "kfp-finetune-demo"},
    }
    return {
        p.dashboard_name: by_step[p.step][p.name]
        for p in parameters_for(algorithm, "expert")
        if p.name in by_step[p.step]
    }


def list_outputs(pipeline_root: Path) -> list[Path]:
    """Every artifact file a run left under ``pipeline_root``, sorted."""
    return sorted(path for path in pipeline_root.rglob("*") if path.is_file())


def summarize_run(run_dir: Path) -> dict[str, dict[str, Any]]:
    """What each task of a local run produced, from its ``executor_output.json``.

    Returns:
        ``{task: {"metrics": {...}, "artifacts": {name: uri}, "parameters": {...}}}`` in task order.
    """
    summary: dict[str, dict[str, Any]] = {}
    for output_file in sorted(run_dir.glob("*/executor_output.json"), key=lambda p: p.stat().st_mtime):
        output = json.loads(output_file.read_text())
        artifacts = {name: entry["artifacts"][0] for name, entry in output.get("artifacts", {}).items()}
        metrics_name = next((name for name in ("metrics", "output_metrics") if name in artifacts), "metrics")
        summary[output_file.parent.name] = {
            "metrics": artifacts.get(metrics_name, {}).get("metadata", {}),
            "artifacts": {name: artifact["uri"] for name, artifact in artifacts.items() if name != metrics_name},
            "parameters": output.get("parameterValues", {}),
        }
    return summary


def _summary_lines(summary: dict[str, dict[str, Any]]) -> list[str]:
    """Human-readable lines of :func:`summarize_run`'s result."""
    lines = []
    for task, produced in summary.items():
        lines.append(f"  {task}:")
        lines += [f"    {name}: {value}" for name, value in produced["parameters"].items()]
        lines += [
            f"    {name} = {value:.4g}" if isinstance(value, float) else f"    {name} = {value}"
            for name, value in produced["metrics"].items()
        ]
        lines += [f"    {name} -> {uri}" for name, uri in produced["artifacts"].items()]
    return lines


def run_demo(
    output_dir: Path,
    algorithm: str = "sft",
    dataset_uri: str = "",
    registry_address: str = "",
    log: Callable[[str], None] = print,
) -> list[Path]:
    """Runs the demo pipeline and returns the artifact files it produced.

    Args:
        output_dir: Where the tiny base model and the run's outputs go (created).
        algorithm: ``sft``, ``osft`` or ``lora``.
        dataset_uri: Training data; default: the shipped demo dataset.
        registry_address: Model Registry host; empty = registration skipped.
        log: Where progress lines go.

    Returns:
        The artifact files under ``output_dir / "outputs"``.
    """
    _prepare_environment()
    started = time.perf_counter()
    output_dir = output_dir.resolve()
    from kfp import local

    from pipelines.demo import kfp_local_compat
    from pipelines.demo.tiny_model import build_tiny_model
    from pipelines.training.finetuning.definition import build_pipeline

    kfp_local_compat.install()

    log(f"[demo 1/3] building the tiny base model in {output_dir / 'base-model'}")
    base_model = build_tiny_model(output_dir / "base-model")
    pipeline_root = output_dir / "outputs"
    workspace = output_dir / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=str(pipeline_root),
        workspace_root=str(workspace),
    )
    pipeline = build_pipeline(algorithm, "expert", f"{algorithm}-demo", f"Local {algorithm.upper()} demo.")
    log(f"[demo 2/3] running the {algorithm} pipeline locally (dataset → train → eval → registry)")
    pipeline(**demo_arguments(algorithm, base_model, dataset_uri or str(DEMO_DATASET_PATH), registry_address))
    run_dir = max((p for p in pipeline_root.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    log(f"[demo 3/3] done in {time.perf_counter() - started:.0f}s; what each step produced ({run_dir}):")
    for line in _summary_lines(summarize_run(run_dir)):
        log(line)
    return list_outputs(run_dir)
