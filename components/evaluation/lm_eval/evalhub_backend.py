"""``eval_backend=evalhub``: the step submits the evaluation to EvalHub's REST API and follows it.

API: EvalHub ``v1.0.1`` (OpenAPI document vendored as ``tests/specs/openapi/eval-hub.yaml``): ``POST
/api/v1/evaluations/jobs`` (``EvaluationJobConfig``: ``name``, ``model``, ``benchmarks[]`` with ``provider_id``,
``parameters``, ``test_data_ref``; ``hardware_config``), ``GET /api/v1/evaluations/jobs/{id}`` (``status.state``:
``pending``, ``running``, ``completed``, ``failed``, ``cancelled``, ``partially_failed``; ``results.benchmarks[]
.metrics``, ``results.test{score, threshold, pass}``, ``results.mlflow_experiment_url``) and ``DELETE
/api/v1/evaluations/jobs/{id}`` (cancel). Every request carries the namespace as the tenant header ``X-Tenant``
(``internal/eval_hub/server/execution_context.go``) and the pod's service-account token as bearer token (EvalHub sits
behind kube-rbac-proxy).

Client: plain ``requests`` (in the lock already) with a (connect, read) timeout per request, the project's retry
policy for transient errors, and an overall deadline. ``eval-hub-sdk`` 1.0.6 was measured and not used: its client
needs ``httpx`` (not in the lock) and ``pydantic-settings``, ships 616 KiB for the three calls made here, and retries
with its own loop rather than :mod:`components._common.retry`.

The model and the held-out tasks are on the workspace PVC, which each benchmark mounts read-only at ``/test_data``
(``test_data_ref.pvc``); the lm-eval provider gets the model's path as ``model.name`` and ``parameters.pretrained``
and the held-out task directory as ``parameters.include_path``.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from components._common.hardware_profiles import HardwareProfile

JOBS_PATH = "/api/v1/evaluations/jobs"
TENANT_HEADER = "X-Tenant"
PROVIDER = "lm_evaluation_harness"
TEST_DATA_PATH = "/test_data"
FINAL_STATES = ("completed", "failed", "cancelled", "partially_failed")
#: Seconds the cancel request may take (after the deadline, or within the pod's termination grace period).
CANCEL_BUDGET_SECONDS = 10.0
_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"  # noqa: S105 - a path, not a secret


class EvalHubError(RuntimeError):
    """EvalHub refused a request, did not answer in time, or the evaluation did not complete (one line)."""


def build_job_request(
    name: str,
    pvc_name: str,
    model_relative: str,
    model_digest: str,
    task_names: Sequence[str],
    heldout_tasks: Sequence[str],
    tasks_relative: str,
    options: Mapping[str, Any],
    profile: HardwareProfile | None,
    model_url: str = "",
) -> dict[str, Any]:
    """The ``EvaluationJobConfig`` (benchmarks form) evaluating the workspace model on the tasks."""
    model_path = f"{TEST_DATA_PATH}/{model_relative.strip('/')}"
    parameters: dict[str, Any] = {"batch_size": str(options.get("batch_size") or "1")}
    if options.get("limit") is not None:
        parameters["limit"] = options["limit"]
    if options.get("num_fewshot") is not None:
        parameters["num_fewshot"] = options["num_fewshot"]
    if options.get("apply_chat_template"):
        parameters["apply_chat_template"] = True
    test_data = {"pvc": {"claim_name": pvc_name}}
    benchmarks = []
    for task in [*task_names, *heldout_tasks]:
        benchmark = {"id": task, "provider_id": PROVIDER, "parameters": dict(parameters), "test_data_ref": test_data}
        if task in heldout_tasks:
            benchmark["parameters"]["include_path"] = f"{TEST_DATA_PATH}/{tasks_relative.strip('/')}"
        benchmarks.append(benchmark)
    model: dict[str, Any] = {
        "name": model_path,
        "parameters": {"pretrained": model_path, "weights_digest": model_digest},
    }
    if model_url:
        model["url"] = model_url
    body: dict[str, Any] = {"name": name, "tags": ["kfp-finetune"], "model": model, "benchmarks": benchmarks}
    if profile is not None:
        body["hardware_config"] = {"hardware_profile_name": profile.name}
    return body


def metric_directions(task_dir: Path | None) -> Callable[[str, str], bool | None]:
    """Whether higher is better, by (task, metric): the held-out YAMLs' ``metric_list``, else lm-eval's registry.

    EvalHub's results carry no direction per metric; lm-eval's results do (``higher_is_better``), and the
    comparison needs it.
    """
    import yaml

    class TaskLoader(yaml.SafeLoader):
        pass

    TaskLoader.add_multi_constructor("!", lambda loader, suffix, node: loader.construct_scalar(node))
    known: dict[tuple[str, str], bool] = {}
    for task_file in sorted(task_dir.glob("*.yaml")) if task_dir is not None else []:
        config = yaml.load(task_file.read_text(encoding="utf-8"), Loader=TaskLoader) or {}
        for entry in config.get("metric_list") or []:
            if "higher_is_better" in entry:
                known[(str(config.get("task")), str(entry["metric"]))] = bool(entry["higher_is_better"])

    def direction(task: str, metric: str) -> bool | None:
        if (task, metric) in known:
            return known[(task, metric)]
        from lm_eval.api.registry import is_higher_better

        try:
            return is_higher_better(metric)
        except Exception:  # noqa: BLE001 - a metric lm-eval does not know: no direction
            return None

    return direction


def lm_eval_results(job: Mapping[str, Any], direction: Callable[[str, str], bool | None]) -> dict[str, Any]:
    """The job's ``results.benchmarks[].metrics`` as lm-eval's results dict (``acc`` → ``acc,none``).

    ``higher_is_better`` comes from ``direction`` (:func:`metric_directions`). EvalHub's own verdict
    (``results.test``) and MLflow link are kept under ``evalhub``.
    """
    results = job.get("results") or {}
    converted: dict[str, Any] = {"results": {}, "configs": {}, "versions": {}, "higher_is_better": {}}
    for benchmark in results.get("benchmarks") or []:
        task, metrics, directions = str(benchmark.get("id")), {}, {}
        for key, value in (benchmark.get("metrics") or {}).items():
            metrics[key if "," in key else f"{key},none"] = value
            metric = key.partition(",")[0]
            if not metric.endswith("_stderr") and direction(task, metric) is not None:
                directions[metric] = direction(task, metric)
        converted["results"][task] = metrics
        converted["higher_is_better"][task] = directions
    converted["evalhub"] = {
        "job_id": (job.get("resource") or {}).get("id", ""),
        "state": (job.get("status") or {}).get("state", ""),
        "test": results.get("test") or {},
        "mlflow_experiment_url": results.get("mlflow_experiment_url", ""),
    }
    return converted


class EvalHubClient:
    """The three calls, each with a (connect, read) timeout, retried on transient errors, under an overall deadline."""

    def __init__(self, url: str, tenant: str, token: str, deadline: float, timeout: tuple[float, float] = (5.0, 30.0)):
        import requests

        self.url, self.deadline, self.timeout = url.rstrip("/"), deadline, timeout
        self.session = requests.Session()
        self.session.headers[TENANT_HEADER] = tenant
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def _call(self, method: str, path: str, deadline: float | None = None, **kwargs: Any) -> Any:
        import requests

        from components._common.retry import RetryPolicy, call_with_retries

        deadline = self.deadline if deadline is None else deadline

        def once() -> Any:
            left = deadline - time.monotonic()
            if left <= 0:
                raise EvalHubError(f"{method} {self.url}{path}: the evaluation's deadline passed")
            response = self.session.request(
                method, self.url + path, timeout=(self.timeout[0], min(self.timeout[1], left)), **kwargs
            )
            if response.status_code >= 500 or response.status_code == 429:
                raise ConnectionError(f"{response.status_code} {response.text[:120]}")
            if response.status_code >= 400:
                raise EvalHubError(
                    f"{method} {self.url}{path}: {response.status_code} {_message(response)}"
                    + (" (the step's service account needs access to EvalHub)" if response.status_code == 403 else "")
                )
            return response.json() if response.content else {}

        try:
            return call_with_retries(
                once,
                RetryPolicy(attempts=4, initial_delay_s=0.5, max_delay_s=5.0, jitter=0.1),
                retryable=lambda error: isinstance(
                    error, (ConnectionError, requests.ConnectionError, requests.Timeout)
                ),
            )
        except EvalHubError:
            raise
        except Exception as error:  # GaveUp and the last transient error
            raise EvalHubError(f"{method} {self.url}{path}: no answer ({error})") from None

    def submit(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /api/v1/evaluations/jobs``: the job resource (202)."""
        return self._call("POST", JOBS_PATH, json=dict(body))

    def get(self, job_id: str) -> dict[str, Any]:
        """``GET /api/v1/evaluations/jobs/{id}``."""
        return self._call("GET", f"{JOBS_PATH}/{job_id}")

    def cancel(self, job_id: str) -> None:
        """``DELETE /api/v1/evaluations/jobs/{id}`` (cancel, kept for inspection), with its own short budget.

        It runs when the deadline has passed or SIGTERM came: :data:`CANCEL_BUDGET_SECONDS` from now, never more.
        """
        self._call("DELETE", f"{JOBS_PATH}/{job_id}", deadline=time.monotonic() + CANCEL_BUDGET_SECONDS)


