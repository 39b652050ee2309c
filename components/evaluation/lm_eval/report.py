"""lm-eval results as KFP metrics and as an HTML report (a table per task, with the delta vs a baseline)."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .comparison import Comparison, MetricRow, baseline_comparison, format_delta, is_fraction, metric_rows, qualifier

#: Generations shown per generative task in the report (when samples were logged).
REPORT_EXAMPLES = 5


def kfp_metrics(rows: Iterable[MetricRow]) -> dict[str, float]:
    """The values to log as KFP ``Metrics``, in row order: each metric and its ``_stderr``; non-finite ones left out."""
    metrics: dict[str, float] = {}
    for row in rows:
        if math.isfinite(row.value):
            metrics[row.name] = row.value
        if row.stderr is not None and math.isfinite(row.stderr):
            metrics[f"{row.name}_stderr"] = row.stderr
    return metrics


def load_baseline(path: Path) -> dict[str, Any]:
    """Reads a baseline results JSON (this component's, or lm-eval's own); ``ValueError`` naming what is wrong."""
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


def _stderr_of_delta(item: Comparison) -> str:
    """The standard error of Δ in Δ's own unit (percentage points for a 0-1 metric, as :func:`format_delta`)."""
    if item.stderr is None or not math.isfinite(item.stderr):
        return _format(item.stderr)
    return f"{item.stderr * 100:.1f} pts" if is_fraction(item) else _format(item.stderr)


def model_name(model_args: Any) -> str:
    """The model an lm-eval run evaluated, from its ``config.model_args`` (a dict or ``key=value,...`` text)."""
    if isinstance(model_args, str):
        pairs = dict(part.split("=", 1) for part in model_args.split(",") if "=" in part)
        model_args = pairs or model_args
    if isinstance(model_args, Mapping):
        name = str(model_args.get("pretrained") or model_args.get("model") or "")
        if model_args.get("peft"):
            name = f"{model_args['peft']} (PEFT adapter on {name or 'its base'})"
        if name:
            return name
    return str(model_args) if model_args else "(unknown model)"


def _html_table(header: Sequence[str], rows: Iterable[Sequence[Any]], cell: str = "{}") -> str:
    """An HTML table, every value escaped (``cell``: the format of a data cell's content)."""
    lines = ["<table>", "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for cells in rows:
        lines.append("<tr>" + "".join(f"<td>{cell.format(html.escape(str(c)))}</td>" for c in cells) + "</tr>")
    return "\n".join([*lines, "</table>"])


def _task_table(rows: Sequence[MetricRow], comparisons: Mapping[str, Comparison] | None) -> str:
    """Renders the rows of one task as an HTML table, with base-model columns when a baseline is given."""
    header = ["Metric", "Value", "± stderr", "Higher is better"]
    if comparisons is not None:
        header += ["Base model", "Δ vs base", "± stderr of Δ", "Change"]
    table = []
    for row in rows:
        label = row.metric if row.filter_name == "none" else f"{row.metric} ({row.filter_name})"
        direction = {True: "yes", False: "no", None: ""}[row.higher_is_better]
        cells = [label, _format(row.value), _format(row.stderr), direction]
        if comparisons is not None:
            item = comparisons.get(row.name)
            if item is None:
                cells += ["n/a", "", "", ""]
            else:
                cells += [_format(item.base.value), format_delta(item), _stderr_of_delta(item), qualifier(item)]
        table.append(cells)
    return _html_table(header, table)


def _examples(samples: Sequence[Mapping[str, Any]]) -> str:
    """Renders the first generations of a generative task (prompt, reference, generation)."""
    rows = []
    for sample in samples[:REPORT_EXAMPLES]:
        arguments = sample.get("arguments") or [[""]]
        prompt = arguments[0][0] if arguments and arguments[0] else ""
        rows.append([prompt, sample.get("target", ""), (sample.get("filtered_resps") or [""])[0]])
    return _html_table(["Prompt", "Reference", "Generation"], rows, "<pre>{}</pre>")


def _comparison_section(
    rows: Sequence[MetricRow], baseline: Mapping[str, Any] | None, tasks: Sequence[str]
) -> tuple[list[str], dict[str, Comparison] | None]:
    """The verdict paragraphs at the top of the report, and the comparisons by metric name (None: no baseline)."""
    if baseline is None:
        return [], None
    skipped, comparisons, line = baseline_comparison(rows, baseline, tasks)
    if skipped:
        return [f"<p><strong>Base model not evaluated:</strong> {html.escape(skipped)}</p>"], None
    base_model = model_name((baseline.get("config") or {}).get("model_args"))
    return [
        f'<p class="verdict"><strong>Base → fine-tuned:</strong> {html.escape(line)}</p>',
        f"<p>Base model: {html.escape(str(base_model))}. A change is <em>within noise</em> when |Δ| is at most "
        "the standard error of Δ, sqrt(stderr_base² + stderr_tuned²).</p>",
    ], {item.tuned.name: item for item in comparisons}


def render_report(
    results: Mapping[str, Any],
    settings: Mapping[str, Any],
    baseline: Mapping[str, Any] | None = None,
    tasks: Sequence[str] = (),
) -> str:
    """The HTML report: the verdict against the ``baseline``, the run ``settings``, a table per task, generations."""
    rows = metric_rows(results)
    verdict_parts, comparisons = _comparison_section(rows, baseline, tasks)
    parts = [
        "<!DOCTYPE html>",
        '<html><head><meta charset="utf-8"><title>LM-Eval report</title>',
        "<style>body{font-family:sans-serif}table{border-collapse:collapse;margin-bottom:1em}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
        "pre{margin:0;white-space:pre-wrap}.verdict{font-size:1.2em}</style></head><body>",
        "<h1>LM-Eval report</h1>",
        *verdict_parts,
        "<table>",
        *(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in settings.items()),
        "</table>",
    ]
    samples = results.get("samples") or {}
    task_order = list(dict.fromkeys(row.task for row in rows))
    if not task_order:
        parts.append("<p>No task was evaluated.</p>")
    for task in task_order:
        task_rows = [row for row in rows if row.task == task]
        count = (results.get("n-samples") or {}).get(task, {}).get("effective")
        parts.append(f"<h2>{html.escape(task)}</h2>")
        if count is not None:
            parts.append(f"<p>{int(count)} documents</p>")
        parts.append(_task_table(task_rows, comparisons))
        task_samples = samples.get(task) or []
        if task_samples and isinstance((task_samples[0].get("filtered_resps") or [None])[0], str):
            parts += [f"<h3>First generations of {html.escape(task)}</h3>", _examples(task_samples)]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
