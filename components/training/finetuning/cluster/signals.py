"""SIGTERM/SIGINT while a job is followed: cancel the follow, and never interrupt the cleanup that follows."""

from __future__ import annotations

import contextlib
import signal
from typing import Any

from components._common.termination import signal_handlers

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Cancelled(BaseException):
    """Raised by the signal handler; a BaseException so that no client code swallows it."""


def _cancel(signum: int, frame: Any) -> None:
    raise Cancelled(signal.Signals(signum).name)


def cancel_on_signals() -> contextlib.AbstractContextManager[None]:
    """Turns SIGTERM (and SIGINT) into :class:`Cancelled` while following (main thread only)."""
    return signal_handlers(_SIGNALS, _cancel)


def signals_ignored() -> contextlib.AbstractContextManager[None]:
    """Ignores SIGTERM/SIGINT during cleanup so that a second signal cannot interrupt it (main thread only)."""
    return signal_handlers(_SIGNALS, signal.SIG_IGN)
