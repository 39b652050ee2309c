"""Preemption-safe checkpoints: save on SIGTERM, write checkpoints atomically, resume from the newest complete one.

A preempted or scaled-down node gives its pods a SIGTERM and a grace period (30 s by default) before SIGKILL.
:func:`save_on_sigterm` turns that SIGTERM into "save a checkpoint, then exit with 143" (128 + SIGTERM, which the
Training Operator's ``ExitCode`` restart policy and JobSet treat as retryable). :class:`CheckpointWriter` writes each
checkpoint into a hidden staging directory, puts the completion marker in last and renames the directory into place,
so a checkpoint is either complete or invisible. :func:`newest_complete_checkpoint` ignores anything without a valid
marker.

Layout under a checkpoint root (the marker name is the local backend's, so its ``checkpoints/epoch_<e>`` directories
are found too)::

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

#: Exit status after a SIGTERM-triggered save (128 + SIGTERM), retryable for Kubernetes job controllers.
SIGTERM_EXIT_CODE = 143
#: The completion marker, written last into a checkpoint (same name as the local backend's).
COMPLETE_MARKER = "done.json"
_STAGING_INFIX = ".partial-"


@dataclasses.dataclass
class SigtermGuard:
    """What :func:`save_on_sigterm` yields.

    Attributes:
        at_step_boundary: Save at the next :meth:`check` instead of inside the signal handler.
        requested: Whether a SIGTERM arrived.
        installed: Whether the handler is installed (only possible on the main thread).
    """

    save: Callable[[], None]
    log: Callable[[str], None]
    at_step_boundary: bool = False
    requested: bool = False
    installed: bool = False

    def check(self) -> None:
        """Call between steps: when a SIGTERM arrived (``at_step_boundary=True``), saves and exits with 143."""
        if self.requested:
            self.save_and_exit()

    def save_and_exit(self) -> None:
        """Saves (a second SIGTERM is ignored meanwhile; a failing save is logged) and raises ``SystemExit(143)``."""
        if self.installed:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            self.save()
            self.log(f"SIGTERM: checkpoint saved; exiting with {SIGTERM_EXIT_CODE} so the job restarts and resumes")
        except Exception as error:  # noqa: BLE001 - the process is being stopped either way: say why nothing was saved
            self.log(f"SIGTERM: saving the checkpoint failed ({type(error).__name__}: {error}); exiting without it")
        raise SystemExit(SIGTERM_EXIT_CODE)

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True
        if self.at_step_boundary:
            self.log("SIGTERM: saving a checkpoint at the end of this step")
            return
        self.log("SIGTERM: saving a checkpoint now")
        self.save_and_exit()


@contextlib.contextmanager
def save_on_sigterm(
    save: Callable[[], None], *, at_step_boundary: bool = False, log: Callable[[str], None] = print
) -> Iterator[SigtermGuard]:
    """Within the block, a SIGTERM saves a checkpoint (``save()``) and exits with status 143.

    The previous SIGTERM handler is restored when the block ends. With ``at_step_boundary=False`` (default) ``save``
    runs inside the handler, so it must save a consistent state whatever line was interrupted (e.g. the state as of
    the last finished step); with ``True`` the handler only records the signal and the loop calls
    :meth:`SigtermGuard.check` after each step (a step must then end within the grace period).

    Args:
        save: Writes the checkpoint (e.g. ``lambda: writer.write(step, save_state)``).
        at_step_boundary: Defer the save to the next :meth:`SigtermGuard.check`.
        log: Where the SIGTERM lines go.

    Yields:
        The guard (``check()``, ``requested``). Off the main thread nothing can be installed: a warning is logged.
    """
    guard = SigtermGuard(save=save, log=log, at_step_boundary=at_step_boundary)
    if threading.current_thread() is not threading.main_thread():
        log("WARNING: save_on_sigterm outside the main thread: no SIGTERM handler installed (no save on preemption)")
        yield guard
        return
    previous = signal.signal(signal.SIGTERM, guard._handle)
    guard.installed = True
    try:
        yield guard
    finally:
        signal.signal(signal.SIGTERM, previous)
        guard.installed = False


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
    """The complete checkpoint with the highest step under ``root`` (ties: the later name), or ``None``.

    A checkpoint is complete when its :data:`COMPLETE_MARKER` holds a JSON object with an integer ``step``; hidden
    directories (staging) and directories without a valid marker are ignored.

    Args:
        root: The directory holding checkpoint directories (e.g. ``<output_dir>/checkpoints``).

    Returns:
        The checkpoint directory, or ``None`` when there is none (or ``root`` does not exist).
    """
    root = Path(root)
    if not root.is_dir():
        return None
    found = []
    for path in root.iterdir():
        if path.name.startswith(".") or not path.is_dir():
            continue
        marker = read_marker(path)
        if marker is not None:
            found.append((marker["step"], path.name, path))
    return max(found)[2] if found else None


class CheckpointWriter:
    """Writes checkpoints under ``root`` atomically (staging directory, marker last, rename) and keeps the newest.

    Args:
        root: The checkpoint root (created when missing).
        keep_last: How many complete checkpoints to keep (older ones are deleted after a new one is in place);
            0 keeps all.
    """

    def __init__(self, root: Path, keep_last: int = 2) -> None:
        if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0:
            raise ValueError(f"keep_last={keep_last!r}: must be an integer >= 0 (0 keeps every checkpoint)")
        self.root = Path(root)
        self.keep_last = keep_last

    @staticmethod
    def checkpoint_name(step: int) -> str:
        """The directory name of the checkpoint of ``step`` (sorts by step)."""
        return f"step_{step:09d}"

    def write(self, step: int, save: Callable[[Path], None], info: Mapping[str, Any] | None = None) -> Path:
        """Writes one checkpoint: ``save(directory)`` fills it, then the marker ``{"step": step, **info}`` goes in.

        Args:
            step: The optimizer step the checkpoint holds (>= 0).
            save: Writes the state into the given (empty) directory.
            info: More JSON-serialisable facts for the marker (epoch, elapsed seconds...).

        Returns:
            The complete checkpoint directory.

        Raises:
            ValueError: ``step`` is not an integer >= 0 or ``info`` sets ``step``.
        """
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step={step!r}: must be an integer >= 0")
        if info and "step" in info:
            raise ValueError(f"info={dict(info)!r}: must not set 'step' (given as the step argument)")
        self.root.mkdir(parents=True, exist_ok=True)
        self._remove_abandoned_staging()
        name = self.checkpoint_name(step)
        staging = Path(tempfile.mkdtemp(dir=self.root, prefix=f".{name}{_STAGING_INFIX}"))
        try:
            save(staging)
            marker = staging / COMPLETE_MARKER
            temporary = staging / f".{COMPLETE_MARKER}.tmp"
            temporary.write_text(json.dumps({"step": step, **dict(info or {})}, sort_keys=True), encoding="utf-8")
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
        complete = sorted(
            (marker["step"], path.name, path)
            for path in self.root.iterdir()
            if not path.name.startswith(".") and path.is_dir() and (marker := read_marker(path)) is not None
        )
        for _, _, path in complete[: -self.keep_last]:
            # Invalidate first (marker gone = incomplete), so a half-deleted directory is never taken for complete.
            (path / COMPLETE_MARKER).unlink(missing_ok=True)
            shutil.rmtree(path, ignore_errors=True)
