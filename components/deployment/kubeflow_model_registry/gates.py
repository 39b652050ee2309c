"""The gates before registration: a metric threshold and the continual-learning gates (README: *Overview*)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from .lineage import ArtifactInfo
from .request import GateOptions

#: ``lm_eval``'s tasks built from the held-out split: they measure the new task, never a regression.
HELDOUT_TASKS = ("heldout_generation", "heldout_perplexity")


@dataclasses.dataclass(frozen=True)
class MetricCheck:
    """One compared metric, its record, its ``role`` (improvement, regression, new task) and the gate's ``verdict``."""

    name: str
    record: Mapping[str, Any]
    role: str
    verdict: str = ""


@dataclasses.dataclass(frozen=True)
class GateDecision:
    """Whether the model may be registered: one line per gate, those that failed, and every compared metric."""

    reasons: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()
    checks: tuple[MetricCheck, ...] = ()

    @property
    def passed(self) -> bool:
        """True when no gate is set or every gate passed."""
        return not self.failures


def evaluate_gate(
    min_metric_name: str, min_metric_value: float, eval_metrics: Mapping[str, Any], train_metrics: Mapping[str, Any]
) -> GateDecision:
    """Checks ``metric >= min_metric_value``, the metric looked up in the eval metrics first (no gate without a name).

    Raises:
        ValueError: The metric is in neither set (a typo must not silently block or pass), or is not a number.
    """
    name = min_metric_name.strip()
    if not name:
        return GateDecision(("no metric gate (min_metric_name is empty)",))
    for label, metrics in (("eval_metrics", eval_metrics), ("train_metrics", train_metrics)):
        if name in metrics:
            try:
                value = float(metrics[name])
            except (TypeError, ValueError):
                raise ValueError(f"min_metric_name: {label}[{name!r}] is {metrics[name]!r}, not a number") from None
            if math.isnan(value):
                raise ValueError(f"min_metric_name: {label}[{name!r}] is NaN; the gate cannot compare it")
            verdict = ">=" if value >= min_metric_value else "<"
            reason = f"{label} {name} = {value:g} {verdict} min_metric_value {min_metric_value:g}"
            return GateDecision((reason,), () if value >= min_metric_value else (reason,))
    available = sorted({*eval_metrics, *train_metrics}) or "none: wire eval_metrics or train_metrics"
    raise ValueError(
        f"min_metric_name={name!r} is not among the metrics given to the step ({available}); fix the name or leave "
        "it empty to register without a gate"
    )


def _number(record: Mapping[str, Any], key: str) -> float:
    value = record.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def improvement(record: Mapping[str, Any]) -> float | None:
    """The delta signed by the metric's direction (positive = better); None when the direction is unknown."""
    direction = record.get("higher_is_better")
    if direction is None:
        return None
    delta = _number(record, "delta")
    return delta if direction else -delta


def regression(record: Mapping[str, Any], relative: bool) -> float | None:
    """How much worse the metric got (0 when it did not): absolute, or relative to ``|base|``; None when unknown."""
    gain = improvement(record)
    if gain is None or math.isnan(gain):
        return None
    worse = max(0.0, -gain)
    if not relative:
        return worse
    base = abs(_number(record, "base"))
    if math.isnan(base):
        return None
    return worse / base if base else (math.inf if worse else 0.0)


def evaluate_delta_gate(
    comparison: Mapping[str, Mapping[str, Any]] | None,
    min_improvement_metric: str,
    min_improvement: float,
    max_regression: float,
    max_regression_relative: bool,
    unavailable: str = "",
) -> GateDecision:
    """Decides the continual-learning gate on ``comparison`` (``unavailable``: why there is none, when known).

    Raises:
        ValueError: ``max_regression`` is not finite, a gate lacks its comparison, or the metric was not compared.
    """
    if not math.isfinite(max_regression):
        raise ValueError(
            f"max_regression must be a finite number (negative = no regression gate), got {max_regression}"
        )
    name = min_improvement_metric.strip()
    records = dict(comparison or {})
    if (name or max_regression >= 0) and not records:
        why = unavailable or "eval_results is not wired, or its evaluation had no baseline_results"
        raise ValueError(
            f"the improvement/regression gate needs lm_eval's comparison with the base model, and there is none "
            f"({why}); evaluate the base model (the pipeline's evaluate_base_model) or unset min_improvement_metric "
            "and max_regression"
        )
    if name and name not in records:
        raise ValueError(
            f"min_improvement_metric={name!r} is not among the compared metrics ({', '.join(sorted(records))}); "
            "fix the name (e.g. heldout_generation/chrf) or leave it empty"
        )
    new_tasks = {*HELDOUT_TASKS, *([records[name]["task"]] if name else [])}
    checks, reasons, failures, regressed = [], [], [], []
    improved = True
    if name:
        gain = improvement(records[name])
        improved = gain is not None and not math.isnan(gain) and gain >= min_improvement
        shown = "unknown (no direction)" if gain is None else f"{gain:+.4g}"
        reasons.append(f"{name} improved by {shown} ({'>=' if improved else '<'} min_improvement {min_improvement:g})")
        failures += [] if improved else reasons[-1:]
    for metric, record in records.items():
        if metric == name:
            checks.append(MetricCheck(metric, record, "improvement", "ok" if improved else "FAILED"))
        elif record.get("task") in new_tasks:
            checks.append(MetricCheck(metric, record, "new task"))
        elif max_regression < 0:
            checks.append(MetricCheck(metric, record, "regression"))
        else:
            worse = regression(record, max_regression_relative)
            verdict = "not checked" if worse is None else ("FAILED" if worse > max_regression else "ok")
            if verdict == "FAILED":
                regressed.append(
                    f"{metric} worse by {worse:.1%}" if max_regression_relative else f"{metric} worse by {worse:.4g}"
                )
            checks.append(MetricCheck(metric, record, "regression", verdict))
    if max_regression >= 0:
        limit = f"{max_regression:.1%} of the base value" if max_regression_relative else f"{max_regression:g}"
        if regressed:
            reasons.append(f"regressed beyond max_regression {limit}: {', '.join(regressed)}")
            failures.append(reasons[-1])
        else:
            reasons.append(f"no other task regressed beyond max_regression {limit}")
    return GateDecision(tuple(reasons), tuple(failures), tuple(checks))


def comparison_of(eval_results: ArtifactInfo | None) -> tuple[dict, str]:
    """The lm_eval results' ``comparison`` metadata, and why there is none when known."""
    if eval_results is None:
        return {}, ""
    metadata = eval_results.metadata
    unavailable = metadata.get("baseline_skipped") or metadata.get("skipped") or ""
    return dict(metadata.get("comparison") or {}), f"the base model was not evaluated: {unavailable}" * bool(
        unavailable
    )


def evaluate_gates(
    options: GateOptions,
    eval_metrics: Mapping[str, Any],
    train_metrics: Mapping[str, Any],
    comparison: Mapping,
    unavailable: str,
) -> GateDecision:
    """Every gate of ``options``: the metric gate's line first, then the continual-learning gates'."""
    metric = evaluate_gate(options.min_metric_name, options.min_metric_value, eval_metrics, train_metrics)
    delta = evaluate_delta_gate(
        comparison,
        options.min_improvement_metric,
        options.min_improvement,
        options.max_regression,
        options.max_regression_relative,
        unavailable,
    )
    return GateDecision(metric.reasons + delta.reasons, metric.failures + delta.failures, delta.checks)
