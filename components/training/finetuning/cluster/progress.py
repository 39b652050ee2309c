"""What the job runner logs while it follows a job: the metrics file it tails and the one-line progress it prints."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from components.training.finetuning import contract


class MetricsTail:
    """Reads the training code's metrics JSONL file incrementally (records appended while training runs).

    Args:
        path: The file (``""``: none).
        normalize: Maps all raw records read so far to step records (default: those with a numeric ``step``).
    """

    def __init__(self, path: str, normalize: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None):
        self.path = Path(path) if path else None
        self.normalize = normalize or (lambda raw: [r for r in raw if isinstance(r.get("step"), (int, float))])
        self.tail = contract.JsonlTail()
        self.raw: list[dict[str, Any]] = []
        self.last: dict[str, Any] = {}

    def poll(self) -> dict[str, Any]:
        """Reads what was appended since the last call; returns the newest step record (``{}`` while none)."""
        if self.path is None or not self.path.is_file():
            return self.last
        read_before = self.tail.offset
        self.raw.extend(self.tail.read_new(self.path))
        if self.tail.offset == read_before:  # nothing appended since the last call
            return self.last
        records = self.normalize(self.raw)
        if records:
            self.last = dict(records[-1])
        return self.last


def format_duration(seconds: float) -> str:
    """``1h02m03s`` or ``2m03s``."""
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m{rest % 60:02d}s" if hours else f"{rest // 60}m{rest % 60:02d}s"


#: The record's numbers a progress line shows, and how.
_SHOWN = {"epoch": "epoch {:.2f}", "loss": "loss {:.4f}", "lr": "lr {:.2e}", "tokens_per_second": "{:.0f} tok/s"}


def progress_line(phase: str, trainer_status: Mapping[str, Any], record: Mapping[str, Any]) -> str:
    """One progress line, e.g. ``Running | step 40/100 (40%) | epoch 0.80 | loss 1.2345 | lr 2.00e-05 | ETA 3m12s``.

    The trainer status (:func:`~..contract.trainer_status`) wins over the metrics-file ``record`` when it
    carries steps; upstream Kubeflow Trainer's shape (percentage, ``metrics``) is shown only when there is no record.
    """
    parts = [phase]
    record = contract.status_record(trainer_status) or record
    if record:
        step, total = record.get("step"), record.get("total_steps")
        percent = record.get("percent")
        if total:
            shown = percent if isinstance(percent, (int, float)) else round(100 * step / total)
            parts.append(f"step {step}/{total} ({shown:.0f}%)")
        else:
            parts.append(f"step {step}")
        for key, fmt in _SHOWN.items():
            if isinstance(record.get(key), (int, float)):
                parts.append(fmt.format(record[key]))
        elapsed, eta = record.get("time"), record.get("eta_seconds")
        if isinstance(eta, (int, float)) and eta > 0:
            parts.append(f"ETA {format_duration(eta)}")
        elif total and step and isinstance(elapsed, (int, float)) and step < total:
            parts.append(f"ETA {format_duration(elapsed / step * (total - step))}")
    elif trainer_status:
        if trainer_status.get("progressPercentage") is not None:
            parts.append(f"{trainer_status['progressPercentage']}%")
        parts += [f"{metric.get('name')} {metric.get('value')}" for metric in trainer_status.get("metrics") or []]
        if trainer_status.get("estimatedRemainingSeconds") is not None:
            parts.append(f"ETA {format_duration(trainer_status['estimatedRemainingSeconds'])}")
    return " | ".join(parts)
