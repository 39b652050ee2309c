"""What a local demo run produced, read back from its ``executor_output.json`` files, and the summary printed.

Outputs are told apart by their KFP artifact type, never by name; :data:`STEP_TASKS` alone names the tasks.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

#: The KFP task of each step (the second ``lm_eval``, the fine-tuned model's, gets ``-2``).
STEP_TASKS = {
    "dataset": "dataset-download",
    "train": "train-model",
    "base_eval": "lm-eval",
    "eval": "lm-eval-2",
    "registry": "model-registry",
}
#: The summary's losses: mean cross-entropy per token in nats (perplexity = e^loss), over these tokens.
TRAINING_LOSS = "per token, every assistant turn"
EVAL_LOSS = "per token, final answers only"
#: The held-out metrics shown base -> fine-tuned, with their labels.
HELDOUT_DELTAS = {
    "heldout_generation/chrf": "held-out chrF",
    "heldout_generation/exact_match": "held-out exact match",
    "heldout_perplexity/token_perplexity": "held-out perplexity",
}
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
    """What each task of the run in ``run_dir`` produced, by :func:`output_types` ``types``, in task order.

    Returns:
        ``{task: {"metrics": {...}, "reports": {name: uri}, "models": {name: uri}, "metadata": {name: {...}},
        "parameters": {...}}}`` (``metadata``: that of every output but the metrics).
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
            "reports": {n: a["uri"] for n, a in artifacts.items() if kinds.get(n) in REPORT_TYPES},
            "models": {n: a["uri"] for n, a in artifacts.items() if kinds.get(n) == MODEL_TYPE},
            "metadata": {n: a.get("metadata", {}) for n, a in artifacts.items() if kinds.get(n) != METRICS_TYPE},
            "parameters": output.get("parameterValues", {}),
        }
    return summary


def heldout_verdict(train_metrics: dict[str, Any]) -> tuple[bool | None, str]:
    """Whether training improved the held-out loss on the base model's (``None``: nothing to compare), and a line.

    The line of a run that did not improve starts with ``WARNING``.
    """
    after, before = train_metrics.get("eval_loss"), train_metrics.get("base_eval_loss")
    if after is None or before is None:
        return None, "held-out loss: not measured (no eval split, or a backend that does not score the base model)"
    what = f"held-out loss {before:.3f} -> {after:.3f} (base model -> trained; {TRAINING_LOSS})"
    if math.isfinite(after) and after < before:
        return True, f"{what}: improved"
    return False, (
        f"WARNING: {what} did NOT improve: the model learned nothing that carries over; raise the learning rate or "
        "epochs (LoRA: also lora_alpha)"
    )


def reward_lines(train_metrics: dict[str, Any], metadata: dict[str, dict[str, Any]]) -> list[str]:
    """GRPO: the mean reward per iteration (the model's ``reward_history`` metadata) and the reward gate's decision."""
    history = next((m["reward_history"] for m in metadata.values() if "reward_history" in m), [])
    lines = []
    if history:
        lines.append("  mean reward per iteration: " + " ".join(f"{value:.2f}" for value in history))
    window = int(train_metrics.get("reward_gate_window", 0))
    verdict = "PASSED" if train_metrics.get("reward_gate_passed") else "NOT PASSED"
    if "reward_gain" not in train_metrics:
        return [*lines, f"  reward gate {verdict}: too few iterations to tell"]
    lines.append(
        f"  reward gate {verdict}: last {window} iterations {train_metrics['reward_last_mean']:.3f} vs first {window} "
        f"{train_metrics['reward_first_mean']:.3f} (gain {train_metrics['reward_gain']:+.3f} +- "
        f"{train_metrics['reward_gain_standard_error']:.3f} s.e., one-sided Welch p="
        f"{train_metrics['reward_gate_p_value']:.4f}, alpha 0.05); the registry registers only a model that passed"
    )
    return lines


def _is_fraction(record: dict[str, Any]) -> bool:
    return 0 <= record["base"] <= 1 and 0 <= record["tuned"] <= 1


