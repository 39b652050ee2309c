"""Validation and split in as few passes over the data as the rules allow (the component README, "Split").

The split needs the number of valid rows before the first row is routed: JSON lines in ``messages`` form count their
lines and validate straight into the planned split (**one pass**); else, or when fewer valid rows arrive, the valid
rows go to a scratch file, which is then split (**two passes**).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from components._common.chat_files import ARTIFACT_READ_LIMITS, ReadLimits, count_lines, iter_line_blocks

from .locations import DatasetSourceError
from .readers import data_format
from .split import JsonlWriter, SplitPlan, SplitSink, WrittenFile, plan_split
from .validate import Sink
from .validation_report import ValidationReport

#: Runs the validation, sending the valid rows to a sink; returns the filled-in report.
Validate = Callable[[Sink], ValidationReport]


@dataclass(frozen=True)
class SplitOptions:
    """How the valid rows are split and where they go."""

    train_path: Path
    eval_path: Path
    train_split_ratio: float
    subset_count: int
    seed: int
    scratch_dir: Path


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
    options: SplitOptions,
    limits: ReadLimits,
    on_selected: Callable[[], Callable[[bytes], None] | None] = lambda: None,
    one_pass: bool = True,
) -> SplitOutcome:
    """Validates every row and writes the split (one pass where possible, see the module docstring).

    Args:
        files: The local data files.
        input_format: The format the rows are read as (after auto-detection).
        validate: Runs the validation into a sink.
        options: The split options and the output paths.
        limits: The size limits (for counting the lines).
        on_selected: Makes a fresh callback for every kept row (token statistics), or ``None``; called per attempt.
        one_pass: Allow the one-pass path (``False`` with token statistics: the tokenizer loads after validation).

    Raises:
        DatasetValidationError: Rows beyond what ``on_invalid`` allows; ``ValueError`` for an empty dataset.
    """
    if one_pass and input_format == "messages" and all(data_format(path) == "jsonl" for path in files):
        lines = sum(count_lines(path, limits) for path in files)
        if lines:
            outcome = _one_pass(validate, lines, options, on_selected())
            if outcome is not None:
                return outcome
    return _two_passes(validate, options, on_selected)


def _written(
    options: SplitOptions, plan: SplitPlan, fill: Callable[[JsonlWriter, JsonlWriter], ValidationReport | None]
) -> SplitOutcome | None:
    """Creates the train and eval writers, lets ``fill`` route rows into them, and commits both (``None``: neither)."""
    train, eval_ = JsonlWriter(options.train_path), JsonlWriter(options.eval_path)
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


def _one_pass(
    validate: Validate, lines: int, options: SplitOptions, on_selected: Callable[[bytes], None] | None
) -> SplitOutcome | None:
    """Validates straight into the split planned for ``lines`` valid rows; ``None`` when fewer arrived."""
    plan = plan_split(lines, options.train_split_ratio, options.subset_count)

    def fill(train: JsonlWriter, eval_: JsonlWriter) -> ValidationReport | None:
        report = validate(SplitSink(plan, options.seed, train, eval_, on_selected))
        if report.rows_valid == lines:
            return report
        report.raise_for_rejects()  # rejects beyond on_invalid: no second pass
        return None  # rows dropped or blank lines: the plan counted them, split again

    return _written(options, plan, fill)


def _two_passes(
    validate: Validate, options: SplitOptions, on_selected: Callable[[], Callable[[bytes], None] | None]
) -> SplitOutcome:
    """Validates into a scratch file of valid rows, then splits that file."""
    with tempfile.TemporaryDirectory(prefix="valid-rows-", dir=options.scratch_dir) as scratch:
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
        plan = plan_split(report.rows_valid, options.train_split_ratio, options.subset_count)
        callback = on_selected()

        def fill(train: JsonlWriter, eval_: JsonlWriter) -> ValidationReport:
            sink = SplitSink(plan, options.seed, train, eval_, callback)
            for _, block in iter_line_blocks(valid.path, ARTIFACT_READ_LIMITS):
                sink(block)
            return report

        outcome = _written(options, plan, fill)
    assert outcome is not None  # fill never discards here
    return outcome
