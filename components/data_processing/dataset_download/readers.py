"""Streaming readers of ``.jsonl``, ``.json``, ``.parquet`` and ``.csv`` files, memory bounded by ``ReadLimits``.

A record that cannot be decoded is yielded as an :class:`Unreadable` naming its rule: the caller counts it, goes on.
A Parquet row's decoded size is known before it is materialised (README, Bounds).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import IO, Any

from components._common.chat_errors import ChatFormatError, Unreadable, excerpt
from components._common.chat_files import (
    UTF8_BOM,
    ReadLimits,
    after,
    gzip_errors,
    iter_lines,
    open_binary,
    record_too_large,
    size_text,
)
from components._common.chat_format import decode_json

#: File formats that can be read, by the suffix that names them.
DATA_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
#: CSV columns whose cells are decoded as JSON when they hold a JSON list or object.
CSV_JSON_COLUMNS = frozenset({"messages", "conversations", "prompt", "completion"})
_CHUNK_CHARS = 1 << 20
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


def drop_nulls(value: object) -> object:
    """``value`` without the ``null`` members of its objects, at any depth (list items are kept as they are)."""
    if type(value) is dict:
        return {key: drop_nulls(item) for key, item in value.items() if item is not None}
    if type(value) is list:
        return [drop_nulls(item) for item in value]
    return value


def _iter_json_lines(path: Path, limits: ReadLimits, nulls: bool = True) -> Iterator[tuple[int, object]]:
    for line_number, line in iter_lines(path, limits):
        value = line if type(line) is Unreadable else decode_json(line)
        yield line_number, value if nulls else drop_nulls(value)


def _iter_json_array(text: IO[str], limits: ReadLimits) -> Iterator[tuple[int, object]]:
    """The elements of a top-level JSON array, by ``raw_decode`` on a sliding buffer (one too long ends the file)."""
    decoder = json.JSONDecoder()
    buffer, position = text.read(_CHUNK_CHARS), 0

    def next_char() -> str:
        """The next character after whitespace (reading more as needed), or "" at the end of the file."""
        nonlocal buffer, position
        while True:
            while position < len(buffer) and buffer[position].isspace():
                position += 1
            if position < len(buffer):
                return buffer[position]
            buffer, position = text.read(_CHUNK_CHARS), 0
            if not buffer:
                return ""

    next_char()  # the "[" that made the caller read an array
    position += 1
    if next_char() == "]":
        return
    index = 0
    while True:
        next_char()
        while True:
            start = position
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
                if len(buffer) - position > limits.max_line_bytes:
                    yield index, record_too_large(f"element {index}", limits.max_line_bytes, buffer[position:])
                    return
                more = text.read(_CHUNK_CHARS)
                if not more:
                    yield index, Unreadable("invalid_json", f"invalid JSON: {error.msg}", excerpt(buffer[position:]))
                    return
                buffer, position = buffer[position:] + more, 0
        if _UNDECODABLE.search(buffer, start, position):  # invalid UTF-8 in this element only: the next ones are read
            raw = buffer[start:position].encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            yield index, Unreadable("invalid_utf8", f"not valid UTF-8 in element {index}", excerpt(raw))
        elif _LONE_SURROGATE.search(buffer, start, position) and _has_lone_surrogate(value):
            reason = "invalid JSON: a lone UTF-16 surrogate escape (\\ud800-\\udfff without its pair) in a string"
            yield index, Unreadable("invalid_json", reason, excerpt(buffer[start:position]))
        else:
            yield index, drop_nulls(value)
        index += 1
        separator = next_char()
        if separator == "]":
            return
        if separator != ",":
            found = excerpt(buffer[position : position + _EXCERPT_CHARS]) or "the end of the file"
            yield index, Unreadable("invalid_json", "invalid JSON array: expected ',' or ']' after an element", found)
            return
        position += 1


#: The characters ``surrogateescape`` decodes invalid UTF-8 bytes to (a real character, not a ``\\u`` escape).
_UNDECODABLE = re.compile("[\udc80-\udcff]")
#: A ``\\uD800``-``\\uDFFF`` escape: Python's ``json`` decodes a lone one into a string UTF-8 cannot encode.
_LONE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _has_lone_surrogate(value: object) -> bool:
    """Whether a decoded JSON value holds a string (key or value) with an unpaired UTF-16 surrogate."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _text_rows(path: Path, rows: Iterator[tuple[int, object]]) -> Iterator[tuple[int, object]]:
    """``rows`` of a text stream; invalid UTF-8 is one :class:`Unreadable` that ends the file (no resynchronizing)."""
    position = 0
    try:
        with gzip_errors(path, lambda: after(position, "record")):
            for position, value in rows:
                yield position, value
    except UnicodeDecodeError as error:
        reason = f"not valid UTF-8 after record {position} (byte {error.start} of a read chunk: {error.reason})"
        yield position + 1, Unreadable("invalid_utf8", reason, excerpt(error.object[error.start : error.start + 40]))


