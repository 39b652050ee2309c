"""Preemption-safe checkpoints: a SIGTERM flag, checkpoints put in place whole, the newest complete one.

The Trainer's ``checkpoint-<N>`` gets its marker (``done.json``: ``{"step": N, ...}``), then becomes ``step_<N>``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

SIGTERM_EXIT_CODE = 143  # after a SIGTERM-triggered save (128 + SIGTERM): retryable for job controllers
COMPLETE_MARKER = "done.json"


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
    """Within the block, a SIGTERM sets ``flag.requested`` (logged once); off the main thread: a warning, no handler."""
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


def publish_checkpoint(source: Path, root: Path, step: int, info: Mapping[str, Any], keep_last: int = 2) -> Path:
    """Puts ``source`` in place as ``root/step_<N>`` (replacing one of that step), marker first; returns it.

    The newest ``keep_last`` complete checkpoints are kept (0 keeps all).
    """
    temporary = Path(source) / f".{COMPLETE_MARKER}.tmp"
    temporary.write_text(json.dumps({**info, "step": step}, sort_keys=True), encoding="utf-8")
    os.replace(temporary, Path(source) / COMPLETE_MARKER)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"step_{step:09d}"
    if target.exists():  # the same step saved again: move the old one aside first
        aside = root / f".{target.name}.replaced"
        shutil.rmtree(aside, ignore_errors=True)
        target.rename(aside)
        shutil.rmtree(aside, ignore_errors=True)
    Path(source).rename(target)
    for path in _complete_checkpoints(root)[:-keep_last] if keep_last else []:
        (path / COMPLETE_MARKER).unlink(missing_ok=True)  # first: a half-deleted one is never taken for complete
        shutil.rmtree(path, ignore_errors=True)
    return target
