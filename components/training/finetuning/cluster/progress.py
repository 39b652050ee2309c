"""What the job runner logs while it follows a job: the metrics file it tails, the cluster's progress, one line."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from components.training.finetuning import contract

#: Where the ODH controller copies the JSON the rank-0 pod serves (:mod:`..pod.progress_server`).
TRAINER_STATUS_ANNOTATION = "trainer.opendatahub.io/trainerStatus"


class MetricsTail:
    """Reads the training code's metrics JSONL file (``""``: none) incrementally, normalising the records read."""

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


def trainer_status(job: Mapping[str, Any] | None) -> dict[str, Any]:
    """The job's progress as the cluster reports it: the ODH annotation's JSON object, else ``status.trainerStatus``."""
    job = job or {}
    text = ((job.get("metadata") or {}).get("annotations") or {}).get(TRAINER_STATUS_ANNOTATION)
    if text:
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict) and value:
            return value
    return dict((job.get("status") or {}).get("trainerStatus") or {})


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def status_record(status: Mapping[str, Any]) -> dict[str, Any]:
    """RHOAI's ``ProgressStatus`` or upstream's ``trainerStatus`` as a step record (``{}`` without a step)."""
    if isinstance(status.get("currentStep"), (int, float)):
        train = status.get("trainMetrics") or {}
        step, total, epoch = status["currentStep"], status.get("totalSteps"), status.get("currentEpoch")
        loss, lr = train.get("loss"), train.get("learning_rate")
    else:
        named = {str(m.get("name")): m.get("value") for m in status.get("metrics") or [] if isinstance(m, Mapping)}
        step = _float(named.get("current_step"))
        if step is None:
            return {}
        total, epoch = _float(named.get("total_steps")), _float(named.get("current_epoch"))
        loss, lr = _float(named.get("loss")), _float(named.get("learning_rate"))
    return {
        "step": int(step),
        "total_steps": int(total) if total else None,
        "epoch": epoch,
        "loss": loss,
        "lr": lr,
        "percent": status.get("progressPercentage"),
        "eta_seconds": status.get("estimatedRemainingSeconds"),
    }


def format_duration(seconds: float) -> str:
    """``1h02m03s`` or ``2m03s``."""
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m{rest % 60:02d}s" if hours else f"{rest // 60}m{rest % 60:02d}s"


#: The record's numbers a progress line shows, and how.
_SHOWN = {"epoch": "epoch {:.2f}", "loss": "loss {:.4f}", "lr": "lr {:.2e}", "tokens_per_second": "{:.0f} tok/s"}


def progress_line(phase: str, status: Mapping[str, Any], record: Mapping[str, Any]) -> str:
    """One line, e.g. ``Running | step 40/100 (40%) | loss 1.2345 | ETA 3m12s`` (``status`` wins over ``record``)."""
    parts = [phase]
    record = status_record(status) or record
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
    elif status:
        if status.get("progressPercentage") is not None:
            parts.append(f"{status['progressPercentage']}%")
        parts += [f"{metric.get('name')} {metric.get('value')}" for metric in status.get("metrics") or []]
        if status.get("estimatedRemainingSeconds") is not None:
            parts.append(f"ETA {format_duration(status['estimatedRemainingSeconds'])}")
    return " | ".join(parts)
