"""Training progress for the OpenShift AI dashboard: a small HTTP server in the rank-0 training pod.

The ODH controller polls it and copies the JSON (:class:`ProgressTracker`, from the metrics files of :mod:`.metrics`)
into the TrainJob's annotation; the percentage stays at most 99 until training has returned. Nothing here may break
training: a failure is logged once and training goes on. Standard library only.
"""

from __future__ import annotations

import collections
import functools
import json
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from components.training.finetuning.pod import metrics as metrics_module
from components.training.finetuning.pod import trainer_status as status_module

#: The progress record's readers, from :mod:`.trainer_status` (the cluster client reads them through this module).
trainer_status = status_module.trainer_status
status_record = status_module.status_record
TRAINER_STATUS_ANNOTATION = status_module.TRAINER_STATUS_ANNOTATION

TERMINATION_LOG = "/dev/termination-log"
INIT_LINE = "[Kubeflow] Initializing Training Hub progression tracking"
#: Raw metric names (any Training Hub backend) -> the ``trainMetrics`` key they fill; the first one present wins.
_TRAIN_METRIC_SOURCES = {
    "grad_norm": ("grad_norm", "gradnorm", "total_grad_norm"),
    "train_loss": ("train_loss",),
    # instructlab-training's overall_throughput is samples per second too
    "throughput_samples_sec": (
        "throughput_samples_sec",
        "train_samples_per_second",
        "samples_per_second",
        "overall_throughput",
    ),
}
_EVAL_ALIASES = {"val_loss": "eval_loss", "validation_loss": "eval_loss"}
#: Steps used to measure the time per step (recent ones only: a pause must not skew the ETA for long).
_ETA_WINDOW = 20
#: Metrics lines kept in memory.
_KEPT_LINES = 2000