def _message(response: Any) -> str:
    try:
        return str(response.json().get("message") or response.text[:120])
    except ValueError:
        return response.text[:120]


def service_account_token(path: str = _TOKEN_FILE) -> str:
    """The pod's service-account token (``""`` outside a pod)."""
    return open(path, encoding="utf-8").read().strip() if os.path.isfile(path) else ""


def run_evalhub_job(
    client: EvalHubClient,
    body: Mapping[str, Any],
    poll_seconds: float,
    log: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Submits, follows until a final state and returns the completed job; SIGTERM cancels it.

    Raises:
        EvalHubError: The job ended ``failed``/``cancelled``/``partially_failed``, or the deadline passed.
    """
    from components.training.finetuning.cluster.signals import Cancelled, cancel_on_signals, signals_ignored

    job = client.submit(body)
    job_id = str((job.get("resource") or {}).get("id") or "")
    if not job_id:
        raise EvalHubError(f"POST {JOBS_PATH}: the answer names no resource.id")
    log(f"EvalHub job {job_id} (tenant {client.session.headers[TENANT_HEADER]}): {_state(job)}")
    try:
        with cancel_on_signals():
            while _state(job) not in FINAL_STATES:
                if time.monotonic() + poll_seconds > client.deadline:
                    client.cancel(job_id)
                    raise EvalHubError(f"EvalHub job {job_id}: still {_state(job)} at the deadline; cancelled")
                sleep(poll_seconds)
                seen = client.get(job_id)
                if _state(seen) != _state(job):
                    log(f"EvalHub job {job_id}: {_state(seen)}")
                job = seen
    except Cancelled as signal_name:
        log(f"cancelled ({signal_name}): cancelling EvalHub job {job_id}")
        with signals_ignored():  # a second SIGTERM must not interrupt the cancel
            client.cancel(job_id)
        raise
    if _state(job) != "completed":
        message = ((job.get("status") or {}).get("message") or {}).get("message", "")
        raise EvalHubError(f"EvalHub job {job_id} ended {_state(job)}: {message}")
    return job


def _state(job: Mapping[str, Any]) -> str:
    return str((job.get("status") or {}).get("state") or "")


def evaluation_name(model_relative: str) -> str:
    """The job's name: ``kfp-finetune-<hash of this pod and the model>``."""
    pod = os.environ.get("HOSTNAME", "lm-eval")
    return "kfp-finetune-" + hashlib.sha256(f"{pod}/{model_relative}".encode()).hexdigest()[:10]
