"""What validating a dataset found: the counts, the rejects (a few quoted, all counted), the verdict and the report."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

from components._common.chat_errors import RULES
from components._common.chat_format import EXPECTED_CHAT_FORMAT

#: Values of ``on_invalid``.
ON_INVALID = ("fail", "drop")
#: How many rejects an error message quotes (the report lists them all).
QUOTED_REJECTS = 5
_KEPT_REJECTS = 50


class DatasetValidationError(ValueError):
    """Rows break the rules beyond what ``on_invalid`` / ``max_invalid_fraction`` allow (``report``: the report)."""

    def __init__(self, message: str, report: ValidationReport | None = None) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class Reject:
    """A row that breaks a rule: where it is, which rule, what exactly, and a short excerpt of it."""

    location: str
    rule: str
    detail: str
    excerpt: str

    def describe(self) -> str:
        """One line: ``train.jsonl:4 [trailing_user] messages[1] ... — excerpt``."""
        return f"{self.location} [{self.rule}] {self.detail} — {self.excerpt}"


@dataclass
class ValidationReport:
    """What validating every row found (``first_rejects``: the first ones; every one: :meth:`iter_rejects`)."""

    source_uri: str
    on_invalid: str
    max_invalid_fraction: float
    revision: str = ""
    input_format: str = ""
    format_reason: str = ""
    files: list[str] = field(default_factory=list)
    rows_read: int = 0
    rows_valid: int = 0
    rejects_by_rule: dict[str, int] = field(default_factory=dict)
    first_rejects: list[Reject] = field(default_factory=list)
    _reject_log: IO[str] | None = field(default=None, repr=False)

    @property
    def rows_rejected(self) -> int:
        """Records that break a rule."""
        return self.rows_read - self.rows_valid

    @property
    def invalid_fraction(self) -> float:
        """Rejected records over records read (0 for an empty dataset)."""
        return self.rows_rejected / self.rows_read if self.rows_read else 0.0

    @property
    def passed(self) -> bool:
        """Whether the rejects are within what ``on_invalid`` and ``max_invalid_fraction`` allow."""
        if self.on_invalid == "fail":
            return self.rows_rejected == 0
        return self.invalid_fraction <= self.max_invalid_fraction

    def add_reject(self, reject: Reject) -> None:
        """Counts a reject under its rule and spools it to a temporary file."""
        self.rejects_by_rule[reject.rule] = self.rejects_by_rule.get(reject.rule, 0) + 1
        if len(self.first_rejects) < _KEPT_REJECTS:
            self.first_rejects.append(reject)
        if self._reject_log is None:
            self._reject_log = tempfile.TemporaryFile("w+", encoding="utf-8")
        self._reject_log.write(json.dumps([reject.location, reject.rule, reject.detail, reject.excerpt]) + "\n")

    def iter_rejects(self) -> Iterator[Reject]:
        """Every reject, in the order found."""
        if self._reject_log is None:
            return
        self._reject_log.flush()
        self._reject_log.seek(0)
        for line in self._reject_log:
            yield Reject(*json.loads(line))
        self._reject_log.seek(0, 2)

    def verdict(self) -> str:
        """One line: passed or FAILED, and the rule of ``on_invalid`` / ``max_invalid_fraction`` that decided it."""
        rejected = f"{self.rows_rejected} of {self.rows_read} rows ({self.invalid_fraction:.2%})"
        if self.rows_rejected == 0:
            return "passed: every row follows the rules"
        if self.on_invalid == "fail":
            return (
                f"FAILED: {rejected} break the rules and on_invalid='fail' accepts none "
                "(on_invalid='drop' with max_invalid_fraction drops them instead)"
            )
        if self.passed:
            return (
                f"passed: {rejected} break the rules and are dropped: within max_invalid_fraction="
                f"{self.max_invalid_fraction} (on_invalid='drop')"
            )
        return (
            f"FAILED: {rejected} break the rules, more than max_invalid_fraction={self.max_invalid_fraction} "
            "(on_invalid='drop')"
        )

    def failure_message(self) -> str:
        """Why the dataset fails: a first line that stands alone (a pipeline run shows it), then the first rejects."""
        counts = ", ".join(f"{rule}={count}" for rule, count in sorted(self.rejects_by_rule.items()))
        head = f"{EXPECTED_CHAT_FORMAT}: {self.rows_rejected} of {self.rows_read} rows of {self.source_uri} break "
        head += "the rules"
        if self.on_invalid == "fail":
            head += " (on_invalid='fail')"
        else:
            head += f": fraction {self.invalid_fraction:.4f} > max_invalid_fraction={self.max_invalid_fraction}"
        first = f"; first: {self.first_rejects[0].describe()}" if self.first_rejects else ""
        quoted = "\n".join(f"  {reject.describe()}" for reject in self.first_rejects[:QUOTED_REJECTS])
        rules = "\n".join(f"  {rule}: {RULES[rule]}" for rule in sorted(self.rejects_by_rule))
        return f"{head}; per rule: {counts}{first}\nfirst rejects:\n{quoted}\nrules broken:\n{rules}"

    def raise_for_rejects(self) -> None:
        """Raises :class:`DatasetValidationError` with :meth:`failure_message` unless :attr:`passed`."""
        if not self.passed:
            raise DatasetValidationError(self.failure_message(), report=self)

    def to_markdown(self) -> str:
        """The report as Markdown: source, format, counts, counts per rule and every reject."""
        lines = [
            f"# Dataset validation: {'passed' if self.passed else 'FAILED'}",
            "",
            f"- Source: `{self.source_uri}`",
            f"- Revision: `{self.revision}`",
            f"- Files: {', '.join(f'`{name}`' for name in self.files)}",
            f"- Input format: `{self.input_format}` ({self.format_reason})",
            f"- Rows read: {self.rows_read}; valid: {self.rows_valid}; rejected: {self.rows_rejected} "
            f"({self.invalid_fraction:.2%})",
            f"- on_invalid: `{self.on_invalid}`; max_invalid_fraction: {self.max_invalid_fraction}",
            f"- Result: {self.verdict()}",
        ]
        if self.rejects_by_rule:
            lines += ["", "## Rejected rows per rule", "", "| Rule | Rows | Requirement |", "|---|---:|---|"]
            lines += [f"| `{rule}` | {n} | {RULES[rule]} |" for rule, n in sorted(self.rejects_by_rule.items())]
            lines += ["", "## Every rejected row", "", "| Where | Rule | Detail | Excerpt |", "|---|---|---|---|"]
            lines += [
                f"| {_cell(r.location)} | `{r.rule}` | {_cell(r.detail)} | {_cell(r.excerpt)} |"
                for r in self.iter_rejects()
            ]
        return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text made safe for a Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "'")