class ProgressTracker:
    """Follows Training Hub's metrics JSONL incrementally and turns it into the dashboard's progress JSON.

    The step total is the run's own: ``max_steps`` when the run stops by steps, else the backend's total (LoRA's
    ``max_steps``) or its steps per epoch times the run's ``num_epochs``; before the first step is logged it is
    estimated from the dataset's rows and ``effective_batch_size``.

    Args:
        ckpt_dir: Training Hub's ``ckpt_output_dir``.
        algorithm: ``sft``, ``osft`` or ``lora`` (names the file, see ``metrics.TRAINING_HUB_METRICS_FILES``).
        total_epochs: The run's ``num_epochs``.
        effective_batch_size: Samples per step.
        max_steps: The run's ``max_steps`` (0: it stops by epochs).
        dataset_path: The training file, counted once when a total is first needed before the backend logs one.
        clock: Monotonic clock (the fallback ETA measures wall time between polls).
    """

    def __init__(
        self,
        ckpt_dir: Path,
        algorithm: str,
        total_epochs: int,
        effective_batch_size: int = 0,
        max_steps: int = 0,
        dataset_path: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ckpt_dir = Path(ckpt_dir)
        self.path = self.ckpt_dir / metrics_module.TRAINING_HUB_METRICS_FILES.get(algorithm, "")
        self.total_epochs = total_epochs
        self.effective_batch_size = effective_batch_size
        self.max_steps = max_steps
        self.dataset_path = dataset_path
        self.dataset_rows: int | None = None
        self.clock = clock
        self.finished = False
        self._tail = metrics_module.JsonlTail()
        # Recent lines only (a long run's log would otherwise stay in the training process's memory); the ETA needs
        # no more, and the latest extra metrics are kept as lines arrive.
        self._raw: collections.deque[dict[str, Any]] = collections.deque(maxlen=_KEPT_LINES)
        self._train_extra: dict[str, float] = {}
        self._eval: dict[str, float] = {}
        self._seen: collections.deque[tuple[float, int]] = collections.deque(maxlen=_ETA_WINDOW)
        self._lock = threading.Lock()

    def _metrics_file(self) -> Path | None:
        if self.path.is_file():
            return self.path
        try:
            self.path = metrics_module.find_metrics_file(self.ckpt_dir)
        except metrics_module.MetricsFileError:
            return None
        return self.path

    def _read_new_lines(self) -> None:
        path = self._metrics_file()
        if path is None:
            return
        for value in self._tail.read_new(path):
            self._raw.append(value)
            self._note_extra_metrics(value)

    def _total_steps(self, record: Mapping[str, Any]) -> int | None:
        if self.max_steps:
            return self.max_steps
        if record.get("total_steps"):
            return int(record["total_steps"])
        rows = (
            metrics_module.first_number(self._raw[-1], "total_samples") if self._raw else None
        )  # instructlab-training: the dataset
        if not rows and self.dataset_path and self.dataset_rows is None:
            self.dataset_rows = _rows(self.dataset_path)  # once, on the first poll (never delays training's start)
        rows = rows or self.dataset_rows
        if rows and self.effective_batch_size:
            return math.ceil(rows / self.effective_batch_size) * max(self.total_epochs, 1)
        return None

    def _seconds_per_step(self, records: list[dict[str, Any]]) -> float | None:
        recent = [r for r in records[-_ETA_WINDOW:] if isinstance(r.get("time"), (int, float))]
        if len(recent) >= 2 and recent[-1]["step"] > recent[0]["step"]:
            return max(recent[-1]["time"] - recent[0]["time"], 0.0) / (recent[-1]["step"] - recent[0]["step"])
        seen = list(self._seen)
        if len(seen) >= 2 and seen[-1][1] > seen[0][1]:
            return (seen[-1][0] - seen[0][0]) / (seen[-1][1] - seen[0][1])
        if recent and recent[-1]["step"] > 0:
            return recent[-1]["time"] / recent[-1]["step"]
        return None

    def _note_extra_metrics(self, raw: Mapping[str, Any]) -> None:
        for name, keys in _TRAIN_METRIC_SOURCES.items():
            if (value := metrics_module.first_number(raw, *keys)) is not None:
                self._train_extra[name] = value
        for key in raw:
            name = _EVAL_ALIASES.get(key, key)
            if name.startswith("eval_") and (value := metrics_module.first_number(raw, key)) is not None:
                self._eval[name] = value

    def status(self) -> status_module.ProgressStatus:
        """The progress JSON now (reads what was appended since the last call)."""
        with self._lock:
            self._read_new_lines()
            records = metrics_module.normalize_records(list(self._raw), self.total_epochs)
            # The newest step, not the last line: instructlab-training's writer may append lines out of order.
            record = max(records, key=lambda r: r["step"]) if records else {}
            step = int(record.get("step") or 0)
            if record and (not self._seen or self._seen[-1][1] != step):
                self._seen.append((self.clock(), step))
            total = self._total_steps(record)
            if self.finished:
                percentage, remaining = 100, 0
            elif total:
                percentage = min(99, max(0, int(100 * step / total)))
                per_step = self._seconds_per_step(records)
                remaining = None if per_step is None else max(0, round(per_step * (total - step)))
            else:
                percentage, remaining = 0, None
            if total and self.total_epochs:
                epoch = min(step / total, 1.0) * self.total_epochs
            else:
                epoch = float(record.get("epoch") or 0.0)
            train_metrics = {"loss": record.get("loss"), "learning_rate": record.get("lr"), **self._train_extra}
            return {
                "progressPercentage": percentage,
                "estimatedRemainingSeconds": remaining,
                "currentStep": step,
                "totalSteps": total,
                "currentEpoch": round(epoch, 4),
                "totalEpochs": self.total_epochs,
                "trainMetrics": {key: value for key, value in train_metrics.items() if value is not None},
                "evalMetrics": dict(self._eval),
            }

    def finish(self) -> status_module.ProgressStatus:
        """Marks training as returned (100 %, no time left) and returns the final JSON."""
        self.finished = True
        return self.status()


class _Handler(BaseHTTPRequestHandler):
    def __init__(self, server_ref: ProgressServer, *args: Any, **kwargs: Any) -> None:
        self.progress = server_ref
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:  # noqa: N802 - the http.server naming
        body = json.dumps(self.progress.current()).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence per-request access logs
        return


class ProgressServer:
    """Serves a :class:`ProgressTracker`'s JSON on every GET path, from a daemon thread; never raises.

    Args:
        tracker: The tracker.
        port: The TCP port (all interfaces: the controller connects to the pod IP).
        log: Where the initialisation line and the one warning go.
        host: The address to bind (``""``: all interfaces).
    """

    def __init__(self, tracker: ProgressTracker, port: int, log: Callable[[str], None] = print, host: str = ""):
        self.tracker = tracker
        self.port = port
        self.host = host
        self.log = log
        self.warned = False
        self.last: dict[str, Any] = {}
        self.httpd: ThreadingHTTPServer | None = None

    def warn_once(self, what: str, error: BaseException) -> None:
        """Logs the first failure only; training goes on either way."""
        if not self.warned:
            self.warned = True
            self.log(
                f"WARNING: progress tracking: {what} ({type(error).__name__}: {error}); training goes on, "
                "but the dashboard may show no progress"
            )

    def current(self) -> dict[str, Any]:
        """The tracker's JSON, or the last good one when building it failed."""
        try:
            self.last = self.tracker.status()
        except Exception as error:  # noqa: BLE001 - a progress report must never break training
            self.warn_once("reading the metrics file failed", error)
        return self.last

    def start(self) -> bool:
        """Binds the port and serves in a daemon thread; returns False (after one warning) when it cannot."""
        self.log(INIT_LINE)
        try:
            self.httpd = ThreadingHTTPServer((self.host, self.port), functools.partial(_Handler, self))
        except Exception as error:  # noqa: BLE001 - e.g. the port is taken
            self.warn_once(f"cannot serve on port {self.port}", error)
            return False
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, name="kfp-finetune-progress", daemon=True).start()
        self.log(f"[Kubeflow] Progression tracking enabled: serving training progress on port {self.port}")
        return True

    def stop(self, succeeded: bool, termination_log: str = TERMINATION_LOG) -> dict[str, Any]:
        """Publishes the final JSON (100 % when ``succeeded``), writes it to the termination log, stops serving."""
        try:
            final = self.tracker.finish() if succeeded else self.tracker.status()
            self.last = final
            if os.path.isfile(termination_log) and os.access(termination_log, os.W_OK):  # the container's own file
                Path(termination_log).write_text(json.dumps(final), encoding="utf-8")
        except Exception as error:  # noqa: BLE001
            self.warn_once("writing the final progress failed", error)
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None
        return self.last


