"""lm-eval's results as rows: one per task, metric and filter, with the metric's KFP name and standard error."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MetricRow:
    """One metric of one task (or group) and lm-eval filter (``none``: unfiltered), as lm-eval reported it.

    ``stderr`` and ``higher_is_better`` are None where lm-eval gives none.
    """

    task: str
    metric: str
    filter_name: str
    value: float
    stderr: float | None
    higher_is_better: bool | None

    @property
    def name(self) -> str:
        """The metric's KFP name, :func:`metric_name`."""
        return metric_name(self.task, self.metric, self.filter_name)


def metric_name(task: str, metric: str, filter_name: str = "none") -> str:
    """The KFP metric name of a task's metric: ``<task>/<metric>``, plus ``/<filter>`` for filtered metrics."""
    return f"{task}/{metric}" if filter_name in ("", "none") else f"{task}/{metric}/{filter_name}"


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a real number (not a bool, not "N/A"), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def metric_rows(results: Mapping[str, Any]) -> list[MetricRow]:
    """Flattens the ``results`` section of lm-eval's results into one row per task, metric and filter.

    Rows come in lm-eval's task order; entries that are not numbers (``alias``, ``N/A`` values) are left out.
    """
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
