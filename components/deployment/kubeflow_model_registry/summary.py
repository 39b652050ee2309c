"""The Markdown summary of what the step did, written atomically."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def markdown_table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """A Markdown table (pipes and newlines in cells escaped)."""
    lines = ["| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in row) + " |" for row in rows]
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *lines])


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value or "")


def comparison_table(checks: Sequence[Any]) -> str:
    """The base → fine-tuned comparison as a Markdown table (one row per :class:`~.gates.MetricCheck`)."""
    header = ["metric", "base", "fine-tuned", "Δ", "± stderr of Δ", "beyond noise", "gate"]
    rows = []
    for check in checks:
        record = check.record
        delta = record.get("delta")
        rows.append(
            [
                check.name,
                _number(record.get("base")),
                _number(record.get("tuned")),
                f"{delta:+.4g}" if isinstance(delta, (int, float)) else str(delta),
                _number(record.get("stderr")),
                {True: "yes", False: "no (within noise)", None: "unknown"}[record.get("beyond_noise")],
                f"{check.role}: {check.verdict}" if check.verdict else check.role,
            ]
        )
    return markdown_table(rows, header)


def render_summary(
    status: str,
    reason: str,
    details: Sequence[tuple[str, Any]] = (),
    lineage: Mapping[str, Any] | None = None,
    link: str = "",
    checks: Sequence[Any] = (),
) -> str:
    """The summary (Markdown): status and why, facts, the version's link, the comparison (``checks``), the lineage."""
    parts = ["# Model Registry", "", f"**Status:** `{status}` — {reason}", ""]
    if details:
        parts += [markdown_table(details, ("Field", "Value")), ""]
    if link:
        parts += [f"Registered version: <{link}>", ""]
    if checks:
        parts += ["## Base model → fine-tuned", "", comparison_table(checks), ""]
    if lineage:
        parts += [
            "## Lineage (version custom properties)",
            "",
            markdown_table(sorted(lineage.items()), ("key", "value")),
        ]
        parts.append("")
    return "\n".join(parts)


def serving_rows(modelcar: Any, deployment: Any, not_deployed: str) -> list[tuple[str, str]]:
    """Summary rows: the modelcar (a ``PublishedModelcar``), then the served endpoint (or why it was not deployed)."""
    rows = []
    if modelcar is not None:
        rows.append(("Modelcar", f"{modelcar.uri} (pushed as {modelcar.tag_uri})"))
    if modelcar is not None and modelcar.base_model:
        rows.append(("Modelcar base model", f"{modelcar.base_model} (LoRA adapter published without merging)"))
    if deployment is not None:
        rows.append(("InferenceService", f"{deployment.service} ({deployment.action}, uid {deployment.uid})"))
        rows.append(("Endpoint", deployment.url))
        rows.append(("Smoke completion", repr(deployment.smoke_answer)))
    elif not_deployed:
        rows.append(("Deployment", not_deployed))
    return rows
