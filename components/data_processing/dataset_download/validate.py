"""Validation of every row of a dataset, streamed, into a report (:func:`validate_dataset_uri`: the README's API)."""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from components._common.chat_errors import RowError, Unreadable, excerpt
from components._common.chat_files import ReadLimits, is_record, iter_line_blocks
from components._common.chat_format import (
    check_row,
    decode_json,
    encode_json,
    fast_valid_lines,
    normalize_row,
)
from components._common.masking import mask_url
from components._common.reward_rows import REWARD_FORMATS, check_reward_row

from .formats import CONVERTERS, detect_format
from .readers import data_format, iter_rows, position_label
from .request import SourceOptions, ValidationOptions
from .validation_report import QUOTED_REJECTS, Reject, ValidationReport

_SINK_ROWS = 4096
#: Receives valid rows in ``messages`` form, as JSON documents (UTF-8 bytes, no line break), a list at a time.
Sink = Callable[[list[bytes]], None]
Sink1 = Callable[[bytes], None]


def choose_format(files: Sequence[Path], input_format: str, source: str, limits: ReadLimits) -> tuple[str, str]:
    """The format to read the rows as, and why: ``input_format``, or the one detected from the first rows.

    Raises:
        ValueError: No readable row among the first ones, or no row looks like a known format.
    """
    if input_format != "auto":
        return input_format, "given as input_format"
    head, unreadable = [], []
    records = ((path, position, value) for path in files for position, value in iter_rows(path, limits))
    for path, position, value in itertools.islice(records, 1000):
        if type(value) is Unreadable:
            unreadable.append(f"{position_label(path, position)} [{value.rule}] {value.reason} — {value.excerpt}")
        else:
            head.append(value)
    if not head and unreadable:
        listed = "\n".join(f"  {line}" for line in unreadable[:QUOTED_REJECTS])
        raise ValueError(
            f"no readable row in the first {len(unreadable)} records of {source}; first bad ones:\n{listed}"
        )
    return detect_format(head, source)


def validate_files(
    files: Sequence[Path], report: ValidationReport, options: ValidationOptions, sink: Sink | None
) -> ValidationReport:
    """Reads, converts and checks every row of some data files, streaming, into ``report``.

    ``sink`` gets the valid rows in source order.

    Raises:
        ValueError: A file is unsupported, or (``ChatFormatError``) damaged.
    """
    checker = _Checker(report, options)
    sink = sink or (lambda rows: None)
    for path in files:
        if checker.convert is None and not checker.reward and data_format(path) == "jsonl":
            _validate_json_lines(path, checker, sink)
            continue
        rows: list[bytes] = []
        for position, value in iter_rows(path, options.limits):
            checker.check(path, position, value, rows.append)
            if len(rows) >= _SINK_ROWS:
                sink(rows)
                rows = []
        sink(rows)
    return report


def _validate_json_lines(path: Path, checker: _Checker, sink: Sink) -> None:
    """The fast path: a ``messages`` JSON-lines file, each valid line checked while parsed and passed on as is."""
    for first, lines in iter_line_blocks(path, checker.options.limits):
        passed = fast_valid_lines(lines, checker.options.allow_trailing_user)
        if all(passed):
            rows = list(map(bytes.strip, lines))
        else:
            rows = []
            for number, line, ok in zip(itertools.count(first), lines, passed):
                if ok:
                    rows.append(line.strip())
                elif is_record(line):  # decoded again to name the rule (or kept: list-of-parts contents)
                    value = line if type(line) is Unreadable else decode_json(line)
                    checker.check(path, number, value, rows.append, line)
        checker.report.rows_read += sum(passed)
        checker.report.rows_valid += sum(passed)
        sink(rows)


class _Checker:
    """Converts and checks decoded records into a report (GRPO's prompt rows by their own rules, kept as they are)."""

    def __init__(self, report: ValidationReport, options: ValidationOptions) -> None:
        self.report, self.options = report, options
        self.convert = CONVERTERS.get(report.input_format)
        self.reward = report.input_format in REWARD_FORMATS

    def check(self, path: Path, position: int, value: object, keep: Sink1, raw: object = None) -> None:
        """Counts one record as read, then as valid (``keep`` gets its JSON) or as a reject quoting ``raw``."""
        self.report.rows_read += 1
        if type(value) is Unreadable:
            self.report.add_reject(Reject(position_label(path, position), value.rule, value.reason, value.excerpt))
            return
        try:
            row = self.convert(value) if self.convert is not None and type(value) is dict else value
        except RowError as error:
            self._reject(path, position, (error.rule, error.detail), value, raw)
            return
        if self.reward:
            problem = check_reward_row(row, self.report.input_format)
        else:
            problem = check_row(row, self.options.allow_trailing_user)
        if problem is not None:
            self._reject(path, position, problem, value, raw)
            return
        self.report.rows_valid += 1
        keep(encode_json(row if self.reward else normalize_row(row)))

    def _reject(self, path: Path, position: int, problem: tuple[str, str], value: object, raw: object) -> None:
        """Adds a reject quoting the record's own text (``raw``) or, when it came from another format, its JSON."""
        if type(raw) is not bytes:
            try:
                raw = json.dumps(value, ensure_ascii=False, default=str)
            except (ValueError, RecursionError):
                raw = repr(value)[:1000]
        self.report.add_reject(Reject(position_label(path, position), *problem, excerpt(raw)))


def start_report(
    files: Sequence[Path], source_uri: str, options: ValidationOptions, revision: str = ""
) -> ValidationReport:
    """The empty report of some data files: ``source_uri`` masked, the format chosen (:func:`choose_format`)."""
    source_uri = mask_url(source_uri)
    chosen, reason = choose_format(files, options.input_format, source_uri, options.limits)
    return ValidationReport(
        source_uri=source_uri,
        revision=revision,
        input_format=chosen,
        format_reason=reason,
        files=[path.name for path in files],
        on_invalid=options.on_invalid,
        max_invalid_fraction=options.max_invalid_fraction,
    )


def validate_local_files(
    files: Sequence[Path], source_uri: str, options: ValidationOptions, revision: str = "", sink: Sink | None = None
) -> ValidationReport:
    """Validates local data files: :func:`start_report`, then :func:`validate_files`."""
    return validate_files(files, start_report(files, source_uri, options, revision), options, sink)


def validate_dataset_uri(
    source: SourceOptions, options: ValidationOptions, download_dir: str | Path | None = None
) -> ValidationReport:
    """Fetches a dataset and validates every row; never raises for bad rows (see ``report.passed``).

    ``download_dir``: where remote data lands (default: a temporary directory, removed afterwards).

    Raises:
        ValueError: An unknown scheme, missing credentials, 403/404, a size cap hit, or no data files.
    """
    from .sources import fetch_dataset

    with tempfile.TemporaryDirectory(prefix="dataset-download-") as scratch:
        fetched = fetch_dataset(source, Path(download_dir or scratch))
        return validate_local_files(fetched.files, source.dataset_uri, options, fetched.revision)
