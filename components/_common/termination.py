"""SIGTERM as ``SystemExit(143)``, so that ``finally`` blocks and context managers run when a pod is stopped."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

#: Exit status of a process ended by SIGTERM (128 + 15).
SIGTERM_EXIT_STATUS = 128 + signal.SIGTERM


@contextlib.contextmanager
def signal_handlers(signals: Sequence[int], handler: Callable[[int, Any], Any] | int) -> Iterator[None]:
    """Within the block, ``handler`` handles ``signals`` (main thread only; elsewhere a no-op context)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _exit_143(signum: int, frame: object) -> None:
    raise SystemExit(SIGTERM_EXIT_STATUS)


def sigterm_raises_exit() -> contextlib.AbstractContextManager[None]:
    """Within the block, SIGTERM raises ``SystemExit(143)`` in the main thread (elsewhere: a no-op context)."""
    return signal_handlers((signal.SIGTERM,), _exit_143)
