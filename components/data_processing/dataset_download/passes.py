"""Validation and split in as few passes over the data as the rules allow (the component README, "Split").

JSON lines in ``messages`` form count their lines and validate straight into the planned split (one pass); else, or
when fewer valid rows arrive, the valid rows go to a scratch file, which is then split (two passes).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from components._common.chat_files import ARTIFACT_READ_LIMITS, ReadLimits, count_lines, iter_line_blocks

from .locations import DatasetSourceError
from .readers import data_format
from .request import SplitOptions
from .split import JsonlWriter, SplitPlan, SplitSink, WrittenFile, plan_split
from .validate import Sink
from .validation_report import ValidationReport

#: Runs the validation, sending the valid rows to a sink; returns the filled-in report.
Validate = Callable[[Sink], ValidationReport]
#: Makes a fresh callback for each kept row (token statistics), or ``None``; called once per attempt at the split.
OnSelected = Callable[[], Callable[[bytes], None] | None]
#: Routes rows into the train and eval writers; ``None`` throws both away.
Fill = Callable[[JsonlWriter, JsonlWriter], ValidationReport | None]


@dataclass(frozen=True)
class Targets:
    """Where the split goes: the train and eval files, and a scratch folder for the valid rows of two passes."""

    train: Path
    eval: Path
    scratch: Path


@dataclass(frozen=True)
class SplitOutcome:
    """The validation report, the plan it was split by, and the two files written."""

    report: ValidationReport
    plan: SplitPlan
    train: WrittenFile
    eval: WrittenFile


def validate_and_split(
    files: list[Path],
    input_format: str,
    validate: Validate,
    split: SplitOptions,
    targets: Targets,
    limits: ReadLimits,
    on_selected: OnSelected = lambda: None,
    one_pass: bool = True,
) -> SplitOutcome:
    """Validates every row and writes the split, in one pass where possible (``one_pass=False``: never).

    Raises:
        DatasetValidationError: Rows beyond what ``on_invalid`` allows; ``ValueError`` for an empty dataset.
    """
    if one_pass and input_format == "messages" and all(data_format(path) == "jsonl" for path in files):
        lines = sum(count_lines(path, limits) for path in files)
        plan = plan_split(lines, split.train_split_ratio, split.subset_count)
        callback = on_selected()

        def straight(train: JsonlWriter, eval_: JsonlWriter) -> ValidationReport | None:
            report = validate(SplitSink(plan, split.seed, train, eval_, callback))
            if report.rows_valid == lines:
                return report
            report.raise_for_rejects()  # rejects beyond on_invalid: no second pass
            return None  # rows dropped or blank lines: the plan counted them, split again

        outcome = _written(targets, plan, straight) if lines else None
        if outcome is not None:
            return outcome
    return _two_passes(validate, split, targets, on_selected)


def _written(targets: Targets, plan: SplitPlan, fill: Fill) -> SplitOutcome | None:
    """Creates the train and eval writers, lets ``fill`` route rows into them, and commits both (``None``: neither)."""
    train, eval_ = JsonlWriter(targets.train), JsonlWriter(targets.eval)
    committed: list[WrittenFile] = []
    try:
        report = fill(train, eval_)
        if report is None:
            train.discard()
            eval_.discard()
            return None
        committed.append(train.commit())
        committed.append(eval_.commit())
        return SplitOutcome(report, plan, *committed)
    except BaseException:
        train.discard()
        eval_.discard()
        for written in committed:  # the train file is useless without its eval file
            written.path.unlink(missing_ok=True)
        raise


def _two_passes(validate: Validate, split: SplitOptions, targets: Targets, on_selected: OnSelected) -> SplitOutcome:
    """Validates into a scratch file of valid rows, then splits that file."""
    with tempfile.TemporaryDirectory(prefix="valid-rows-", dir=targets.scratch) as scratch:
        rows = JsonlWriter(Path(scratch) / "valid.jsonl")
        try:
            report = validate(rows.write_rows)
        except BaseException:
            rows.discard()
            raise
        valid = rows.commit()
        report.raise_for_rejects()
        if report.rows_valid == 0:
            raise DatasetSourceError(
                f"dataset_uri={report.source_uri!r}: empty dataset (no valid rows in {report.files})"
            )
        plan = plan_split(report.rows_valid, split.train_split_ratio, split.subset_count)
        callback = on_selected()

        def from_scratch(train: JsonlWriter, eval_: JsonlWriter) -> ValidationReport:
            sink = SplitSink(plan, split.seed, train, eval_, callback)
            for _, block in iter_line_blocks(valid.path, ARTIFACT_READ_LIMITS):
                sink(block)
            return report

        outcome = _written(targets, plan, from_scratch)
    assert outcome is not None  # from_scratch never discards
    return outcome
