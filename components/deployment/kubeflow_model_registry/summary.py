"""The Markdown summary of what the step did, written atomically."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: Sequence[tuple[str, Any]], header: tuple[str, str] = ("", "")) -> str:
    """A two-column Markdown table (pipes and newlines in values escaped)."""
    lines = [f"| {header[0]} | {header[1]} |", "|---|---|"]
    lines += [f"| {_cell(k)} | {_cell(v)} |" for k, v in rows]
    return "\n".join(lines)


def render_summary(
    status: str,
    reason: str,
    details: Sequence[tuple[str, Any]] = (),
    lineage: Mapping[str, Any] | None = None,
    link: str = "",
) -> str:
    """The summary document.

    Args:
        status: ``registered``, ``already_registered`` or ``skipped``.
        reason: One line saying why / what happened.
        details: Key facts (model, version, ids, URI, API version...).
        lineage: The custom properties recorded on the version.
        link: REST URL of the registered version ("" = none).

    Returns:
        Markdown text.
    """
    parts = ["# Model Registry", "", f"**Status:** `{status}` — {reason}", ""]
    if details:
        parts += [markdown_table(details, ("Field", "Value")), ""]
    if link:
        parts += [f"Registered version: <{link}>", ""]
    if lineage:
        parts += [
            "## Lineage (version custom properties)",
            "",
            markdown_table(sorted(lineage.items()), ("key", "value")),
        ]
        parts.append("")
    return "\n".join(parts)