def _rows(path: str | None) -> int:
    if not path or not os.path.isfile(path):
        return 0
    with open(path, "rb") as handle:
        return sum(1 for line in handle if line.strip())


class RunProgress:
    """What the rank-0 pod publishes while training runs: the dashboard's server and/or Kubeflow Trainer updates."""

    def __init__(self, tracker: ProgressTracker, server: ProgressServer | None, kubeflow: Any, log: Callable) -> None:
        self.tracker = tracker
        self.server = server
        self.kubeflow = kubeflow
        self.log = log

    def stop(self, succeeded: bool, termination_log: str = TERMINATION_LOG) -> dict[str, Any]:
        """Publishes the final progress (100 % when ``succeeded``) everywhere; never raises."""
        final: dict[str, Any] = {}
        if self.server is not None:
            final = self.server.stop(succeeded, termination_log)
        try:
            final = final or dict(self.tracker.finish() if succeeded else self.tracker.status())
            if self.kubeflow is not None:
                self.kubeflow.stop(final)
        except Exception as error:  # noqa: BLE001 - progress reporting must never fail the training
            self.log(f"WARNING: the final progress update failed ({type(error).__name__}: {error})")
        return final


def start_for_run(
    run_config: Any,
    node_rank: int,
    log: Callable[[str], None] = print,
    env: Mapping[str, str] | None = None,
) -> RunProgress | None:
    """Starts progress publishing for a run, on node rank 0 only.

    RHOAI's progress server (run config ``progress``: ``enabled``, ``port``) and, when the pod has Kubeflow
    Trainer's status variables, status updates there.

    Never raises: a failure is logged once and training goes on without it.

    Returns:
        The :class:`RunProgress`, or None (another node, nothing enabled, error).
    """
    settings = run_config.progress
    env = os.environ if env is None else env
    wants_kubeflow = bool(env.get(status_module.SERVER_URL_ENV))
    if node_rank != 0 or not (settings.enabled or wants_kubeflow):
        return None
    try:
        hp = run_config.hyperparameters
        tracker = ProgressTracker(
            Path(run_config.ckpt_output_dir),
            hp.algorithm,
            hp.num_epochs,
            hp.effective_batch_size,
            max_steps=hp.max_steps,
            dataset_path=run_config.data_path,
        )
        server = None
        if settings.enabled:
            server = ProgressServer(tracker, settings.port, log)
            server.start()  # when the port is taken it warns; stop() still writes the termination log
        kubeflow = status_module.start_reporting(env, node_rank, tracker.status, log)
        return RunProgress(tracker, server, kubeflow, log)
    except Exception as error:  # noqa: BLE001 - progress reporting must never stop training
        log(f"WARNING: progress tracking could not start ({type(error).__name__}: {error}); training goes on")
        return None
