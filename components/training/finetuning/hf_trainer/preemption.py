"""Preemption-safe checkpoints: a SIGTERM flag, checkpoints put in place whole, the newest complete one.

A checkpoint is written into a hidden staging directory, its marker last, then renamed into place::

    step_000000040/            one checkpoint: whatever ``save(directory)`` wrote, plus
    step_000000040/done.json   the completion marker: {"step": 40, ...}, written last
    .step_000000060.partial-*  a checkpoint being written (or abandoned by a kill): ignored, removed later
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

SIGTERM_EXIT_CODE = 143  # after a SIGTERM-triggered save (128 + SIGTERM): retryable for job controllers
COMPLETE_MARKER = "done.json"
_STAGING_INFIX = ".partial-"


@dataclasses.dataclass
class SigtermFlag:
    """What :func:`sigterm_flag` yields: ``requested`` (a SIGTERM came), ``installed`` (the handler is; main thread)."""

    log: Callable[[str], None]
    requested: bool = False
    installed: bool = False

    def _handle(self, signum: int, frame: Any) -> None:
        if not self.requested:
            self.log("SIGTERM: saving a checkpoint at the end of this step")
        self.requested = True


@contextlib.contextmanager
def sigterm_flag(log: Callable[[str], None] = print) -> Iterator[SigtermFlag]:
    """Within the block, a SIGTERM sets ``flag.requested`` (logged once) instead of stopping the process.

    The previous handler is restored after the block. Off the main thread: a warning, no handler.
    """
    flag = SigtermFlag(log=log)
    if threading.current_thread() is not threading.main_thread():
        log("WARNING: sigterm_flag outside the main thread: no SIGTERM handler installed (no save on preemption)")
        yield flag
        return
    previous = signal.signal(signal.SIGTERM, flag._handle)
    flag.installed = True
    try:
        yield flag
    finally:
        signal.signal(signal.SIGTERM, previous)
        flag.installed = False


def read_marker(checkpoint: Path) -> dict[str, Any] | None:
    """The completion marker of a checkpoint directory, or ``None`` when it is missing or invalid (incomplete)."""
    try:
        marker = json.loads((Path(checkpoint) / COMPLETE_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or isinstance(marker.get("step"), bool) or not isinstance(marker.get("step"), int):
        return None
    return marker


def newest_complete_checkpoint(root: Path) -> Path | None:
    """The complete checkpoint (its marker holds an integer ``step``; not hidden) with the highest step, or ``None``."""
    found = _complete_checkpoints(Path(root))
    return found[-1] if found else None


def _complete_checkpoints(root: Path) -> list[Path]:
    """The complete checkpoints under ``root``, oldest first (by step, then name)."""
    if not root.is_dir():
        return []
    complete = []
    for path in root.iterdir():
        if not path.name.startswith(".") and path.is_dir() and (marker := read_marker(path)) is not None:
            complete.append((marker["step"], path.name, path))
    return [path for _, _, path in sorted(complete)]


class CheckpointWriter:
    """Writes checkpoints under ``root`` atomically (staging directory, marker last, rename).

    The newest ``keep_last`` complete ones are kept (0 keeps all).
    """

    def __init__(self, root: Path, keep_last: int = 2) -> None:
        self.root = Path(root)
        self.keep_last = keep_last

    def write(self, step: int, save: Callable[[Path], None], info: Mapping[str, Any] | None = None) -> Path:
        """Writes the checkpoint of ``step``: ``save(directory)`` fills it, then the marker ``{"step": step, **info}``.

        Returns:
            The complete checkpoint directory, ``step_<step, 9 digits>``.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        self._remove_abandoned_staging()
        name = f"step_{step:09d}"
        staging = Path(tempfile.mkdtemp(dir=self.root, prefix=f".{name}{_STAGING_INFIX}"))
        try:
            save(staging)
            marker = staging / COMPLETE_MARKER
            temporary = staging / f".{COMPLETE_MARKER}.tmp"
            temporary.write_text(json.dumps({**dict(info or {}), "step": step}, sort_keys=True), encoding="utf-8")
            os.replace(temporary, marker)
            target = self.root / name
            if target.exists():  # the same step saved again: move the old one aside first
                target.rename(self.root / f".{name}{_STAGING_INFIX}replaced")
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        self._remove_abandoned_staging()
        self._prune()
        return target

    def _remove_abandoned_staging(self) -> None:
        for path in self.root.glob(f".*{_STAGING_INFIX}*"):
            shutil.rmtree(path, ignore_errors=True)

    def _prune(self) -> None:
        if not self.keep_last:
            return
        for path in _complete_checkpoints(self.root)[: -self.keep_last]:
            (path / COMPLETE_MARKER).unlink(missing_ok=True)  # first: a half-deleted one is never taken for complete
            shutil.rmtree(path, ignore_errors=True)
