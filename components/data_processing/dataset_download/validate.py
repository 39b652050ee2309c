"""Validation of every row of a dataset, streamed, into a report (:func:`validate_dataset_uri`: the README's API)."""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
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


def _all_rows(files: Sequence[Path], limits: ReadLimits) -> Iterator[tuple[Path, int, object]]:
    for path in files:
        for position, value in iter_rows(path, limits):
            yield path, position, value


def choose_format(files: Sequence[Path], input_format: str, source: str, limits: ReadLimits) -> tuple[str, str]:
    """The format to read the rows as, and why: ``input_format`` itself, or the one detected from the first rows.

    Raises:
        ValueError: No readable row among the first ones, or no row looks like a known format.
    """
    if input_format != "auto":
        return input_format, "given as input_format"
    head, unreadable = [], []
    for path, position, value in itertools.islice(_all_rows(files, limits), 1000):
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
    """Reads, converts and checks every row of some data files, streaming; counts them into ``report``.

    ``sink`` gets the valid rows (:data:`Sink`) in source order, list-of-parts contents joined.

    Raises:
        ValueError: A file is unsupported, or (``ChatFormatError``) a ``.gz`` is damaged.
    """
    convert = CONVERTERS.get(report.input_format)
    sink = sink or (lambda rows: None)
    allow_trailing_user, limits = options.allow_trailing_user, options.limits
    for path in files:
        if convert is None and data_format(path) == "jsonl" and report.input_format not in REWARD_FORMATS:
            _validate_json_lines(path, report, allow_trailing_user, sink, limits)
            continue
        rows: list[bytes] = []
        for position, value in iter_rows(path, limits):
            report.rows_read += 1
            _check_value(path, position, value, convert, report, allow_trailing_user, rows.append)
            if len(rows) >= _SINK_ROWS:
                sink(rows)
                rows = []
        sink(rows)
    return report


def _validate_json_lines(
    path: Path, report: ValidationReport, allow_trailing_user: bool, sink: Sink, limits: ReadLimits
) -> None:
    """The fast path: a ``messages`` JSON-lines file, each valid line checked while parsed and passed on as is."""
    for first, lines in iter_line_blocks(path, limits):
        passed = fast_valid_lines(lines, allow_trailing_user)
        if all(passed):
            rows = list(map(bytes.strip, lines))
            report.rows_read += len(rows)
            report.rows_valid += len(rows)
            sink(rows)
            continue
        rows = []
        for number, line, ok in zip(itertools.count(first), lines, passed):
            if ok:
                rows.append(line.strip())
                report.rows_read += 1
                report.rows_valid += 1
            elif is_record(line):
                report.rows_read += 1
                value = line if type(line) is Unreadable else decode_json(line)
                _check_value(path, number, value, None, report, allow_trailing_user, rows.append, line)
        sink(rows)


def _check_value(
    path: Path,
    position: int,
    value: object,
    convert: Callable[[dict], dict] | None,
    report: ValidationReport,
    allow_trailing_user: bool,
    keep: Callable[[bytes], None],
    raw: bytes | Unreadable | None = None,
) -> None:
    """Converts and checks one decoded record (already counted as read): valid (and sunk) or rejected."""
    if type(value) is Unreadable:
        report.add_reject(Reject(position_label(path, position), value.rule, value.reason, value.excerpt))
        return
    row = value
    if convert is not None and type(value) is dict:
        try:
            row = convert(value)
        except RowError as error:
            report.add_reject(_reject(path, position, error.rule, error.detail, value, raw))
            return
    if report.input_format in REWARD_FORMATS:  # GRPO's prompt rows: their own rules, kept as they are
        problem = check_reward_row(row, report.input_format)
    else:
        problem = check_row(row, allow_trailing_user)
    if problem is not None:
        report.add_reject(_reject(path, position, *problem, value, raw))
        return
    report.rows_valid += 1
    keep(encode_json(row if report.input_format in REWARD_FORMATS else normalize_row(row)))


def _reject(path: Path, position: int, rule: str, detail: str, value: object, raw: object = None) -> Reject:
    """A reject quoting the record's own text (``raw``) or, for records decoded from other formats, its JSON."""
    if type(raw) is not bytes:
        try:
            raw = json.dumps(value, ensure_ascii=False, default=str)
        except (ValueError, RecursionError):
            raw = repr(value)[:1000]
    return Reject(position_label(path, position), rule, detail, excerpt(raw))


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
    """Validates local data files: :func:`start_report`, then :func:`validate_files` (check the report's ``passed``)."""
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
