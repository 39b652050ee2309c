"""File helpers shared by components (standard library only)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from components._common.masking import mask_text


def process_umask() -> int:
    """The process's umask, read without changing it where Linux says it (``/proc/self/status``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: read by setting it back at once
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The mode ``open()`` gives a new file (``0o666`` less the umask), not ``mkstemp``'s owner-only ``0o600``."""
    return 0o666 & ~process_umask()


def mkstemp_like_open(directory: Path, prefix: str, suffix: str = ".tmp") -> tuple[int, str]:
    """``tempfile.mkstemp`` in ``directory`` with the mode ``open()`` would give (:func:`new_file_mode`)."""
    handle, name = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=suffix)
    try:
        os.fchmod(handle, new_file_mode())
    except BaseException:
        os.close(handle)
        Path(name).unlink(missing_ok=True)
        raise
    return handle, name


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
    """Writes ``text`` (secrets masked by value) to ``path`` through a temporary file beside it and ``os.replace``."""
    text = mask_text(text, patterns=False)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = mkstemp_like_open(target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def with_extension(artifact: object, extension: str) -> str:
    """Gives an output artifact's file an extension (the KFP UI shows it by that); returns the path to write."""
    if not artifact.uri.endswith(extension):
        artifact.uri = artifact.uri + extension
    return artifact.path


def replace_dir(target: Path, write: Callable[[Path], None]) -> Path:
    """Writes ``target`` through a sibling temporary directory that ``write`` fills, then swaps it in; ``target``."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        staging.chmod(0o777 & ~process_umask())  # mkdtemp's 0o700 would hide the directory from the group
        write(staging)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
