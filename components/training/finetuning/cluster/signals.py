"""SIGTERM/SIGINT while a job is followed: cancel the follow, and never interrupt the cleanup that follows."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


class Cancelled(BaseException):
    """Raised by the signal handler; a BaseException so that no client code swallows it."""


@contextlib.contextmanager
def cancel_on_signals() -> Iterator[None]:
    """Turns SIGTERM (and SIGINT) into :class:`Cancelled` while following (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Cancelled(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """Ignores SIGTERM/SIGINT during cleanup so that a second signal cannot interrupt it (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
