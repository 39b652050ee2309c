"""File helpers shared by components (standard library only)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from components._common.masking import mask_text


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
    """Writes ``text`` to ``path`` through a temporary file in the same directory and ``os.replace``.

    Readers never see a half-written file; on error the temporary file is removed and ``path`` is left as it was.
    Every secret value the process knows is masked first (see :mod:`components._common.masking`; by value only).

    Args:
        path: Target file; its directory is created when missing.
        text: Content (UTF-8).
    """
    text = mask_text(text, patterns=False)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def with_extension(artifact: object, extension: str) -> str:
    """Gives an output artifact's file an extension and returns the path to write.

    KFP names an output file after the output (``.../report``); the KFP UI and browsers choose how to show a file
    from its extension. Changing ``artifact.uri`` before writing is how KFP lets a component choose the name: the
    executor records the new URI and the launcher uploads the file from the path that matches it.

    Args:
        artifact: A KFP output artifact (``dsl.Output[dsl.HTML]``, ``dsl.Output[dsl.Markdown]``, ...).
        extension: ``.html``, ``.md``, ...

    Returns:
        ``artifact.path`` after the change (idempotent: an URI that already ends with ``extension`` is kept).
    """
    if not artifact.uri.endswith(extension):
        artifact.uri = artifact.uri + extension
    return artifact.path


def replace_dir(target: Path, write: Callable[[Path], None]) -> Path:
    """Writes a directory through a sibling temporary directory, then swaps it in (never a half-written directory).

    Args:
        target: The directory to (re)place; its parent is created when missing.
        write: Fills the temporary directory it is given.

    Returns:
        ``target``. On error the temporary directory is removed and ``target`` is left as it was.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        write(staging)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
