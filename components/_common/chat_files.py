"""Reading chat data files with bounds: lines a block at a time, size limits, ``.gz`` with a decompressed cap."""

from __future__ import annotations

import contextlib
import gzip
import io
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from components._common.chat_errors import ChatFormatError, Unreadable, excerpt

_BLOCK = 1 << 20
#: The UTF-8 byte order mark; accepted (and skipped) at the start of a file.
UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class ReadLimits:
    """Size limits of reading data files (rules ``record_too_large``, ``decompressed_too_large``)."""

    max_line_bytes: int
    max_decompressed_bytes: int

    def __post_init__(self) -> None:
        for name in ("max_line_bytes", "max_decompressed_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name}={value!r} must be a positive number of bytes")


#: The bounds of reading a dataset artifact (already validated): only a bound on memory.
ARTIFACT_READ_LIMITS = ReadLimits(max_line_bytes=1 << 30, max_decompressed_bytes=1 << 40)


def size_text(size: int) -> str:
    """``16777216 (16 MiB)``: a byte count with its binary-unit rounding, for messages."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size} ({size / (1 << shift):.3g} {unit})"
    return str(size)


class DecompressedLimitExceeded(Exception):
    """A ``.gz`` file expanded past ``max_decompressed_bytes``."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"decompressed past max_decompressed_bytes={size_text(limit)}")
        self.limit = limit


class _LimitedReader(io.BufferedIOBase):
    """A decompressing reader raising :class:`DecompressedLimitExceeded` past its limit."""

    def __init__(self, inner: IO[bytes], limit: int) -> None:
        super().__init__()
        self._inner, self._limit, self._produced = inner, limit, 0

    def readable(self) -> bool:
        return True

    def _counted(self, data: bytes) -> bytes:
        self._produced += len(data)
        if self._produced > self._limit:
            raise DecompressedLimitExceeded(self._limit)
        return data

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:  # never "all of it": a bomb would be expanded in memory
            size = self._limit - self._produced + 1
        return self._counted(self._inner.read(size))

    def read1(self, size: int = -1) -> bytes:
        return self._counted(self._inner.read1(size if size >= 0 else _BLOCK))

    def close(self) -> None:
        self._inner.close()
        super().close()


def open_binary(path: Path, max_decompressed_bytes: int) -> IO[bytes]:
    """Opens a data file for reading bytes; a ``.gz`` through ``gzip``, capped at ``max_decompressed_bytes``."""
    if Path(path).suffix.lower() == ".gz":
        return _LimitedReader(gzip.open(path, "rb"), max_decompressed_bytes)
    return open(path, "rb")


def record_too_large(what: str, limit: int, start: bytes | str) -> Unreadable:
    """The reject of a line, element or record longer than ``max_line_bytes`` (``what``: ``line 7``)."""
    return Unreadable("record_too_large", f"{what} is longer than max_line_bytes={size_text(limit)}", excerpt(start))


@contextlib.contextmanager
def gzip_errors(path: Path, where: Callable[[], str]) -> Iterator[None]:
    """Within the block, a damaged or too large ``.gz`` raises a ``ChatFormatError`` saying ``where()``."""
    try:
        yield
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        detail = f"the gzip stream breaks {where()} ({type(error).__name__}: {error}); re-create or re-download"
        detail += " the file"
        raise ChatFormatError(Path(path).name, "bad_compression", detail) from None
    except DecompressedLimitExceeded as error:
        detail = (
            f"expands past max_decompressed_bytes={size_text(error.limit)} {where()}: a gzip bomb, or a file that "
            "needs a larger max_decompressed_bytes"
        )
        raise ChatFormatError(Path(path).name, "decompressed_too_large", detail) from None


def after(position: int, unit: str = "line") -> str:
    """``after line 3``, or ``at its start`` for position 0."""
    return f"after {unit} {position}" if position else "at its start"


def iter_line_blocks(path: Path, limits: ReadLimits) -> Iterator[tuple[int, list[bytes | Unreadable]]]:
    """Yields ``(first_line_number, lines)``: every line of a (possibly gzipped) file, about 1 MiB at a time.

    A line longer than ``limits.max_line_bytes`` is an :class:`Unreadable`, never held; a leading BOM is skipped.

    Raises:
        ChatFormatError: A damaged ``.gz`` file, or one that expands too far (:func:`gzip_errors`).
    """
    limit = limits.max_line_bytes
    number = 1  # of the next line
    with gzip_errors(path, lambda: after(number - 1)), open_binary(path, limits.max_decompressed_bytes) as handle:
        head, skipped_start, first = b"", b"", True  # head: the start of a line that goes on in the next block
        while block := handle.read(_BLOCK):
            if first:
                block, first = block.removeprefix(UTF8_BOM), False
            lines: list = block.split(b"\n")
            tail = lines.pop()
            if lines:
                longest_possible = len(head) + len(block)
                if skipped_start:
                    lines[0] = record_too_large(f"line {number}", limit, skipped_start)
                elif head:
                    lines[0] = head + lines[0]
                if longest_possible > limit:
                    for index, line in enumerate(lines):
                        if type(line) is bytes and len(line) > limit:
                            lines[index] = record_too_large(f"line {number + index}", limit, line[:1024])
                yield number, lines
                number += len(lines)
                head, skipped_start = b"", b""
            if not skipped_start:
                head += tail
                if len(head) > limit:
                    head, skipped_start = b"", head[:1024]
        if skipped_start:
            yield number, [record_too_large(f"line {number}", limit, skipped_start)]
        elif head:
            yield number, [head]


def is_record(line: bytes | Unreadable) -> bool:
    """Whether an item of :func:`iter_line_blocks` is a record: a non-blank line, or a line too long to read."""
    return type(line) is not bytes or (bool(line) and not line.isspace())


def count_lines(path: Path, limits: ReadLimits) -> int:
    """The records of a JSON-lines file from one scan of its bytes (an upper bound if blank lines stand between).

    Raises:
        ChatFormatError: As :func:`iter_line_blocks`.
    """
    lines, last, first = 0, b"", True
    counting = gzip_errors(path, lambda: "while counting its lines")
    with counting, open_binary(path, limits.max_decompressed_bytes) as handle:
        while block := handle.read(_BLOCK):
            if first:
                block, first = block.removeprefix(UTF8_BOM), False
            lines += block.count(b"\n")
            last = block or last
    if last and not last.endswith(b"\n"):
        lines += 1  # the last line has no line break
    content = last.rstrip()
    if content:  # the lines after the last record's own line break are blank
        trailing = last[len(content) :]
        lines -= max(0, trailing.count(b"\n") - 1) + (trailing.count(b"\n") > 0 and not trailing.endswith(b"\n"))
    return lines


def iter_lines(path: Path, limits: ReadLimits) -> Iterator[tuple[int, bytes | Unreadable]]:
    """Yields ``(line_number, line)`` for the records of a (possibly gzipped) file (see :func:`iter_line_blocks`)."""
    for first, lines in iter_line_blocks(path, limits):
        for number, line in enumerate(lines, first):
            if is_record(line):
                yield number, line
