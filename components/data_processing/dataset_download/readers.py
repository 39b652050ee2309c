"""Streaming readers: one decoded row at a time from ``.jsonl``, ``.json``, ``.parquet`` and ``.csv`` files.

Every reader yields ``(position, value)`` pairs in file order. ``position`` is a 1-based line number for JSON lines
and CSV, a 0-based row index for JSON arrays and Parquet (see :func:`position_label`). A record that cannot be
decoded is yielded as an :class:`Unreadable` value, so that the caller counts it under the ``invalid_json`` rule and
goes on. ``.gz`` files are read through ``gzip`` (``.jsonl.gz``, ``.json.gz``, ``.csv.gz``). Memory stays bounded by
the largest single record (Parquet: one batch of rows).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import IO

#: File formats that can be read, by the suffix that names them.
DATA_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
#: CSV columns whose cells are decoded as JSON when they hold a JSON list or object.
CSV_JSON_COLUMNS = frozenset({"messages", "conversations", "prompt", "completion"})
_CHUNK_CHARS = 1 << 20
_MAX_RECORD_CHARS = 64 << 20
_EXCERPT_CHARS = 120


class Unreadable:
    """A record that could not be decoded: why, and a short excerpt of its text."""

    __slots__ = ("reason", "excerpt")

    def __init__(self, reason: str, excerpt: str) -> None:
        self.reason = reason
        self.excerpt = excerpt


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


def excerpt(text: str | bytes) -> str:
    """A short, single-line excerpt of a record for error messages and reports."""
    if isinstance(text, bytes):
        text = text[: _EXCERPT_CHARS * 4].decode("utf-8", errors="replace")
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT_CHARS else text[: _EXCERPT_CHARS - 1] + "…"


def _open_binary(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.suffix.lower() == ".gz" else open(path, "rb")


def _iter_json_lines(handle: IO[bytes]) -> Iterator[tuple[int, object]]:
    loads = json.loads
    for line_number, line in enumerate(handle, start=1):
        try:
            yield line_number, loads(line)
        except ValueError as error:
            if line.strip():
                yield line_number, Unreadable(f"invalid JSON: {error}", excerpt(line))


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
        yield 0, Unreadable("invalid JSON: a .json file must hold an array of rows or JSON lines", "")
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
            except json.JSONDecodeError as error:
                more = text.read(_CHUNK_CHARS)
                if not more or len(buffer) - position > _MAX_RECORD_CHARS:
                    yield index, Unreadable(f"invalid JSON: {error.msg}", excerpt(buffer[position:]))
                    return
                buffer, position = buffer[position:] + more, 0
        yield index, value
        index += 1
        separator = next_char()
        if separator == "]":
            return
        if separator != ",":
            found = excerpt(buffer[position : position + _EXCERPT_CHARS]) or "the end of the file"
            yield index, Unreadable("invalid JSON array: expected ',' or ']' after an element", found)
            return
        position += 1


def _iter_json(path: Path) -> Iterator[tuple[int, object]]:
    """A ``.json`` file: a top-level array of rows, or JSON lines (as ``datasets`` also accepts)."""
    with _open_binary(path) as handle:
        is_array = handle.read(4096).lstrip().startswith(b"[")
    if is_array:
        with io.TextIOWrapper(_open_binary(path), encoding="utf-8") as text:
            yield from _iter_json_array(text)
    else:
        with _open_binary(path) as handle:
            yield from _iter_json_lines(handle)


def _decode_csv_cell(column: str, cell: str) -> object:
    if column in CSV_JSON_COLUMNS and cell[:1] in ("[", "{"):
        try:
            return json.loads(cell)
        except ValueError:
            return cell
    return cell


def _iter_csv(path: Path) -> Iterator[tuple[int, object]]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with io.TextIOWrapper(_open_binary(path), encoding="utf-8", newline="") as text:
        reader = csv.DictReader(text)
        for row in reader:
            yield reader.line_num, {column: _decode_csv_cell(column, cell) for column, cell in row.items()}


def _iter_parquet(path: Path) -> Iterator[tuple[int, object]]:
    import pyarrow.parquet as pq

    index = 0
    with pq.ParquetFile(path) as parquet:
        for batch in parquet.iter_batches(batch_size=512):
            for row in batch.to_pylist():
                yield index, row
                index += 1


def iter_rows(path: Path) -> Iterator[tuple[int, object]]:
    """Yields ``(position, row)`` for every record of a data file, streaming.

    Args:
        path: A file whose format :func:`data_format` knows.

    Returns:
        An iterator of positions (see :func:`position_label`) and decoded rows or :class:`Unreadable` markers.

    Raises:
        ValueError: The file's suffix is not a supported data format.
    """
    kind = data_format(path)
    if kind == "jsonl":
        with _open_binary(path) as handle:
            yield from _iter_json_lines(handle)
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
