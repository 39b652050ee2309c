"""Training progress for the OpenShift AI dashboard and Kubeflow Trainer, published by the rank-0 training pod.

:class:`ProgressTracker` follows the metrics file into the progress record; :class:`ProgressServer` serves it over
HTTP (polled by the ODH controller) and hands it to Kubeflow Trainer's status endpoint (:mod:`.trainer_status`).
"""

from __future__ import annotations

import collections
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

INIT_LINE = "[Kubeflow] Initializing Training Hub progression tracking"
#: ``trainMetrics`` key -> the raw metric names (any backend) that fill it; the first one present wins.
_TRAIN_METRIC_SOURCES = {
    "grad_norm": ("grad_norm", "gradnorm", "total_grad_norm"),
    "train_loss": ("train_loss",),
    "throughput_samples_sec": (
        "throughput_samples_sec",
        "train_samples_per_second",
        "samples_per_second",
        "overall_throughput",
    ),
}
_EVAL_ALIASES = {"val_loss": "eval_loss", "validation_loss": "eval_loss"}
_ETA_WINDOW = 20  # recent steps measure the time per step: a pause must not skew the ETA for long
_KEPT_LINES = 2000  # metrics lines kept in memory


class ProgressTracker:
    """Follows the metrics JSONL under ``ckpt_dir`` incrementally and turns it into the progress record.

    The step total is the run's ``max_steps``, else the backend's (or its steps per epoch x ``total_epochs``), else
    ``dataset_path``'s rows / ``effective_batch_size`` x epochs.
    """

    def __init__(
        self,
        ckpt_dir: Path,
        algorithm: str,
        total_epochs: int,
        effective_batch_size: int = 0,
        max_steps: int = 0,
        dataset_path: str | None = None,
    ) -> None:
        self.ckpt_dir = Path(ckpt_dir)
        self.path = self.ckpt_dir / metrics_module.TRAINING_HUB_METRICS_FILES.get(algorithm, "")
        self.total_epochs = total_epochs
        self.effective_batch_size = effective_batch_size
        self.max_steps = max_steps
        self.dataset_path = dataset_path
        self.dataset_rows: int | None = None
        self.finished = False
        self._tail = metrics_module.JsonlTail()
        self._raw: collections.deque[dict[str, Any]] = collections.deque(maxlen=_KEPT_LINES)
        self._train_extra: dict[str, float] = {}
        self._eval: dict[str, float] = {}
        self._seen: collections.deque[tuple[float, int]] = collections.deque(maxlen=_ETA_WINDOW)
        self._lock = threading.Lock()

    def _read_new_lines(self) -> None:
        if not self.path.is_file():
            try:
                self.path = metrics_module.find_metrics_file(self.ckpt_dir)
            except metrics_module.MetricsFileError:
                return
        for raw in self._tail.read_new(self.path):
            self._raw.append(raw)
            for name, keys in _TRAIN_METRIC_SOURCES.items():
                if (value := metrics_module.first_number(raw, *keys)) is not None:
                    self._train_extra[name] = value
            for key in raw:
                name = _EVAL_ALIASES.get(key, key)
                if name.startswith("eval_") and (value := metrics_module.first_number(raw, key)) is not None:
                    self._eval[name] = value

    def _total_steps(self, record: Mapping[str, Any]) -> int | None:
        if self.max_steps or record.get("total_steps"):
            return int(self.max_steps or record["total_steps"])
        rows = metrics_module.first_number(self._raw[-1], "total_samples") if self._raw else None  # instructlab
        if not rows and self.dataset_path and self.dataset_rows is None:  # once, on a poll: never delays training
            self.dataset_rows = _rows(self.dataset_path) if os.path.isfile(self.dataset_path) else 0
        rows = rows or self.dataset_rows
        if rows and self.effective_batch_size:
            return math.ceil(rows / self.effective_batch_size) * max(self.total_epochs, 1)
        return None

    def _seconds_per_step(self, records: list[metrics_module.StepRecord]) -> float | None:
        """From recent steps' logged times, else the wall time between polls, else the first step's time."""
        recent = [r for r in records[-_ETA_WINDOW:] if isinstance(r.get("time"), (int, float))]
        if len(recent) >= 2 and recent[-1]["step"] > recent[0]["step"]:
            return max(recent[-1]["time"] - recent[0]["time"], 0.0) / (recent[-1]["step"] - recent[0]["step"])
        seen = list(self._seen)
        if len(seen) >= 2 and seen[-1][1] > seen[0][1]:
            return (seen[-1][0] - seen[0][0]) / (seen[-1][1] - seen[0][1])
        if recent and recent[-1]["step"] > 0:
            return recent[-1]["time"] / recent[-1]["step"]
        return None

    def status(self) -> status_module.ProgressStatus:
        """The progress record now (reads what was appended since the last call)."""
        with self._lock:
            self._read_new_lines()
            records = metrics_module.normalize_records(list(self._raw), self.total_epochs)
            # The newest step, not the last line: instructlab-training's writer may append lines out of order.
            record = max(records, key=lambda r: r["step"]) if records else {}
            step = int(record.get("step") or 0)
            if record and (not self._seen or self._seen[-1][1] != step):
                self._seen.append((time.monotonic(), step))
            total = self._total_steps(record)
            percentage, remaining = 0, None
            if self.finished:
                percentage, remaining = 100, 0
            elif total:
                percentage = min(99, max(0, int(100 * step / total)))
                if (per_step := self._seconds_per_step(records)) is not None:
                    remaining = max(0, round(per_step * (total - step)))
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
        """Marks training as returned (100 %, no time left) and returns the final record."""
        self.finished = True
        return self.status()


