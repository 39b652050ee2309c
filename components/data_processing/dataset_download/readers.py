"""Streaming readers: one decoded row at a time from ``.jsonl``, ``.json``, ``.parquet`` and ``.csv`` files.

Every reader yields ``(position, value)`` pairs in file order. ``position`` is a 1-based line number for JSON lines
and CSV, a 0-based row index for JSON arrays and Parquet (see :func:`position_label`). A record that cannot be
decoded is yielded as an :class:`Unreadable` value naming its rule (``invalid_json``, ``invalid_utf8``,
``nesting_too_deep``), so that the caller counts it and goes on. ``.gz`` files are read through ``gzip``
(``.jsonl.gz``, ``.json.gz``, ``.csv.gz``); a damaged one raises ``ChatFormatError``
(``bad_compression``). A UTF-8 byte order mark is accepted. Memory stays bounded by the largest single record
(Parquet: one batch of rows). The decoding and the rules live in :mod:`components._common.chat_format`.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import IO

from components._common.chat_format import (
    COMPRESSION_ERRORS,
    UTF8_BOM,
    ChatFormatError,
    Unreadable,
    bad_compression,
    decode_json,
    excerpt,
    iter_lines,
    open_binary,
)

__all__ = ["DATA_FORMATS", "Unreadable", "data_format", "excerpt", "iter_rows", "position_label"]

#: File formats that can be read, by the suffix that names them.
DATA_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
#: CSV columns whose cells are decoded as JSON when they hold a JSON list or object.
CSV_JSON_COLUMNS = frozenset({"messages", "conversations", "prompt", "completion"})
_CHUNK_CHARS = 1 << 20
_MAX_RECORD_CHARS = 64 << 20
_EXCERPT_CHARS = 120


def data_format(path: PurePath) -> str | None:
    """The format of a data file by its suffixes (``train.jsonl.gz`` → ``jsonl``), or ``None`` if unsupported."""
    suffixes = [suffix.lower() for suffix in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
        if suffixes and suffixes[-1] == ".parquet":
            return None
    return DATA_FORMATS.get(suffixes[-1]) if suffixes else None


def position_label(path: Path, position: int) -> str:
    """Where a row is, for humans: ``file.jsonl:12`` (line) or ``file.parquet row 11`` (0-based row index)."""
    if data_format(path) in ("jsonl", "csv"):
        return f"{path.name}:{position}"
    return f"{path.name} row {position}"


def _iter_json_lines(path: Path) -> Iterator[tuple[int, object]]:
    for line_number, line in iter_lines(path):
        yield line_number, decode_json(line)


def _iter_json_array(text: IO[str]) -> Iterator[tuple[int, object]]:
    """Decodes the elements of a top-level JSON array one by one with ``raw_decode`` on a sliding buffer."""
    decoder = json.JSONDecoder()
    buffer, position = text.read(_CHUNK_CHARS), 0

    def next_char() -> str:
        """Skips whitespace (reading more as needed); returns the next character, or "" at the end of the file."""
        nonlocal buffer, position
        while True:
            while position < len(buffer) and buffer[position].isspace():
                position += 1
            if position < len(buffer):
                return buffer[position]
            buffer, position = text.read(_CHUNK_CHARS), 0
            if not buffer:
                return ""

    if next_char() != "[":
        yield 0, Unreadable("invalid_json", "invalid JSON: a .json file must hold an array of rows or JSON lines", "")
        return
    position += 1
    if next_char() == "]":
        return
    index = 0
    while True:
        next_char()
        while True:
            try:
                value, position = decoder.raw_decode(buffer, position)
                break
            except RecursionError:
                yield (
                    index,
                    Unreadable("nesting_too_deep", "JSON nested too deep to decode", excerpt(buffer[position:])),
                )
                return
            except json.JSONDecodeError as error:
                more = text.read(_CHUNK_CHARS)
                if not more or len(buffer) - position > _MAX_RECORD_CHARS:
                    yield index, Unreadable("invalid_json", f"invalid JSON: {error.msg}", excerpt(buffer[position:]))
                    return
                buffer, position = buffer[position:] + more, 0
        yield index, value
        index += 1
        separator = next_char()
        if separator == "]":
            return
        if separator != ",":
            found = excerpt(buffer[position : position + _EXCERPT_CHARS]) or "the end of the file"
            yield index, Unreadable("invalid_json", "invalid JSON array: expected ',' or ']' after an element", found)
            return
        position += 1


def _text_rows(path: Path, rows: Iterator[tuple[int, object]]) -> Iterator[tuple[int, object]]:
    """``rows`` read from a text stream, with a damaged ``.gz`` or invalid UTF-8 turned into a message naming the rule.

    Invalid UTF-8 in a JSON array or a CSV file is yielded as one :class:`Unreadable` record and ends the file (the
    decoder cannot resynchronize on records there, unlike JSON lines).
    """
    position = 0
    try:
        for position, value in rows:
            yield position, value
    except COMPRESSION_ERRORS as error:
        raise bad_compression(path, position, error) from None
    except UnicodeDecodeError as error:
        reason = f"not valid UTF-8 after record {position} (byte {error.start} of a read chunk: {error.reason})"
        yield position + 1, Unreadable("invalid_utf8", reason, excerpt(error.object[error.start : error.start + 40]))


def _iter_json(path: Path) -> Iterator[tuple[int, object]]:
    """A ``.json`` file: a top-level array of rows, or JSON lines (as ``datasets`` also accepts)."""
    try:
        with open_binary(path) as handle:
            head = handle.read(4096)
    except COMPRESSION_ERRORS as error:
        raise bad_compression(path, 0, error) from None
    if head.removeprefix(UTF8_BOM).lstrip().startswith(b"["):
        with io.TextIOWrapper(open_binary(path), encoding="utf-8-sig") as text:
            yield from _text_rows(path, _iter_json_array(text))
    else:
        yield from _iter_json_lines(path)


def _decode_csv_cell(column: str, cell: str) -> object:
    if column in CSV_JSON_COLUMNS and cell[:1] in ("[", "{"):
        value = decode_json(cell)
        return cell if type(value) is Unreadable else value
    return cell


def _csv_records(text: IO[str]) -> Iterator[tuple[int, object]]:
    reader = csv.DictReader(text)
    for row in reader:
        yield reader.line_num, {column: _decode_csv_cell(column, cell) for column, cell in row.items()}


def _iter_csv(path: Path) -> Iterator[tuple[int, object]]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with io.TextIOWrapper(open_binary(path), encoding="utf-8-sig", newline="") as text:
        yield from _text_rows(path, _csv_records(text))


def _iter_parquet(path: Path) -> Iterator[tuple[int, object]]:
    import pyarrow
    import pyarrow.parquet as pq

    index = 0
    try:
        with pq.ParquetFile(path) as parquet:
            for batch in parquet.iter_batches(batch_size=512):
                for row in batch.to_pylist():
                    yield index, row
                    index += 1
    except (pyarrow.ArrowException, OSError) as error:
        where = f"after row {index - 1}" if index else "at its start"
        raise ChatFormatError(
            path.name, "bad_parquet", f"unreadable {where} ({type(error).__name__}: {str(error)[:200]}); re-create it"
        ) from None


def iter_rows(path: Path) -> Iterator[tuple[int, object]]:
    """Yields ``(position, row)`` for every record of a data file, streaming.

    Args:
        path: A file whose format :func:`data_format` knows.

    Returns:
        An iterator of positions (see :func:`position_label`) and decoded rows or :class:`Unreadable` markers.

    Raises:
        ValueError: The file's suffix is not a supported data format; ``ChatFormatError`` (a ``ValueError``) for a
            damaged ``.gz`` file (rule ``bad_compression``).
    """
    kind = data_format(path)
    if kind == "jsonl":
        yield from _iter_json_lines(path)
    elif kind == "json":
        yield from _iter_json(path)
    elif kind == "csv":
        yield from _iter_csv(path)
    elif kind == "parquet":
        yield from _iter_parquet(path)
    else:
        raise ValueError(
            f"unsupported data file {path.name!r}: the suffix must be one of "
            f"{', '.join(sorted(DATA_FORMATS))} (optionally + .gz, not for .parquet)"
        )
