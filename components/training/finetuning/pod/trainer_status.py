"""Rank 0's progress record, and its updates to Kubeflow Trainer's status endpoint (``status.trainerStatus``).

Through the Kubeflow SDK's ``update_trainjob_status`` where the image has it, else the standard library with the same
body, throttle and limits (RHOAI's training images need not have the SDK).
"""

from __future__ import annotations

import datetime
import json
import os
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, TypedDict

SERVER_URL_ENV = "KUBEFLOW_TRAINER_SERVER_URL"
CA_CERT_ENV = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
TOKEN_ENV = "KUBEFLOW_TRAINER_SERVER_TOKEN"
MIN_INTERVAL_SECONDS = 5.0  # the Kubeflow SDK's and transformers' throttle
MAX_METRICS = 256  # the SDK's limit on metrics per update


class ProgressStatus(TypedDict):
    """The progress of a run (RHOAI's progress JSON); the percentage stays at most 99 until training returned."""

    progressPercentage: int
    estimatedRemainingSeconds: int | None
    currentStep: int
    totalSteps: int | None
    currentEpoch: float
    totalEpochs: int
    trainMetrics: dict[str, float]
    evalMetrics: dict[str, float]


def kubeflow_metrics(status: Mapping[str, Any]) -> dict[str, float | int]:
    """The ``metrics`` of a Kubeflow status update, named as transformers' ``KubeflowCallback`` names them."""
    values: dict[str, float | int] = {**(status.get("trainMetrics") or {}), **(status.get("evalMetrics") or {})}
    values["current_step"] = status.get("currentStep") or 0
    if status.get("totalSteps"):
        values["total_steps"] = status["totalSteps"]
    if status.get("currentEpoch") is not None:
        values["current_epoch"] = round(float(status["currentEpoch"]), 2)
    return values


def kubeflow_payload(status: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body the Kubeflow SDK's ``update_trainjob_status`` POSTs for ``status`` (same fields and rules)."""
    trainer: dict[str, Any] = {"lastUpdatedTime": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    if status.get("progressPercentage") is not None:
        trainer["progressPercentage"] = max(0, min(100, int(status["progressPercentage"])))
    if status.get("estimatedRemainingSeconds") is not None:
        trainer["estimatedRemainingSeconds"] = max(0, int(status["estimatedRemainingSeconds"]))
    if metrics := list(kubeflow_metrics(status).items())[:MAX_METRICS]:
        trainer["metrics"] = [{"name": str(name), "value": str(value)} for name, value in metrics]
    return {"trainerStatus": trainer}


class KubeflowStatusReporter:
    """Sends progress to Kubeflow Trainer's status endpoint from rank 0; never raises (``use_sdk=False``: stdlib)."""

    def __init__(
        self,
        env: Mapping[str, str],
        use_sdk: bool = True,
        clock: Callable[[], float] = time.monotonic,
        log: Callable[[str], None] = print,
    ) -> None:
        self.url, self.ca_file, self.token_file = (
            env.get(name, "") for name in (SERVER_URL_ENV, CA_CERT_ENV, TOKEN_ENV)
        )
        self.sdk: Callable[..., bool] | None = None
        try:
            from kubeflow.trainer import update_trainjob_status

            self.sdk = update_trainjob_status if use_sdk else None
        except Exception:  # noqa: BLE001 - no SDK in the image (or a broken one): the standard-library path
            pass
        self.clock = clock
        self.log = log
        self.warned = False
        self._last_sent: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def warn_once(self, what: str) -> None:
        """Logs the first failure only; training goes on either way."""
        if not self.warned:
            self.warned = True
            self.log(f"WARNING: Kubeflow Trainer status update failed ({what}); training goes on")

    def _post(self, status: Mapping[str, Any]) -> bool:
        """The SDK's request with the standard library (the projected token is read each time: it rotates)."""
        try:
            with open(self.token_file, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as error:
            self.warn_once(f"cannot read the token file {self.token_file}: {error.strerror}")
            return False
        if not token:
            return False
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        body = json.dumps(kubeflow_payload(status)).encode()
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        context = ssl.create_default_context(cafile=self.ca_file if os.path.exists(self.ca_file) else None)
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as response:
                return response.status == 200
        except Exception as error:  # noqa: BLE001 - a status update must never break training
            self.warn_once(f"{type(error).__name__}: {error}")
            return False

    def _send_with_sdk(self, status: Mapping[str, Any]) -> bool:
        try:
            return bool(
                self.sdk(
                    progress_percent=status.get("progressPercentage"),
                    estimated_remaining_seconds=status.get("estimatedRemainingSeconds"),
                    metrics=kubeflow_metrics(status),
                )
            )
        except Exception as error:  # noqa: BLE001 - the SDK says it never raises; be sure
            self.warn_once(f"{type(error).__name__}: {error}")
            return False

    def report(self, status: Mapping[str, Any], force: bool = False) -> bool:
        """Sends ``status`` unless throttled (``force``: waits); returns whether the endpoint accepted it."""
        if not self.url:
            return False
        if self._last_sent is not None and (wait := MIN_INTERVAL_SECONDS - (self.clock() - self._last_sent)) > 0:
            if not force:
                return False
            time.sleep(wait)  # the SDK throttles the same way
        accepted = self._send_with_sdk(status) if self.sdk is not None else self._post(status)
        if force and not accepted and self.sdk is not None:  # the SDK's process-wide throttle may drop the final one
            accepted = self._post(status)
        self._last_sent = self.clock()
        return accepted

    def start(self, source: Callable[[], Mapping[str, Any]]) -> KubeflowStatusReporter:
        """Reports ``source()`` every :data:`MIN_INTERVAL_SECONDS` from a daemon thread until :meth:`stop`."""

        def run() -> None:
            while not self._stop.wait(MIN_INTERVAL_SECONDS):
                try:
                    self.report(source())
                except Exception as error:  # noqa: BLE001 - never break training
                    self.warn_once(f"{type(error).__name__}: {error}")

        self._thread = threading.Thread(target=run, name="kfp-finetune-kubeflow-status", daemon=True)
        self._thread.start()
        return self

    def stop(self, final: Mapping[str, Any]) -> bool:
        """Stops the thread and sends ``final`` (waiting out the throttle)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        return self.report(final, force=True)


def start_reporting(
    env: Mapping[str, str], node_rank: int, source: Callable[[], Mapping[str, Any]], log: Callable[[str], None] = print
) -> KubeflowStatusReporter | None:
    """Starts reporting ``source()`` to Kubeflow Trainer when its variables are set and this is node rank 0."""
    if not env.get(SERVER_URL_ENV) or node_rank != 0:
        return None
    reporter = KubeflowStatusReporter(env, log=log)
    via = "the Kubeflow SDK" if reporter.sdk else "the standard library"
    log(f"[Kubeflow] Reporting training progress to {env[SERVER_URL_ENV]} (via {via})")
    return reporter.start(source)
