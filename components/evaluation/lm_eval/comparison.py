"""lm-eval's results as metric rows, and the fine-tuned model against the base (README: *Base model → fine-tuned*)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.evaluation.lm_eval.custom_task import HELDOUT_GENERATION_TASK, HELDOUT_PERPLEXITY_TASK, HELDOUT_TASKS

#: The metric a task is summed up by in the verdict (else its first metric in lm-eval's order).
HEADLINE_METRICS = {HELDOUT_GENERATION_TASK: "chrf", HELDOUT_PERPLEXITY_TASK: "token_perplexity"}
#: How metrics are named in the verdict.
METRIC_LABELS = {"chrf": "chrF"}
#: Tasks named in the verdict at most (the rest are counted).
VERDICT_TASKS = 6


@dataclass(frozen=True)
class MetricRow:
    """One metric of one task (or group) and lm-eval filter (``none``: unfiltered); None where lm-eval gives none."""

    task: str
    metric: str
    filter_name: str
    value: float
    stderr: float | None
    higher_is_better: bool | None

    @property
    def name(self) -> str:
        """The metric's KFP name: ``<task>/<metric>``, plus ``/<filter>`` for filtered metrics."""
        unfiltered = self.filter_name in ("", "none")
        return f"{self.task}/{self.metric}" if unfiltered else f"{self.task}/{self.metric}/{self.filter_name}"


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a real number (not a bool, not "N/A"), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def metric_rows(results: Mapping[str, Any]) -> list[MetricRow]:
    """lm-eval's ``results`` as one row per task, metric and filter, in its order; no row for what is no number."""
    rows = []
    directions = results.get("higher_is_better") or {}
    for task, entries in (results.get("results") or {}).items():
        for key, raw in entries.items():
            metric, separator, filter_name = key.partition(",")
            value = _number(raw)
            if not separator or metric.endswith("_stderr") or value is None:
                continue
            stderr = _number(entries.get(f"{metric}_stderr,{filter_name}"))
            direction = (directions.get(task) or {}).get(metric)
            rows.append(
                MetricRow(task, metric, filter_name, value, stderr, None if direction is None else bool(direction))
            )
    return rows


@dataclass(frozen=True)
class Comparison:
    """One metric of one task, evaluated on the fine-tuned model (``tuned``: its name is the KFP one) and the base."""

    tuned: MetricRow
    base: MetricRow

    @property
    def delta(self) -> float:
        """Tuned minus base."""
        return self.tuned.value - self.base.value

    @property
    def stderr(self) -> float | None:
        """Standard error of the delta, ``sqrt(a² + b²)`` of the two runs' (either one alone; None without any)."""
        errors = [e for e in (self.base.stderr, self.tuned.stderr) if e is not None and math.isfinite(e)]
        return math.sqrt(sum(e * e for e in errors)) if errors else None

    @property
    def beyond_noise(self) -> bool | None:
        """Whether ``|delta| > stderr`` (None when no standard error is known or the delta is not finite)."""
        if self.stderr is None or not math.isfinite(self.delta):
            return None
        return abs(self.delta) > self.stderr

    @property
    def higher_is_better(self) -> bool | None:
        """The metric's direction (the tuned run's, else the base run's)."""
        return self.tuned.higher_is_better if self.tuned.higher_is_better is not None else self.base.higher_is_better

    @property
    def change(self) -> str:
        """``better``, ``worse`` or ``same`` by the metric's direction ("" when the direction is unknown)."""
        if self.delta == 0:
            return "same"
        if self.higher_is_better is None:
            return ""
        return "better" if (self.delta > 0) == self.higher_is_better else "worse"

    def as_record(self) -> dict[str, Any]:
        """The comparison as plain values, non-finite ones as text (the ``comparison`` metadata the gate reads)."""
        record = {
            "task": self.tuned.task,
            "metric": self.tuned.metric,
            "base": self.base.value,
            "tuned": self.tuned.value,
            "delta": self.delta,
            "stderr": self.stderr,
            "beyond_noise": self.beyond_noise,
            "higher_is_better": self.higher_is_better,
            "change": self.change,
        }
        return {
            key: str(value) if isinstance(value, float) and not math.isfinite(value) else value
            for key, value in record.items()
        }


def compare(rows: Iterable[MetricRow], baseline_rows: Iterable[MetricRow]) -> list[Comparison]:
    """Pairs each tuned metric with the base model's of the same task, metric and filter (those both runs have)."""
    base = {row.name: row for row in baseline_rows}
    return [Comparison(row, base[row.name]) for row in rows if row.name in base]


