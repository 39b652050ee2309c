"""Test doubles for following a job in-process: a clock whose ``sleep`` advances time at once, and a log sink."""

from __future__ import annotations

from collections.abc import Callable


class FakeClock:
    """A clock whose ``sleep`` advances time instantly and then lets the scripted cluster act at the new time."""

    def __init__(self, script: Callable[[float], None] | None = None) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.script = script or (lambda now: None)

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        self.script(self.now)


class Log(list):
    """A ``log`` callable that keeps every line."""

    def __call__(self, line: str) -> None:
        self.append(line)

    def text(self) -> str:
        return "\n".join(self)
