"""The continual-learning gate on ``lm_eval``'s ``comparison`` metadata (README: *Overview*; the parameters).

Improvement and regression follow each metric's direction (``higher_is_better``): a lower perplexity improves.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

#: ``lm_eval``'s tasks built from the held-out split: they measure the new task, never a regression.
HELDOUT_TASKS = ("heldout_generation", "heldout_perplexity")


@dataclasses.dataclass(frozen=True)
class MetricCheck:
    """One compared metric and what the gate made of it.

    Attributes:
        name: ``<task>/<metric>``.
        record: Its comparison record (``base``, ``tuned``, ``delta``, ``stderr``, ``beyond_noise``, ...).
        role: ``improvement`` (the new task's metric), ``regression`` (another task's), or ``new task`` (held-out
            metrics the gate does not check).
        verdict: ``ok``, ``FAILED``, ``not checked`` or "" (no gate asked for this metric).
    """

    name: str
    record: Mapping[str, Any]
    role: str
    verdict: str = ""


@dataclasses.dataclass(frozen=True)
class DeltaGateDecision:
    """Whether the comparison with the base model lets the model be registered.

    Attributes:
        reasons: One line per gate (empty when none is set).
        failures: The lines of :attr:`reasons` whose gate failed.
        checks: Every compared metric with its role and verdict (for the summary).
    """

    reasons: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()
    checks: tuple[MetricCheck, ...] = ()

    @property
    def passed(self) -> bool:
        """True when no gate is set or every gate passed."""
        return not self.failures


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
) -> DeltaGateDecision:
    """Decides the continual-learning gate on ``comparison`` (``unavailable``: why there is none, when known).

    Raises:
        ValueError: ``max_regression`` is NaN or infinite, a gate is set but there is no comparison, or
            ``min_improvement_metric`` was not compared (the message lists the metrics that were): a misconfigured
            gate must neither block nor pass silently.
    """
    if not math.isfinite(max_regression):
        raise ValueError(
            f"max_regression must be a finite number (negative = no regression gate), got {max_regression}"
        )
    name = min_improvement_metric.strip()
    gated = bool(name) or max_regression >= 0
    records = dict(comparison or {})
    if gated and not records:
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
    checks, reasons, failures = [], [], []
    improved = True
    if name:
        gain = improvement(records[name])
        improved = gain is not None and not math.isnan(gain) and gain >= min_improvement
        shown = "unknown (no direction)" if gain is None else f"{gain:+.4g}"
        reasons.append(f"{name} improved by {shown} ({'>=' if improved else '<'} min_improvement {min_improvement:g})")
        failures += [] if improved else reasons[-1:]
    regressed = []
    for metric, record in records.items():
        if metric == name:
            checks.append(MetricCheck(metric, record, "improvement", "ok" if improved else "FAILED"))
            continue
        if record.get("task") in new_tasks:
            checks.append(MetricCheck(metric, record, "new task"))
            continue
        if max_regression < 0:
            checks.append(MetricCheck(metric, record, "regression"))
            continue
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
    return DeltaGateDecision(tuple(reasons), tuple(failures), tuple(checks))


def comparison_properties(comparison: Mapping[str, Mapping[str, Any]] | None) -> dict[str, float]:
    """``{"<task>/<metric>/base": ..., "<task>/<metric>/delta": ...}`` of the finite values (recorded as ``eval.*``)."""
    values: dict[str, float] = {}
    for name, record in (comparison or {}).items():
        for key in ("base", "delta"):
            number = _number(record, key)
            if math.isfinite(number):
                values[f"{name}/{key}"] = number
    return values
