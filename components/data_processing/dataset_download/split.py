"""Seeded, streaming subset and train/eval split with exact sizes, written as JSONL with a running sha256.

One pass where the line count is the row count, else two through a scratch file of valid rows (README, "Split").
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import operator
import os
import queue
import random
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from components._common.chat_files import ARTIFACT_READ_LIMITS, iter_line_blocks
from components._common.files import mkstemp_like_open

from .locations import DatasetSourceError, free_space
from .request import SplitOptions
from .validate import Sink
from .validation_report import ValidationReport

_WRITE_BUFFER = 1 << 20
_QUEUED_BLOCKS = 8


@dataclass(frozen=True)
class SplitPlan:
    """How many rows to keep and how many of them go to eval, with the warnings that decided it."""

    rows_available: int
    rows_selected: int
    eval_rows: int
    warnings: tuple[str, ...] = ()


def plan_split(rows_available: int, train_split_ratio: float, subset_count: int) -> SplitPlan:
    """The subset size (``subset_count``, 0 = all) and ``round(kept * (1 - ratio))`` eval rows, in [1, kept - 1]."""
    warnings = []
    selected = rows_available
    if subset_count and subset_count > rows_available:
        warnings.append(f"subset_count={subset_count} > {rows_available} valid rows: using all {rows_available}")
    elif subset_count:
        selected = subset_count
    eval_rows = 0
    if train_split_ratio < 1.0:
        if selected < 2:
            warnings.append(f"train_split_ratio={train_split_ratio} but only {selected} row: no eval split")
        else:
            eval_rows = min(max(round(selected * (1.0 - train_split_ratio)), 1), selected - 1)
    return SplitPlan(rows_available, selected, eval_rows, tuple(warnings))


class _Sampler:
    """Selection sampling (Knuth's S): row ``i`` taken with chance ``(k - taken) / (n - i)``, ``k`` of ``n`` exactly."""

    def __init__(self, k: int, n: int, seed: str) -> None:
        self._rng = random.Random(seed)
        self._left_to_take = k
        self._left_to_see = n

    def take_many(self, count: int) -> list[bool]:
        """Whether each of the next ``count`` rows is picked (one call per block of rows, not per row)."""
        take, see = self._left_to_take, self._left_to_see
        if take == 0 or take >= see:  # nothing or everything left to pick: the answer needs no random draw
            picks = [take > 0] * count
            self._left_to_take, self._left_to_see = max(0, take - count), see - count
            return picks
        draw = self._rng.random
        picks = []
        append = picks.append
        for _ in range(count):
            taken = take > 0 and draw() * see < take
            see -= 1
            take -= taken
            append(taken)
        self._left_to_take, self._left_to_see = take, see
        return picks


@dataclass(frozen=True)
class WrittenFile:
    """A JSONL file written by :class:`JsonlWriter`: its path, row count and sha256."""

    path: Path
    rows: int
    sha256: str


class OutputWriteError(OSError):
    """An output could not be written (a full disk, an I/O error); the message names the path and the free space."""


def write_error(path: Path, error: OSError) -> OutputWriteError:
    """A one-line error for a failed write of ``path``: the reason, the free space there and what to do."""
    free = free_space(path.parent)
    reason = errno.errorcode.get(error.errno or 0, "error")
    return OutputWriteError(
        error.errno,
        f"cannot write {path}: {error.strerror or error} ({reason}; {free} in {path.parent}); nothing was kept: free "
        "space or give the step a larger volume, then run it again",
    )


class JsonlWriter:
    """Writes rows to a temporary file beside ``target`` (:meth:`commit` renames it), hashing on a background thread.

    Any failure leaves no file behind and is raised as :class:`OutputWriteError`.
    """

    def __init__(self, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        self.target = target
        handle, name = mkstemp_like_open(target.parent, prefix=f".{target.name}.")
        self._temp = Path(name)
        self._file = os.fdopen(handle, "wb", buffering=_WRITE_BUFFER)
        self._digest = hashlib.sha256()
        self._blocks: queue.Queue[bytes | None] = queue.Queue(maxsize=_QUEUED_BLOCKS)
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._drain, name=f"write {target.name}", daemon=True)
        self._thread.start()
        self.rows = 0

    def _drain(self) -> None:
        while (data := self._blocks.get()) is not None:
            if self._error is None:
                try:
                    self._digest.update(data)
                    self._file.write(data)
                except OSError as error:
                    self._error = error

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise write_error(self.target, self._error) from None

    def write_rows(self, rows: list[bytes]) -> None:
        """Appends rows (JSON documents without line breaks), one line each."""
        if rows:
            self._raise_if_failed()
            self._blocks.put(b"\n".join(rows) + b"\n")
            self.rows += len(rows)

    def _finish(self) -> None:
        if self._thread.is_alive():
            self._blocks.put(None)
            self._thread.join()

    def commit(self) -> WrittenFile:
        """Flushes and closes the file and moves it to ``target``; on any failure, :meth:`discard`."""
        try:
            self._finish()
            self._raise_if_failed()
            try:
                self._file.close()
                os.replace(self._temp, self.target)
            except OSError as error:
                raise write_error(self.target, error) from None
        except BaseException:
            self.discard()
            raise
        return WrittenFile(self.target, self.rows, self._digest.hexdigest())

    def discard(self) -> None:
        """Stops writing and removes the temporary file, whatever state it is in."""
        self._error = self._error or OSError(0, "discarded")
        try:
            self._finish()
            with contextlib.suppress(OSError):  # closing flushes: on a full disk that fails again
                self._file.close()
        finally:
            self._temp.unlink(missing_ok=True)


class SplitSink:
    """Routes the valid rows in source order to train, eval or nowhere: the subset, then the eval rows among it."""

    def __init__(
        self,
        plan: SplitPlan,
        seed: int,
        train: JsonlWriter,
        eval_: JsonlWriter,
        on_selected: Callable[[bytes], None] | None = None,
    ) -> None:
        self._subset = _Sampler(plan.rows_selected, plan.rows_available, f"{seed}:subset")
        self._eval = _Sampler(plan.eval_rows, plan.rows_selected, f"{seed}:eval")
        self._train, self._eval_writer, self._on_selected = train, eval_, on_selected

    def __call__(self, rows: list[bytes]) -> None:
        """Takes the next valid rows, in source order."""
        rows = list(itertools.compress(rows, self._subset.take_many(len(rows))))
        if self._on_selected is not None:
            for row in rows:
                self._on_selected(row)
        picks = self._eval.take_many(len(rows))
        if any(picks):
            self._eval_writer.write_rows(list(itertools.compress(rows, picks)))
            rows = list(itertools.compress(rows, map(operator.not_, picks)))
        self._train.write_rows(rows)


#: Runs the validation, sending the valid rows to a sink; returns the filled-in report.
Validate = Callable[[Sink], ValidationReport]
#: Makes the callback for each kept row (token statistics), or ``None``; called once per attempt at the split.
OnSelected = Callable[[], Callable[[bytes], None] | None]


@dataclass(frozen=True)
class SplitOutcome:
    """The validation report, the plan it was split by, and the two files written."""

    report: ValidationReport
    plan: SplitPlan
    train: WrittenFile
    eval: WrittenFile


def validate_and_split(
    validate: Validate,
    split: SplitOptions,
    targets: tuple[Path, Path],
    scratch: Path,
    on_selected: OnSelected = lambda: None,
    lines: int = 0,
) -> SplitOutcome:
    """Validates every row and writes the split to ``targets`` (train, eval), in one pass where possible.

    One pass when ``lines``, the line count of JSON lines in ``messages`` form, is the number of valid rows; else two.

    Raises:
        ValueError: ``DatasetValidationError`` for rows beyond what ``on_invalid`` allows, or an empty dataset.
    """
    if lines:

        def straight(sink: SplitSink) -> ValidationReport | None:
            report = validate(sink)
            if report.rows_valid == lines:
                return report
            report.raise_for_rejects()  # rejects beyond on_invalid: no second pass
            return None  # rows dropped or blank lines: the plan counted them, split again

        plan = plan_split(lines, split.train_split_ratio, split.subset_count)
        outcome = _written(targets, plan, split, on_selected, straight)
        if outcome is not None:
            return outcome
    with tempfile.TemporaryDirectory(prefix="valid-rows-", dir=scratch) as folder:
        rows = JsonlWriter(Path(folder) / "valid.jsonl")
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

        def from_scratch(sink: SplitSink) -> ValidationReport:
            for _, block in iter_line_blocks(valid.path, ARTIFACT_READ_LIMITS):
                sink(block)
            return report

        plan = plan_split(report.rows_valid, split.train_split_ratio, split.subset_count)
        outcome = _written(targets, plan, split, on_selected, from_scratch)
    assert outcome is not None  # from_scratch never discards
    return outcome


def _written(
    targets: tuple[Path, Path],
    plan: SplitPlan,
    split: SplitOptions,
    on_selected: OnSelected,
    fill: Callable[[SplitSink], ValidationReport | None],
) -> SplitOutcome | None:
    """Lets ``fill`` route rows into the train and eval writers, and commits both (``None`` from ``fill``: neither)."""
    train, eval_ = JsonlWriter(targets[0]), JsonlWriter(targets[1])
    committed: list[WrittenFile] = []
    try:
        report = fill(SplitSink(plan, split.seed, train, eval_, on_selected()))
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