def _iter_json(path: Path, limits: ReadLimits) -> Iterator[tuple[int, object]]:
    """A ``.json`` file: a top-level array of rows, or JSON lines (as ``datasets`` also accepts)."""
    with gzip_errors(path, lambda: after(0)), open_binary(path, limits.max_decompressed_bytes) as handle:
        head = handle.read(4096)
    if head.removeprefix(UTF8_BOM).lstrip().startswith(b"["):
        binary = open_binary(path, limits.max_decompressed_bytes)  # invalid UTF-8 kept, judged per element
        with io.TextIOWrapper(binary, encoding="utf-8-sig", errors="surrogateescape") as text:
            yield from _text_rows(path, _iter_json_array(text, limits))
    else:
        yield from _iter_json_lines(path, limits, nulls=False)


def _decode_json_cell(column: str, cell: object, source: str) -> object:
    """A JSON column's cell (``messages``...) decoded when it starts like JSON; others as they are."""
    if column in CSV_JSON_COLUMNS and type(cell) is str and cell[:1] in ("[", "{"):
        value = decode_json(cell)
        if type(value) is Unreadable:
            return Unreadable(value.rule, f"the {source} column {column!r} holds {value.reason}", value.excerpt)
        return drop_nulls(value) if source == "Parquet" else value
    return cell


class _LineTooLong(Exception):
    """A CSV line longer than the bound (its start in ``args[0]``)."""


def _bounded_lines(text: IO[str], limit: int) -> Iterator[str]:
    """The lines of a text stream, each read with a bound: a longer one raises :class:`_LineTooLong`."""
    while line := text.readline(limit + 1):
        if len(line) > limit:
            raise _LineTooLong(line[:1024])
        yield line


def _csv_records(text: IO[str], limit: int) -> Iterator[tuple[int, object]]:
    """CSV rows as dicts; a record over ``limit`` characters is a ``record_too_large`` reject that ends the file."""
    reader = csv.DictReader(_bounded_lines(text, limit))
    try:
        for row in reader:
            present = {column: cell for column, cell in row.items() if column is not None and cell is not None}
            yield reader.line_num, _decoded(present, "CSV")
    except _LineTooLong as error:
        yield reader.line_num + 1, record_too_large(f"line {reader.line_num + 1}", limit, error.args[0])
    except csv.Error as error:
        if "field limit" not in str(error):
            yield reader.line_num, Unreadable("invalid_csv", f"unreadable CSV: {error}", "")
            return
        yield reader.line_num, record_too_large(f"the record ending on line {reader.line_num}", limit, "")


def _iter_csv(path: Path, limits: ReadLimits) -> Iterator[tuple[int, object]]:
    csv.field_size_limit(limits.max_line_bytes)
    with io.TextIOWrapper(open_binary(path, limits.max_decompressed_bytes), encoding="utf-8-sig", newline="") as text:
        yield from _text_rows(path, _csv_records(text, limits.max_line_bytes))


#: A Parquet row group may hold at most this many times ``max_line_bytes`` uncompressed (it is decoded whole).
PARQUET_ROW_GROUP_LINES = 64
#: Rows read at a time: materialised together when their decoded total is within ``max_line_bytes``, else one by one.
BATCH_ROWS = 512
#: Bytes counted per value besides its data (offsets, indices), so that empty values still count.
_PER_VALUE = 4
#: Byte widths of Parquet's fixed-size physical types (an estimate of the decoded size before reading).
_WIDTHS = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8}


def decoded_bytes(array: Any) -> int:
    """The bytes ``array`` takes once decoded."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    if pa.types.is_dictionary(kind):
        lengths = pc.binary_length(array.dictionary)
        used = pc.take(lengths, array.indices)
        return int(pc.sum(used).as_py() or 0) + _PER_VALUE * len(array)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return decoded_bytes(array.flatten()) + _PER_VALUE * len(array)
    if pa.types.is_map(kind):
        return decoded_bytes(array.keys) + decoded_bytes(array.items) + _PER_VALUE * len(array)
    if pa.types.is_struct(kind):
        return sum(decoded_bytes(child) for child in array.flatten()) + _PER_VALUE * len(array)
    return int(array.nbytes) + _PER_VALUE * len(array)


def _check_row_groups(path: Path, metadata: Any, limits: ReadLimits) -> None:
    """Refuses a row group too large to decode within the step's memory (encoded size, or fixed-width values)."""
    bound = PARQUET_ROW_GROUP_LINES * limits.max_line_bytes
    schema = metadata.schema
    for number in range(metadata.num_row_groups):
        group = metadata.row_group(number)
        fixed = sum(
            group.column(column).num_values * _WIDTHS.get(schema.column(column).physical_type, 0)
            for column in range(group.num_columns)
        )
        size = max(group.total_byte_size, fixed)
        if size > bound:
            raise ChatFormatError(
                path.name,
                "record_too_large",
                f"row group {number} holds {size_text(size)} decoded, over {PARQUET_ROW_GROUP_LINES} x "
                f"max_line_bytes={size_text(bound)}; rewrite it with smaller row groups (pyarrow row_group_size)",
            )


