"""lm-eval results as KFP metrics and as an HTML report (a table per task, with the delta vs a baseline).

A metric is named ``<task>/<metric>`` (``<task>/<metric>/<filter>`` when lm-eval applied a filter other than
``none``, e.g. gsm8k's ``strict-match``); its standard error, where lm-eval computed one, is ``<name>_stderr``.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Generations shown per generative task in the report (when samples were logged).
REPORT_EXAMPLES = 5


@dataclass(frozen=True)
class MetricRow:
    """One metric of one task, as lm-eval reported it.

    Attributes:
        task: Task or group name.
        metric: Metric name (``acc``, ``exact_match``, ...).
        filter_name: lm-eval filter (``none`` for unfiltered).
        value: The aggregated value.
        stderr: Its standard error, or None where lm-eval gives none.
        higher_is_better: Direction of the metric, None when unknown.
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
    """Flattens lm-eval's ``results`` section into one row per task, metric and filter.

    Args:
        results: The dict returned by ``lm_eval.simple_evaluate`` (or loaded from its JSON).

    Returns:
        Rows in lm-eval's task order; entries that are not numbers (``alias``, ``N/A`` values) are left out.
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


def kfp_metrics(rows: Iterable[MetricRow]) -> dict[str, float]:
    """The values to log as KFP ``Metrics``: each metric and its ``_stderr``; non-finite values are left out.

    Args:
        rows: Rows from :func:`metric_rows`.

    Returns:
        ``{name: value}`` in row order.
    """
    metrics: dict[str, float] = {}
    for row in rows:
        if math.isfinite(row.value):
            metrics[row.name] = row.value
        if row.stderr is not None and math.isfinite(row.stderr):
            metrics[f"{row.name}_stderr"] = row.stderr
    return metrics


def load_baseline(path: Path) -> dict[str, Any]:
    """Reads a baseline lm-eval results JSON (this component's ``results`` output, or lm-eval's own file).

    Args:
        path: ``baseline_results.path``.

    Returns:
        The parsed results.

    Raises:
        ValueError: The file is missing, not JSON, or has no ``results`` object.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"baseline_results: {path} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"baseline_results {path}:{error.lineno}: not valid JSON ({error.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise ValueError(f"baseline_results {path}: expected lm-eval results JSON with a 'results' object")
    return data


def _format(value: float | None) -> str:
    """Formats a metric value for the report."""
    if value is None:
        return ""
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}" if abs(value) >= 1e4 or (value != 0 and abs(value) < 1e-3) else f"{value:.4f}"


def _verdict(delta: float, higher_is_better: bool | None) -> str:
    """Says whether a change is an improvement, given the metric's direction."""
    if delta == 0 or higher_is_better is None:
        return "same" if delta == 0 else ""
    return "better" if (delta > 0) == higher_is_better else "worse"


def _task_table(rows: Sequence[MetricRow], baseline: Mapping[str, MetricRow] | None) -> str:
    """Renders the rows of one task as an HTML table, with baseline columns when a baseline is given."""
    header = ["Metric", "Value", "± stderr", "Higher is better"]
    if baseline is not None:
        header += ["Baseline", "Δ vs baseline", ""]
    lines = ["<table>", "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for row in rows:
        label = row.metric if row.filter_name == "none" else f"{row.metric} ({row.filter_name})"
        direction = {True: "yes", False: "no", None: ""}[row.higher_is_better]
        cells = [label, _format(row.value), _format(row.stderr), direction]
        if baseline is not None:
            base = baseline.get(row.name)
            if base is None:
                cells += ["n/a", "", ""]
            else:
                delta = row.value - base.value
                cells += [_format(base.value), f"{delta:+.4g}", _verdict(delta, row.higher_is_better)]
        lines.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def _examples(samples: Sequence[Mapping[str, Any]]) -> str:
    """Renders the first generations of a generative task (prompt, reference, generation)."""
    lines = ["<table>", "<tr><th>Prompt</th><th>Reference</th><th>Generation</th></tr>"]
    for sample in samples[:REPORT_EXAMPLES]:
        arguments = sample.get("arguments") or [[""]]
        prompt = arguments[0][0] if arguments and arguments[0] else ""
        generation = (sample.get("filtered_resps") or [""])[0]
        cells = [prompt, sample.get("target", ""), generation]
        lines.append("<tr>" + "".join(f"<td><pre>{html.escape(str(c))}</pre></td>" for c in cells) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def render_report(
    results: Mapping[str, Any],
    settings: Mapping[str, Any],
    baseline: Mapping[str, Any] | None = None,
) -> str:
    """Renders the HTML report: run settings, a metrics table per task, the delta vs a baseline, sample generations.

    Args:
        results: lm-eval results (``samples`` are used for examples when present).
        settings: Run settings shown at the top (model, backend, chat template, limits, ...).
        baseline: Baseline lm-eval results to compare against, if any.

    Returns:
        A complete HTML document.
    """
    rows = metric_rows(results)
    baseline_rows = {row.name: row for row in metric_rows(baseline)} if baseline is not None else None
    parts = [
        "<!DOCTYPE html>",
        '<html><head><meta charset="utf-8"><title>LM-Eval report</title>',
        "<style>body{font-family:sans-serif}table{border-collapse:collapse;margin-bottom:1em}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
        "pre{margin:0;white-space:pre-wrap}</style></head><body>",
        "<h1>LM-Eval report</h1>",
        "<table>",
        *(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in settings.items()),
        "</table>",
    ]
    if baseline is not None:
        baseline_model = (baseline.get("config") or {}).get("model_args") or "(unknown model)"
        parts.append(f"<p>Baseline: {html.escape(str(baseline_model))}</p>")
    samples = results.get("samples") or {}
    tasks = list(dict.fromkeys(row.task for row in rows))
    if not tasks:
        parts.append("<p>No task was evaluated.</p>")
    for task in tasks:
        task_rows = [row for row in rows if row.task == task]
        count = (results.get("n-samples") or {}).get(task, {}).get("effective")
        parts.append(f"<h2>{html.escape(task)}</h2>")
        if count is not None:
            parts.append(f"<p>{int(count)} documents</p>")
        parts.append(_task_table(task_rows, baseline_rows))
        task_samples = samples.get(task) or []
        if task_samples and isinstance((task_samples[0].get("filtered_resps") or [None])[0], str):
            parts += [f"<h3>First generations of {html.escape(task)}</h3>", _examples(task_samples)]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
