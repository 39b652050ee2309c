"""SIGTERM as an exception, so that ``finally`` blocks and context managers run when a pod is stopped.

Python's default SIGTERM action ends the process at once: temporary directories and ``.part`` files stay behind.
Inside :func:`sigterm_raises_exit`, SIGTERM raises ``SystemExit(143)`` (128 + 15, what a shell reports) in the main
thread instead; everything unwinds, then the process exits with that status. Standard library only.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

#: Exit status of a process ended by SIGTERM (128 + 15).
SIGTERM_EXIT_STATUS = 128 + signal.SIGTERM


@contextlib.contextmanager
def sigterm_raises_exit() -> Iterator[None]:
    """Within the block, SIGTERM raises ``SystemExit(143)`` in the main thread (elsewhere: a no-op context)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(SIGTERM_EXIT_STATUS)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