def _change(record: dict[str, Any]) -> str:
    """``+41.9, better`` / ``-77.5 pts, worse`` / ``-2.5 pts, within noise``: the delta and what it means."""
    delta = record["delta"]
    if delta == 0:
        return "same"
    shown = f"{delta * 100:+.1f} pts" if _is_fraction(record) else f"{delta:+.3g}"
    meaning = "within noise" if record.get("beyond_noise") is False else (record.get("change") or "changed")
    return f"{shown}, {meaning}"


def _base_to_tuned(label: str, record: dict[str, Any]) -> str:
    """``    general_sentences acc    1.00 -> 0.23 (-77.5 pts, worse)``."""
    digits = ".2f" if _is_fraction(record) else ".3g"
    return f"    {label:<24} {record['base']:{digits}} -> {record['tuned']:{digits}} ({_change(record)})"


def delta_lines(comparison: dict[str, dict[str, Any]]) -> list[str]:
    """Base -> fine-tuned for the held-out metrics and each other task's first metric, and the forgetting verdict.

    Forgotten: another task got worse beyond noise (|delta| > its stderr).
    """
    if not comparison:
        return ["  base -> fine-tuned: not compared (the base model was not evaluated)"]
    lines = ["  base -> fine-tuned (the same lm-eval tasks; the base model was evaluated before training):"]
    for name, label in HELDOUT_DELTAS.items():
        if name in comparison:
            lines.append(_base_to_tuned(label, comparison[name]))
    others: dict[str, dict[str, Any]] = {}
    for name, record in comparison.items():
        if not record["task"].startswith("heldout_"):
            others.setdefault(record["task"], {"name": name, **record})
    lines += [_base_to_tuned(f"{task} {record['metric']}", record) for task, record in others.items()]
    worse = [r for r in others.values() if r.get("change") == "worse"]
    forgot = [r for r in worse if r.get("beyond_noise") is True]
    unsure = [r for r in worse if r.get("beyond_noise") is None]
    if forgot:
        names = ", ".join(f"{r['task']} {r['metric']} {_change(r)}" for r in forgot)
        lines.append(f"  forgetting: YES, the fine-tuned model forgot what the base model could do ({names})")
    elif unsure:
        names = ", ".join(f"{r['task']} {r['metric']}" for r in unsure)
        lines.append(f"  forgetting: maybe, {names} got worse and lm-eval gave no stderr to tell noise apart")
    elif others:
        lines.append("  forgetting: none beyond noise on " + ", ".join(others))
    return lines


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
        if "reward_iterations" in train:  # GRPO: the reward, not a held-out loss
            lines += reward_lines(train, summary.get(STEP_TASKS["train"], {}).get("metadata", {}))
        else:
            lines.append(f"  {heldout_verdict(train)[1]}")
    if evaluation:
        lines.append(
            f"  lm-eval:    held-out loss {_number(evaluation, 'heldout_perplexity/token_loss', '.3f')} ({EVAL_LOSS}; "
            f"perplexity {_number(evaluation, 'heldout_perplexity/token_perplexity')} = e^loss), "
            f"exact match {_number(evaluation, 'heldout_generation/exact_match', '.2f')}, "
            f"chrF {_number(evaluation, 'heldout_generation/chrf', '.1f')}"
        )
    if STEP_TASKS["eval"] in summary:  # the comparison with the base model: the results' metadata
        outputs = summary[STEP_TASKS["eval"]]["metadata"].values()
        lines += delta_lines(next((m["comparison"] for m in outputs if "comparison" in m), {}))
    if registry:
        lines.append(f"  registry:   {registry.get('status', '?')}")
        modelcar = str(registry.get("model_uri") or "")
        lines.append(f"  modelcar:   {modelcar if modelcar.startswith('oci://') else 'skipped'}")
        lines.append("  deployment: skipped: no cluster (the demo runs locally; deploy_inference_service serves it)")
    lines.append("reports:")
    for task, produced in summary.items():
        label = f"{task} (base model)" if task == STEP_TASKS["base_eval"] else task
        lines += [f"  {label}: {uri}" for uri in produced["reports"].values()]
    for task, produced in summary.items():
        lines += [f"model: {uri}" for uri in produced["models"].values()]
    return lines
