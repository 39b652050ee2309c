"""MLflow tracking of a training run from rank 0: parameters, per-step metrics, the model location."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
EXPERIMENT_NAME_ENV = "MLFLOW_EXPERIMENT_NAME"
DEFAULT_EXPERIMENT_NAME = "kfp-finetune"
#: Variables that carry a process's rank (torchrun, Kubeflow ``PET_*``, plain launchers).
RANK_ENV_VARS = ("RANK", "PET_NODE_RANK", "NODE_RANK", "GROUP_RANK", "LOCAL_RANK")
RUN_KEY_TAG = "kfp_finetune.run_key"
MODEL_LOCATION_TAG = "kfp_finetune.model_location"
_NOT_METRICS = ("step", "total_steps")
_MAX_PARAM_LENGTH = 6000
_SECRET_NAME = re.compile(r"(?i)(token|password|passwd|secret|api_?key|credential)")
_URI_USER_INFO = re.compile(r"(//)[^/@\s]+@")


class TrackingError(RuntimeError):
    """The MLflow run could not be started (bad URI, unreachable or refusing server)."""


def mask_uri(text: str) -> str:
    """``text`` with the user info of URIs (``https://user:password@host``) masked."""
    return _URI_USER_INFO.sub(r"\1***@", text)


def is_rank_zero(environ: Mapping[str, str]) -> bool:
    """Whether every rank variable that is set (:data:`RANK_ENV_VARS`) is 0.

    Raises:
        ValueError: A rank variable is set to something other than a non-negative integer.
    """
    for name in RANK_ENV_VARS:
        value = environ.get(name, "").strip()
        if not value:
            continue
        if not value.isdigit():
            raise ValueError(f"environment variable {name}={value!r}: a rank must be a non-negative integer")
        if int(value) != 0:
            return False
    return True


def param_value(value: Any) -> str:
    """A value as MLflow parameter text: strings as they are, others as JSON, cut to MLflow's limit."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _MAX_PARAM_LENGTH else text[: _MAX_PARAM_LENGTH - 3] + "..."


def step_metrics(record: Mapping[str, Any]) -> tuple[int, dict[str, float]]:
    """The step and the numeric metrics of one record (``step`` and ``total_steps`` excluded).

    Raises:
        ValueError: The record has no integer ``step``.
    """
    step = record.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"metric record {dict(record)!r}: 'step' must be an integer >= 0")
    values = {
        key: float(value)
        for key, value in record.items()
        if key not in _NOT_METRICS and isinstance(value, (int, float)) and not isinstance(value, bool)
    }
    return step, values


class MlflowLogger:
    """Logs one training run to MLflow from rank 0; a no-op elsewhere or without a tracking URI.

    Failing to start raises :class:`TrackingError`; later failures warn once and switch tracking off.

    Args:
        tracking_uri: ``""`` reads ``MLFLOW_TRACKING_URI`` (unset: tracking off).
        experiment_name: Created when missing; ``""`` reads ``MLFLOW_EXPERIMENT_NAME``, else ``kfp-finetune``.
        run_name: The MLflow run name (``""``: MLflow picks one).
        run_key: E.g. ``<kfp run id>/<task name>``: the experiment's run tagged with it is continued.
        tags: More tags of the run.
        environ: The environment to read; defaults to ``os.environ``.
        log: Where notices and warnings go.
    """

    def __init__(
        self,
        tracking_uri: str = "",
        *,
        experiment_name: str = "",
        run_name: str = "",
        run_key: str = "",
        tags: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
        log: Callable[[str], None] = print,
    ) -> None:
        env = os.environ if environ is None else environ
        self.log = log
        self.run_id = ""
        self.client: Any = None
        self._total_steps_logged = False
        self.experiment_name = ""
        self.tracking_uri = (tracking_uri or env.get(TRACKING_URI_ENV, "")).strip()
        self.enabled = bool(self.tracking_uri) and is_rank_zero(env)
        if not self.enabled:
            self.tracking_uri = ""
            return
        experiment = experiment_name or env.get(EXPERIMENT_NAME_ENV, "") or DEFAULT_EXPERIMENT_NAME
        self.experiment_name = experiment
        source = "tracking_uri" if tracking_uri else TRACKING_URI_ENV
        try:
            self._start(experiment, run_name, run_key, dict(tags or {}))
        except Exception as error:
            raise TrackingError(
                f"MLflow ({source}={mask_uri(self.tracking_uri)!r}, experiment {experiment!r}): cannot start the run: "
                f"{mask_uri(f'{type(error).__name__}: {error}')[:500]}. Check the URI and the server, or unset it"
            ) from None
        log(f"MLflow: logging to run {self.run_id} of experiment {experiment!r} at {mask_uri(self.tracking_uri)}")

    def _start(self, experiment: str, run_name: str, run_key: str, tags: dict[str, str]) -> None:
        from mlflow import MlflowClient

        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        found = self.client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found is not None else self.client.create_experiment(experiment)
        if run_key:
            tags[RUN_KEY_TAG] = run_key
            previous = self.client.search_runs(
                [experiment_id],
                filter_string=f"tags.`{RUN_KEY_TAG}` = '{run_key.replace(chr(39), '')}'",
                order_by=["attributes.start_time DESC"],
                max_results=1,
            )
            if previous and previous[0].data.tags.get(RUN_KEY_TAG) == run_key:
                self.run_id = previous[0].info.run_id
                self.client.update_run(self.run_id, status="RUNNING")
                self.log(f"MLflow: continuing run {self.run_id} (run key {run_key!r})")
                return
        self.run_id = self.client.create_run(experiment_id, tags=tags, run_name=run_name or None).info.run_id

    def _call(self, what: str, func: Callable[[], Any]) -> None:
        if not self.enabled:
            return
        try:
            func()
        except Exception as error:  # noqa: BLE001 - tracking must never stop training: warn and switch it off
            self.enabled = False
            self.log(
                f"WARNING: MLflow: {what} failed ({mask_uri(f'{type(error).__name__}: {error}')[:300]}); "
                "tracking is off for the rest of this run"
            )

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Logs parameters (non-strings as JSON); names that look like secrets are skipped."""
        if not self.enabled:
            return
        from mlflow.entities import Param

        skipped = sorted(key for key in params if _SECRET_NAME.search(key))
        if skipped:
            self.log(f"MLflow: not logging parameters that look like secrets: {skipped}")
        batch = [Param(str(key), param_value(value)) for key, value in params.items() if key not in skipped]
        self._call("logging parameters", lambda: self.client.log_batch(self.run_id, params=batch))

    def log_step(self, record: Mapping[str, Any]) -> None:
        """Logs a metrics record at its step (``total_steps`` becomes a parameter the first time).

        Raises:
            ValueError: The record has no integer ``step`` (only while tracking is on).
        """
        if not self.enabled:
            return
        from mlflow.entities import Metric, Param

        step, values = step_metrics(record)
        now = int(time.time() * 1000)
        metrics = [Metric(key, value, now, step) for key, value in values.items()]
        params = []
        if isinstance(record.get("total_steps"), int) and not self._total_steps_logged:
            params = [Param("total_steps", str(record["total_steps"]))]
            self._total_steps_logged = True
        self._call(f"logging step {step}", lambda: self.client.log_batch(self.run_id, metrics=metrics, params=params))

    def log_model_location(self, uri: str) -> None:
        """Records where the trained model was saved (tag :data:`MODEL_LOCATION_TAG`)."""
        self._call(
            "recording the model location", lambda: self.client.set_tag(self.run_id, MODEL_LOCATION_TAG, str(uri))
        )

    def finish(self, status: str = "FINISHED") -> None:
        """Ends the run with ``FINISHED``, ``FAILED`` or ``KILLED``; later calls log nothing.

        Raises:
            ValueError: ``status`` is not one of the three.
        """
        if status not in ("FINISHED", "FAILED", "KILLED"):
            raise ValueError(f"status={status!r}: must be FINISHED, FAILED or KILLED")
        self._call(f"ending the run ({status})", lambda: self.client.set_terminated(self.run_id, status=status))
        self.enabled = False

    def __enter__(self) -> MlflowLogger:
        return self

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        """Ends the run: FINISHED, KILLED on ``SystemExit``/``KeyboardInterrupt``, FAILED on other exceptions."""
        killed = kind is not None and issubclass(kind, (SystemExit, KeyboardInterrupt))
        self.finish("FINISHED" if kind is None else "KILLED" if killed else "FAILED")