def iter_parquet_rows(path: Path, limits: ReadLimits) -> Iterator[tuple[int, object]]:
    """``(row index, row dict)`` of a Parquet file; a row over ``max_line_bytes`` is an :class:`Unreadable`.

    Raises:
        ChatFormatError: A row group too large, the decoded total past ``max_decompressed_bytes``, or a damaged file.
    """
    import pyarrow
    import pyarrow.parquet as pq

    index, total = 0, 0
    try:
        metadata = pq.ParquetFile(path).metadata
        _check_row_groups(path, metadata, limits)
        schema = metadata.schema
        groups = [metadata.row_group(number) for number in range(metadata.num_row_groups)]
        strings = [  # the string columns a dictionary may repeat (plain pages hold every value's bytes: no repetition)
            schema.column(i).path
            for i in range(len(schema))
            if schema.column(i).physical_type == "BYTE_ARRAY" and any(g.column(i).has_dictionary_page for g in groups)
        ]
        with pq.ParquetFile(path, read_dictionary=strings) as parquet:
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
                size = sum(decoded_bytes(column) for column in batch.columns)
                total += size
                if total > limits.max_decompressed_bytes:
                    raise ChatFormatError(
                        path.name,
                        "decompressed_too_large",
                        f"decodes to more than max_decompressed_bytes={size_text(limits.max_decompressed_bytes)} by "
                        f"row {index + batch.num_rows - 1} ({size_text(path.stat().st_size)} on disk: "
                        "dictionary-encoded values repeated); split it or raise max_decompressed_bytes",
                    )
                if size <= limits.max_line_bytes:  # the whole batch is within one row's bound: every row is
                    for row in batch.to_pylist():
                        yield index, row
                        index += 1
                    continue
                for row in range(batch.num_rows):  # one row at a time, each measured before it is materialised
                    one = batch.slice(row, 1)
                    row_size = sum(decoded_bytes(column) for column in one.columns)
                    if row_size > limits.max_line_bytes:
                        reason = f"row {index} decodes to {size_text(row_size)}, over max_line_bytes"
                        yield index, Unreadable("record_too_large", f"{reason}={size_text(limits.max_line_bytes)}", "")
                    else:
                        yield index, one.to_pylist()[0]
                    index += 1
    except (pyarrow.ArrowException, OSError) as error:
        where = f"after row {index - 1}" if index else "at its start"
        raise ChatFormatError(
            path.name, "bad_parquet", f"unreadable {where} ({type(error).__name__}: {str(error)[:200]}); re-create it"
        ) from None


def _iter_parquet(path: Path, limits: ReadLimits) -> Iterator[tuple[int, object]]:
    """Parquet rows within their decoded bounds; JSON-column strings decoded as CSV cells are."""
    for index, row in iter_parquet_rows(path, limits):
        yield index, _decoded(drop_nulls(row), "Parquet") if type(row) is dict else row


def _decoded(row: dict, source: str) -> object:
    """A row with its JSON columns decoded (:func:`_decode_json_cell`), or its first unreadable cell."""
    cells = {column: _decode_json_cell(column, cell, source) for column, cell in row.items()}
    return next((cell for cell in cells.values() if type(cell) is Unreadable), cells)


def iter_rows(path: Path, limits: ReadLimits) -> Iterator[tuple[int, object]]:
    """Yields ``(position, row)`` (see :func:`position_label`) for every record of a data file, streaming.

    Raises:
        ValueError: The file's suffix is not a supported data format; ``ChatFormatError`` for a damaged or too large
            ``.gz`` file, or a Parquet row group too large to decode.
    """
    readers = {"jsonl": _iter_json_lines, "json": _iter_json, "csv": _iter_csv, "parquet": _iter_parquet}
    kind = data_format(path)
    if kind is None:
        raise ValueError(
            f"unsupported data file {path.name!r}: the suffix must be one of "
            f"{', '.join(sorted(DATA_FORMATS))} (optionally + .gz, not for .parquet)"
        )
    yield from readers[kind](path, limits)
