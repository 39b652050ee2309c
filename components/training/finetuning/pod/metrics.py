"""Per-step training metrics: one typed record (:class:`StepRecord`), its writer, and readers of Training Hub's logs.

The layouts read: instructlab-training's (SFT), mini-trainer's (OSFT), the HF Trainer's (LoRA) and the project's own.
No SFT or OSFT line says how many epochs the run has: a step total needs the run's ``num_epochs``.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypedDict


class StepRecord(TypedDict):
    """One training step, whatever wrote it (None where the writer does not say; ``time``: since the first step)."""

    step: int
    epoch: float | None
    loss: float
    lr: float | None
    tokens_per_second: float | None
    time: float | None
    total_steps: int | None


RECORD_KEYS = tuple(StepRecord.__annotations__)
#: The project's trainer's metrics file (``local`` launcher, ``transformers`` backend).
LOCAL_METRICS_FILE = "metrics.jsonl"
#: The rank-0 metrics file Training Hub writes into ``ckpt_output_dir``, by ``train_model`` algorithm.
TRAINING_HUB_METRICS_FILES = {
    "sft": "training_params_and_metrics_global0.jsonl",
    "osft": "training_metrics_0.jsonl",
    "lora": "training_metrics.jsonl",
    "grpo": "training_metrics.jsonl",  # verl: step, loss (actor/pg_loss), mean_reward, ...
    "lora_grpo": "training_metrics.jsonl",
}
#: ART's results file (``lora_grpo`` backend ``art``): ``reward_history``, one mean reward per iteration.
GRPO_RESULTS_FILE = "training_results.json"
_LAYOUTS = (
    re.compile(r"training_params_and_metrics_global(\d+)\.jsonl"),
    re.compile(r"training_metrics_(\d+)\.jsonl"),
    re.compile(r"training_metrics()\.jsonl"),
    re.compile(r"metrics()\.jsonl"),
)


class MetricsFileError(ValueError):
    """A metrics file is missing or holds no step records."""


def append_record(path: Path, record: StepRecord | dict[str, Any]) -> None:
    """Appends one record (the keys of :data:`RECORD_KEYS`) as a JSON line and flushes it: readers follow the file."""
    with Path(path).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({key: record.get(key) for key in RECORD_KEYS}) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def find_metrics_file(directory: Path) -> Path:
    """The rank-0 metrics file under ``directory`` (recursively): the first known layout's, lowest rank first.

    Raises:
        MetricsFileError: No known metrics file is there.
    """
    directory = Path(directory)
    files = sorted(directory.rglob("*.jsonl")) if directory.is_dir() else []
    for layout in _LAYOUTS:
        matches = [(int(m.group(1) or 0), path) for path in files if (m := layout.fullmatch(path.name))]
        if matches:
            return min(matches)[1]
    names = ", ".join(layout.pattern.replace("\\", "") for layout in _LAYOUTS)
    raise MetricsFileError(f"no metrics file ({names}) under {directory}: did training start and log a step?")


def first_number(raw: Mapping[str, Any], *keys: str) -> Any:
    """The value of the first of ``keys`` in ``raw`` that is a finite number (not a bool), else None."""
    for key in keys:
        value = raw.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return value
    return None


def _timestamp(raw: dict[str, Any]) -> float | None:
    value = raw.get("timestamp")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.datetime.fromisoformat(value).timestamp()
        except ValueError:
            return None
    return None


def normalize_records(raw_records: Iterable[dict[str, Any]], num_epochs: int | None = None) -> list[StepRecord]:
    """Maps raw log lines of any layout (file order) to :class:`StepRecord` s; lines without a step loss are skipped."""
    records: list[StepRecord] = []
    start: float | None = None
    elapsed = 0.0
    for raw in raw_records:
        loss = first_number(raw, "loss", "avg_loss", "total_loss")
        step = first_number(raw, "step")
        if loss is None or step is None:
            continue
        seconds = first_number(raw, "time")
        if seconds is None and (stamp := _timestamp(raw)) is not None:
            start = stamp if start is None else start
            seconds = stamp - start
        if seconds is None and (batch_time := first_number(raw, "time_per_batch")) is not None:
            elapsed += batch_time
            seconds = elapsed
        total_steps = first_number(raw, "total_steps", "max_steps")
        per_epoch = first_number(raw, "steps_per_epoch", "num_epoch_steps")
        if total_steps is None and per_epoch is not None and num_epochs:
            total_steps = per_epoch * num_epochs
        tokens_per_second = first_number(raw, "tokens_per_second")
        records.append(
            {
                "step": int(step),
                "epoch": first_number(raw, "epoch"),
                "loss": float(loss),
                "lr": first_number(raw, "lr", "learning_rate"),
                "tokens_per_second": tokens_per_second,
                "time": seconds,
                "total_steps": None if total_steps is None else int(total_steps),
            }
        )
    return records


class JsonlTail:
    """Reads a JSONL file that is still being written (a line still being written waits; non-objects are skipped)."""

    def __init__(self) -> None:
        self.offset = 0
        self.partial = b""

    def read_new(self, path: Path) -> list[dict[str, Any]]:
        """The JSON objects of the lines completed in ``path`` since the last call."""
        with path.open("rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        records = []
        for line in lines:
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                records.append(value)
        return records


def _parse_lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as error:
                # A writer killed mid-line leaves a torn last line; anything earlier is corruption.
                if handle.read().strip():
                    raise MetricsFileError(f"{path}:{line_number}: not valid JSON ({error.msg})") from error
                return
            if isinstance(value, dict):
                yield value


def read_metrics(path: Path, num_epochs: int | None = None) -> list[StepRecord]:
    """The step records of a metrics file of any known layout, or of the one :func:`find_metrics_file` finds.

    Raises:
        MetricsFileError: The file is missing, corrupt before its last line, or has no step records.
    """
    path = Path(path)
    if path.is_dir():
        path = find_metrics_file(path)
    if not path.is_file():
        raise MetricsFileError(f"metrics file {path} does not exist")
    records = normalize_records(_parse_lines(path), num_epochs)
    if not records:
        raise MetricsFileError(f"{path} holds no step records (lines with 'step' and a loss)")
    return records


def read_reward_history(ckpt_dir: Path) -> list[float]:
    """The mean reward per iteration of a Training Hub GRPO run: ART's results file, else verl's lines (or ``[]``)."""
    results = Path(ckpt_dir) / GRPO_RESULTS_FILE
    if results.is_file():
        history = json.loads(results.read_text(encoding="utf-8")).get("reward_history") or []
        return [float(value) for value in history]
    lines = Path(ckpt_dir) / TRAINING_HUB_METRICS_FILES["grpo"]
    if not lines.is_file():
        return []
    return [float(raw["mean_reward"]) for raw in _parse_lines(lines) if first_number(raw, "mean_reward") is not None]
