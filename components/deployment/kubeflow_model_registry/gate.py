"""The optional quality gate: register only when a metric meets a threshold."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class GateDecision:
    """Whether the model may be registered.

    Attributes:
        passed: True when there is no gate or the metric meets it.
        reason: One line saying why (for logs and the summary).
        metric_value: The metric's value (``None`` without a gate).
    """

    passed: bool
    reason: str
    metric_value: float | None = None


def _as_number(value: Any, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"min_metric_name: {where} is {value!r}, not a number") from None
    if math.isnan(number):
        raise ValueError(f"min_metric_name: {where} is NaN; the gate cannot compare it")
    return number


def evaluate_gate(
    min_metric_name: str,
    min_metric_value: float,
    eval_metrics: Mapping[str, Any],
    train_metrics: Mapping[str, Any],
) -> GateDecision:
    """Checks ``metric >= min_metric_value``, looking the metric up in the eval metrics first, then training metrics.

    No gate when ``min_metric_name`` is empty.

    Raises:
        ValueError: The metric is in neither set (a typo must not silently block or pass), or is not a number.
    """
    name = min_metric_name.strip()
    if not name:
        return GateDecision(True, "no metric gate (min_metric_name is empty)")
    for label, metrics in (("eval_metrics", eval_metrics), ("train_metrics", train_metrics)):
        if name in metrics:
            value = _as_number(metrics[name], f"{label}[{name!r}]")
            verdict = ">=" if value >= min_metric_value else "<"
            reason = f"{label} {name} = {value:g} {verdict} min_metric_value {min_metric_value:g}"
            return GateDecision(value >= min_metric_value, reason, value)
    available = sorted({*eval_metrics, *train_metrics}) or "none: wire eval_metrics or train_metrics"
    raise ValueError(
        f"min_metric_name={name!r} is not among the metrics given to the step ({available}); fix the name or leave "
        "it empty to register without a gate"
    )