def comparison_metrics(comparisons: Iterable[Comparison]) -> dict[str, float]:
    """The KFP metrics of the comparison: ``<name>/base`` and ``<name>/delta`` (non-finite values left out)."""
    metrics: dict[str, float] = {}
    for item in comparisons:
        if math.isfinite(item.base.value):
            metrics[item.tuned.name + "/base"] = item.base.value
        if math.isfinite(item.delta):
            metrics[item.tuned.name + "/delta"] = item.delta
    return metrics


def is_fraction(item: Comparison) -> bool:
    """Whether both values lie in [0, 1] (accuracy-like metrics, shown in percentage points)."""
    return 0.0 <= item.base.value <= 1.0 and 0.0 <= item.tuned.value <= 1.0


def format_delta(item: Comparison) -> str:
    """The delta as the verdict shows it: ``+18.2``, or ``-0.4 pts`` for a 0-1 metric (percentage points)."""
    if not math.isfinite(item.delta):
        return str(item.delta)
    if is_fraction(item):
        return f"{item.delta * 100:+.1f} pts".replace("-", "\u2212")
    text = f"{item.delta:+.3g}" if abs(item.delta) < 1 else f"{item.delta:+.1f}"
    return text.replace("-", "\u2212")


def qualifier(item: Comparison) -> str:
    """``within noise``, ``better``/``worse`` (beyond noise), or the change with ``no stderr`` when noise is unknown."""
    if not math.isfinite(item.delta):
        return "not comparable"
    if item.delta == 0:
        return "same"
    if item.beyond_noise is False:
        return "within noise"
    change = item.change or "direction unknown"
    return change if item.beyond_noise else f"{change}; no stderr"


def _headline(task: str, items: Sequence[Comparison]) -> Comparison:
    """The comparison a task is summed up by (:data:`HEADLINE_METRICS`, else its first metric)."""
    preferred = HEADLINE_METRICS.get(task)
    return next((i for i in items if i.tuned.metric == preferred and i.tuned.filter_name == "none"), items[0])


def _label(item: Comparison) -> str:
    """``held-out chrF``, ``arc_easy acc``, ``gsm8k exact_match (strict-match)``."""
    task = "held-out" if item.tuned.task in HELDOUT_TASKS else item.tuned.task
    metric = METRIC_LABELS.get(item.tuned.metric, item.tuned.metric)
    filtered = "" if item.tuned.filter_name in ("", "none") else f" ({item.tuned.filter_name})"
    return f"{task} {metric}{filtered}"


def verdict(comparisons: Sequence[Comparison], tasks: Sequence[str] = ()) -> str:
    """One line: the headline metric of each task in ``tasks`` (empty: every one), held-out first; "" if none."""
    by_task: dict[str, list[Comparison]] = {}
    for item in comparisons:
        by_task.setdefault(item.tuned.task, []).append(item)
    order = [t for t in (tasks or by_task) if t in by_task]
    if HELDOUT_GENERATION_TASK in order and HELDOUT_PERPLEXITY_TASK in order:
        order.remove(HELDOUT_PERPLEXITY_TASK)
    order.sort(key=lambda task: task not in HELDOUT_TASKS)
    parts = []
    for task in order[:VERDICT_TASKS]:
        item = _headline(task, by_task[task])
        parts.append(f"{_label(item)} {format_delta(item)} ({qualifier(item)})")
    if len(order) > VERDICT_TASKS:
        parts.append(f"and {len(order) - VERDICT_TASKS} more tasks (see the tables)")
    return "; ".join(parts)


def baseline_comparison(
    rows: Iterable[MetricRow], baseline: Mapping[str, Any], tasks: Sequence[str]
) -> tuple[str, list[Comparison], str]:
    """``(why the baseline run evaluated nothing, or "", the comparisons, the verdict line)`` of a run's rows."""
    skipped = str(baseline.get("skipped") or "")
    comparisons = [] if skipped else compare(rows, metric_rows(baseline))
    return skipped, comparisons, verdict(comparisons, tasks) or "no metric in common with the base model's run"


def compare_with_baseline(
    results: Mapping[str, Any], baseline: Mapping[str, Any] | None, tasks: Sequence[str]
) -> tuple[dict[str, float], dict[str, Any]]:
    """The ``/base`` and ``/delta`` metrics; ``comparison``, ``verdict``, ``baseline_model`` or ``baseline_skipped``."""
    if baseline is None:
        return {}, {}
    skipped, comparisons, line = baseline_comparison(metric_rows(results), baseline, tasks)
    if skipped:
        return {}, {"baseline_skipped": skipped}
    records = {item.tuned.name: item.as_record() for item in comparisons}
    base_model = str((baseline.get("config") or {}).get("model_args") or "")
    return comparison_metrics(comparisons), {"comparison": records, "verdict": line, "baseline_model": base_model}
