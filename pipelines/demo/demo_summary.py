"""What a local demo run produced, read back from its ``executor_output.json`` files, and the summary printed.

Outputs are told apart by their KFP artifact type (``system.Metrics``, ``system.HTML``, ``system.Markdown``,
``system.Model``) read from the pipeline spec, never by output name, so renaming a component's outputs needs no
change here. The one place that names the pipeline's tasks is :data:`STEP_TASKS`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

#: The KFP task of each pipeline step (the component's name, dashes for underscores).
STEP_TASKS = {"dataset": "dataset-download", "train": "train-model", "eval": "lm-eval", "registry": "model-registry"}
METRICS_TYPE = "system.Metrics"
MODEL_TYPE = "system.Model"
REPORT_TYPES = ("system.HTML", "system.Markdown")


def output_types(pipeline_spec: Any) -> dict[str, dict[str, str]]:
    """``{task: {output artifact: schema title}}`` of a compiled pipeline (``GraphComponent.pipeline_spec``)."""
    types = {}
    for task, task_spec in pipeline_spec.root.dag.tasks.items():
        component = pipeline_spec.components[task_spec.component_ref.name]
        artifacts = component.output_definitions.artifacts
        types[task] = {name: spec.artifact_type.schema_title for name, spec in artifacts.items()}
    return types


def summarize_run(run_dir: Path, types: dict[str, dict[str, str]]) -> dict[str, dict[str, Any]]:
    """What each task of a local run produced, from its ``executor_output.json``.

    Args:
        run_dir: The run's folder under the pipeline root.
        types: :func:`output_types` of the pipeline.

    Returns:
        ``{task: {"metrics": {...}, "artifacts": {name: uri}, "reports": {name: uri}, "models": {name: uri},
        "parameters": {...}}}`` in task order (``artifacts`` holds every non-metrics output).
    """
    summary: dict[str, dict[str, Any]] = {}
    for output_file in sorted(run_dir.glob("*/executor_output.json"), key=lambda p: p.stat().st_mtime):
        task = output_file.parent.name
        output = json.loads(output_file.read_text())
        artifacts = {name: entry["artifacts"][0] for name, entry in output.get("artifacts", {}).items()}
        kinds = types.get(task, {})
        metrics: dict[str, Any] = {}
        for name, artifact in artifacts.items():
            if kinds.get(name) == METRICS_TYPE:
                metrics.update(artifact.get("metadata", {}))
        summary[task] = {
            "metrics": metrics,
            "artifacts": {n: a["uri"] for n, a in artifacts.items() if kinds.get(n) != METRICS_TYPE},
            "reports": {n: a["uri"] for n, a in artifacts.items() if kinds.get(n) in REPORT_TYPES},
            "models": {n: a["uri"] for n, a in artifacts.items() if kinds.get(n) == MODEL_TYPE},
            "parameters": output.get("parameterValues", {}),
        }
    return summary


def heldout_verdict(train_metrics: dict[str, Any]) -> tuple[bool | None, str]:
    """Whether training improved the held-out loss on the base model's, and a line saying so.

    Returns:
        ``(True, ...)`` improved, ``(False, ...)`` not improved (the line starts with ``WARNING``), ``(None, ...)``
        when the run has no base-model or no held-out loss to compare.
    """
    after, before = train_metrics.get("eval_loss"), train_metrics.get("base_eval_loss")
    if after is None or before is None:
        return None, "held-out loss: not measured (no eval split, or a backend that does not score the base model)"
    if math.isfinite(after) and after < before:
        return True, f"held-out loss {before:.3f} -> {after:.3f} (base model -> trained): improved"
    return False, (
        f"WARNING: held-out loss {before:.3f} -> {after:.3f} (base model -> trained) did NOT improve: the model "
        "learned nothing that carries over; raise the learning rate or epochs (LoRA: also lora_alpha)"
    )


def _number(metrics: dict[str, Any], name: str, digits: str = ".3g") -> str:
    value = metrics.get(name)
    return "n/a" if value is None else format(value, digits)


def summary_lines(summary: dict[str, dict[str, Any]], run_dir: Path) -> list[str]:
    """The demo's closing lines: what each step did, the held-out verdict, and a link to every report."""
    data = summary.get(STEP_TASKS["dataset"], {}).get("metrics", {})
    train = summary.get(STEP_TASKS["train"], {}).get("metrics", {})
    evaluation = summary.get(STEP_TASKS["eval"], {}).get("metrics", {})
    registry = summary.get(STEP_TASKS["registry"], {}).get("parameters", {})
    lines = [f"done: outputs in {run_dir}"]
    if data:
        lines.append(
            f"  data:       {data.get('rows_valid', 0):.0f} valid rows, {data.get('rows_rejected', 0):.0f} rejected"
            f" -> {data.get('train_rows', 0):.0f} train / {data.get('eval_rows', 0):.0f} held-out"
        )
    if train:
        lines.append(
            f"  training:   {train.get('steps', 0):.0f} steps in {train.get('train_seconds', 0):.1f}s, "
            f"final train loss {_number(train, 'final_loss', '.3f')} (lowest {_number(train, 'min_loss', '.3f')})"
        )
        lines.append(f"  {heldout_verdict(train)[1]}")
    if evaluation:
        lines.append(
            f"  lm-eval:    held-out perplexity {_number(evaluation, 'heldout_perplexity/token_perplexity')}, "
            f"exact match {_number(evaluation, 'heldout_generation/exact_match', '.2f')}, "
            f"chrF {_number(evaluation, 'heldout_generation/chrf', '.1f')}"
        )
    if registry:
        lines.append(f"  registry:   {registry.get('status', '?')}")
    lines.append("reports:")
    for task, produced in summary.items():
        lines += [f"  {task}: {uri}" for uri in produced["reports"].values()]
    for task, produced in summary.items():
        lines += [f"model: {uri}" for uri in produced["models"].values()]
    return lines