class ProgressServer:
    """Publishes a :class:`ProgressTracker`'s record while training runs; never raises.

    Serves it on every GET path of every interface (``port`` None: no server) and hands it to ``kubeflow``;
    :meth:`stop` publishes the final record to both and to the termination log.
    """

    def __init__(
        self,
        tracker: ProgressTracker,
        port: int | None,
        log: Callable[[str], None] = print,
        kubeflow: status_module.KubeflowStatusReporter | None = None,
    ) -> None:
        self.tracker = tracker
        self.port = port
        self.log = log
        self.kubeflow = kubeflow
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
        """The tracker's record, or the last good one when building it failed."""
        try:
            self.last = dict(self.tracker.status())
        except Exception as error:  # noqa: BLE001 - a progress report must never break training
            self.warn_once("reading the metrics file failed", error)
        return self.last

    def start(self) -> bool:
        """Binds the port and serves in a daemon thread; returns False (after one warning) when it cannot."""
        if self.port is None:
            return False
        self.log(INIT_LINE)
        progress = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server naming
                body = json.dumps(progress.current()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - no per-request access logs
                return

        try:
            self.httpd = ThreadingHTTPServer(("", self.port), Handler)
        except Exception as error:  # noqa: BLE001 - e.g. the port is taken
            self.warn_once(f"cannot serve on port {self.port}", error)
            return False
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, name="kfp-finetune-progress", daemon=True).start()
        self.log(f"[Kubeflow] Progression tracking enabled: serving training progress on port {self.port}")
        return True

    def stop(self, succeeded: bool, termination_log: str = "") -> dict[str, Any]:
        """Publishes the final record (100 % when ``succeeded``) everywhere, stops serving; returns the record."""
        try:
            self.last = dict(self.tracker.finish() if succeeded else self.tracker.status())
            if self.port is not None and os.path.isfile(termination_log) and os.access(termination_log, os.W_OK):
                Path(termination_log).write_text(json.dumps(self.last), encoding="utf-8")  # the container's own file
        except Exception as error:  # noqa: BLE001
            self.warn_once("writing the final progress failed", error)
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None
        try:
            if self.kubeflow is not None:
                self.kubeflow.stop(self.last)
        except Exception as error:  # noqa: BLE001 - progress reporting must never fail the training
            self.warn_once("the final Kubeflow Trainer status update failed", error)
        return self.last


def _rows(path: str) -> int:
    with open(path, "rb") as handle:
        return sum(1 for line in handle if line.strip())


def start_for_run(
    run_config: Any, node_rank: int, log: Callable[[str], None] = print, env: Mapping[str, str] | None = None
) -> ProgressServer | None:
    """Starts the progress server and Kubeflow status updates (where enabled) on node rank 0; never raises.

    Returns:
        The started :class:`ProgressServer`, or None (another node, nothing enabled, error).
    """
    settings = run_config.progress
    env = os.environ if env is None else env
    if node_rank != 0 or not (settings.enabled or env.get(status_module.SERVER_URL_ENV)):
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
        kubeflow = status_module.start_reporting(env, node_rank, tracker.status, log)
        server = ProgressServer(tracker, settings.port if settings.enabled else None, log, kubeflow=kubeflow)
        server.start()  # when the port is taken it warns; stop() still writes the termination log
        return server
    except Exception as error:  # noqa: BLE001 - progress reporting must never stop training
        log(f"WARNING: progress tracking could not start ({type(error).__name__}: {error}); training goes on")
        return None
