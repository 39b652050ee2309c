"""What ``kfp-finetune demo`` shows: a short story on the terminal, everything else in a log file.

While the pipeline runs, :class:`DemoConsole` takes every line ``kfp.local`` prints to the log (and, ``--verbose``, to
the terminal); the story keeps a line per task start and end (the lines ``kfp.local`` logs around each task), a
throttled training progress line and a failed task's one-line error. A failed task logs no end line.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

#: A training step line of ``train_model`` (local launcher): ``step 12/360 epoch 0.27 loss 4.7948 lr 0.003``.
STEP_LINE = re.compile(r"^step (?P<step>\d+)/(?P<total>\d+) .*?loss (?P<loss>[-+0-9.eE]+|nan|inf)")
#: How many of a task's last output lines are kept to find its error.
KEPT_TASK_LINES = 400
#: Progress lines per training run (at these fractions of the steps), plus one whenever this many seconds passed.
PROGRESS_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
PROGRESS_SECONDS = 30.0
_KFP_INDENT = " " * 4
#: ``kfp.local``'s log line before a task runs (colours removed): ``12:00:01.123 - INFO - Executing task 'x'``.
TASK_STARTED = re.compile(r"^\S+ - INFO - Executing task '(?P<task>[^']+)'$")
#: ``kfp.local``'s log line after a task ran: ``... - INFO - Task 'x' finished with status SUCCESS``.
TASK_FINISHED = re.compile(r"^\S+ - (?:INFO|ERROR) - Task '(?P<task>[^']+)' finished with status (?P<status>[A-Z]+)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TRACEBACK = "Traceback (most recent call last):"


def one_line_error(lines: list[str]) -> str:
    """The last exception in a task's output ``lines`` as ``Type: first line of message``.

    Without a traceback, the last non-empty line; ``""`` when the task printed nothing.
    """
    starts = [index for index, line in enumerate(lines) if line.startswith(_TRACEBACK)]
    if starts:
        for line in lines[starts[-1] + 1 :]:
            if line and not line[0].isspace():
                kind, _, message = line.partition(": ")
                short = kind.rsplit(".", 1)[-1]
                return f"{short}: {message.strip()}" if message.strip() else short
    rest = [line.strip() for line in lines if line.strip()]
    return rest[-1] if rest else ""


class _LineSink(io.TextIOBase):
    """A text stream that hands complete lines to a callback (what ``print`` and ``logging`` write)."""

    def __init__(self, on_line: Callable[[str], None]) -> None:
        super().__init__()
        self._on_line = on_line
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._pending += text
        *complete, self._pending = self._pending.split("\n")
        for line in complete:
            self._on_line(line)
        return len(text)

    def flush_pending(self) -> None:
        """Hands over a last line that has no newline yet."""
        if self._pending:
            self.write("\n")


class DemoConsole:
    """The demo's output: story lines to ``out`` (default ``sys.stdout``), every line to ``log_path`` (overwritten).

    ``verbose`` passes every captured line through to ``out``; ``clock`` gives seconds, for durations.
    """

    def __init__(
        self, log_path: Path, out: TextIO | None = None, verbose: bool = False, clock: Callable[[], float] = time.time
    ) -> None:
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("w", encoding="utf-8")
        self._out = out or sys.stdout
        self.verbose = verbose
        self._clock = clock
        self.task_count = 0
        self._started: dict[str, float] = {}
        self._task: str | None = None
        self._task_lines: deque[str] = deque(maxlen=KEPT_TASK_LINES)
        self._progress_at = 0.0
        self._next_fraction = 0
        #: Finished tasks in order: ``(task, status, seconds)``.
        self.finished: list[tuple[str, str, float]] = []
        #: The failed task and its one-line error, once a task failed.
        self.failure: tuple[str, str] | None = None

    # ---------------------------------------------------------------------------------------------- output
    def say(self, line: str) -> None:
        """A story line: on the terminal and in the log."""
        print(line, file=self._out, flush=True)
        self._log.write(f"[demo] {line}\n")
        self._log.flush()

    def _captured(self, raw: str) -> None:
        raw = raw.rstrip("\r").rsplit("\r", 1)[-1]  # progress bars redraw with \r: keep the last state only
        line = _ANSI.sub("", raw)
        self._log.write(line + "\n")
        if self.verbose:
            print(raw, file=self._out)
        started, finished = TASK_STARTED.match(line), TASK_FINISHED.match(line)
        if started:
            self._task_started(started["task"])
            return
        if finished and finished["task"] == self._task:
            self._task_finished(finished["task"], finished["status"])
            return
        if self._task is None:
            return
        line = line.removeprefix(_KFP_INDENT)
        self._task_lines.append(line)
        match = STEP_LINE.match(line)
        if match:
            self._training_progress(int(match["step"]), int(match["total"]), float(match["loss"]))

    def _training_progress(self, step: int, total: int, loss: float) -> None:
        now = self._clock()
        passed = sum(step >= fraction * total for fraction in PROGRESS_FRACTIONS)  # the fractions are increasing
        if passed <= self._next_fraction and now - self._progress_at < PROGRESS_SECONDS:
            return
        self._next_fraction = max(self._next_fraction, passed)
        self._progress_at = now
        self.say(f"      {self._task}: step {step}/{total} ({step / total:.0%}) loss {loss:.4f}")

    # ---------------------------------------------------------------------------------------------- tasks
    def _task_started(self, task: str) -> None:
        index = len(self.finished) + 1
        self._task, self._started[task] = task, self._clock()
        self._task_lines.clear()
        self._progress_at, self._next_fraction = self._clock(), 0
        self.say(f"[{index}/{self.task_count}] {task} started")

    def _task_finished(self, task: str, status: str) -> None:
        seconds = self._clock() - self._started.pop(task, self._clock())
        index = len(self.finished) + 1
        self.finished.append((task, status, seconds))
        self._task = None
        if status == "SUCCESS":
            self.say(f"[{index}/{self.task_count}] {task} done in {seconds:.1f}s")
            return
        error = one_line_error(list(self._task_lines)) or f"exited with status {status} and printed no error"
        self.failure = (task, error)
        self.say(f"[{index}/{self.task_count}] {task} FAILED after {seconds:.1f}s (full output: {self.log_path})")

    @contextlib.contextmanager
    def capture(self, task_count: int) -> Iterator[None]:
        """Routes ``sys.stdout``/``sys.stderr`` into the log and follows the ``task_count`` tasks (``[i/n]``)."""
        self.task_count = task_count
        sink = _LineSink(self._captured)
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                yield
        finally:
            sink.flush_pending()
            if self._task is not None:  # it raised before kfp.local logged its end: the failed task
                self._task_finished(self._task, "FAILURE")
            self._log.flush()

    def close(self) -> None:
        """Closes the log file."""
        self._log.close()
