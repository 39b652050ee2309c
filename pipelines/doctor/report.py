"""The doctor's findings: one :class:`Check` per line, ``OK | WARN | FAIL  <what>  — <remedy>``, and the exit code."""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

OK, WARN, FAIL = "OK", "WARN", "FAIL"


@dataclasses.dataclass(frozen=True)
class Check:
    """One finding: ``WARN``: the run may still work, or doctor could not tell; ``FAIL``: the run will fail.

    ``area`` is the kind of check (``storage``, ``gpus``...); ``what`` names the object checked and what was found.
    """

    status: str
    area: str
    what: str
    remedy: str = ""

    def line(self) -> str:
        """``STATUS  what  — remedy`` (the status padded so that the lines align)."""
        return f"{self.status:<4}  {self.what}" + (f"  — {self.remedy}" if self.remedy else "")


#: ``ok(area, what, remedy="")``, ``warn(...)``, ``fail(...)``: a finding of that status.
ok, warn, fail = (functools.partial(Check, status) for status in (OK, WARN, FAIL))


@dataclasses.dataclass(frozen=True)
class Report:
    """All findings of one doctor run (in check order), and what they were about (pipeline, namespaces, identity)."""

    checks: tuple[Check, ...]
    context: dict[str, Any]

    @property
    def exit_code(self) -> int:
        """0 when nothing failed, 1 otherwise."""
        return int(any(check.status == FAIL for check in self.checks))

    def counts(self) -> dict[str, int]:
        """How many checks have each status."""
        return {status: sum(check.status == status for check in self.checks) for status in (OK, WARN, FAIL)}

    def text(self) -> str:
        """The report for a terminal: a header, one line per check, a summary line."""
        header = ", ".join(f"{key} {value}" for key, value in self.context.items() if value)
        counts = self.counts()
        verdict = "fix the FAIL lines before starting a run" if self.exit_code else "ready to run"
        summary = f"{counts[FAIL]} FAIL, {counts[WARN]} WARN, {counts[OK]} OK: {verdict}"
        return "\n".join([f"kfp-finetune doctor: {header}", *(check.line() for check in self.checks), summary])

    def to_json(self) -> str:
        """The report for scripts: ``{"ok", "exit_code", "context", "counts", "checks": [...]}``."""
        checks = [dataclasses.asdict(check) for check in self.checks]
        body = {"ok": not self.exit_code, "exit_code": self.exit_code, "context": self.context, "counts": self.counts()}
        return json.dumps({**body, "checks": checks}, indent=1)
