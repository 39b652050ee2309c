"""Parquet rows decoded within bounds: each row's decoded size is known before it is materialised (README, Bounds)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from components._common.chat_errors import ChatFormatError, Unreadable
from components._common.chat_files import ReadLimits, size_text

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
