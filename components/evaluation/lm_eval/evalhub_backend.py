"""``eval_backend=evalhub``: a job of EvalHub's REST API ``v1.0.1`` (``tests/specs/openapi/eval-hub.yaml``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from components._common import retry
from components._common.namespace import SERVICE_ACCOUNT_DIR
from components.evaluation.lm_eval.custom_task import HELDOUT_HIGHER_IS_BETTER, HELDOUT_TASKS
from components.evaluation.lm_eval.remote_evaluation import RemoteEvaluation, check_same_location

JOBS_PATH = "/api/v1/evaluations/jobs"
TENANT_HEADER = "X-Tenant"
PROVIDER = "lm_evaluation_harness"
TEST_DATA_PATH = "/test_data"
FINAL_STATES = ("completed", "failed", "cancelled", "partially_failed")
#: Seconds the cancel request may take (after the deadline, or within the pod's termination grace period).
CANCEL_BUDGET_SECONDS = 10.0
#: Retries of a request that got no answer, 408, 429 or 5xx: 4 tries, 0.5 s backoff doubling to 5 s.
RETRY_POLICY = retry.RetryPolicy(attempts=4, initial_delay_s=0.5, max_delay_s=5.0)


class EvalHubError(RuntimeError):
    """EvalHub refused a request, did not answer in time, or the evaluation did not complete (one line)."""


def pod_path(relative: str) -> str:
    """Where a workspace-relative path appears to EvalHub's adapter (the workspace PVC at ``/test_data``)."""
    return f"{TEST_DATA_PATH}/{relative.strip('/')}"


#: Where EvalHub's adapter sees the held-out task directory: on the workspace, as any other path.
tasks_dir_in_pod = pod_path


def build_job_request(evaluation: RemoteEvaluation) -> dict[str, Any]:
    """The ``EvaluationJobConfig`` (benchmarks form) evaluating the workspace model on the tasks."""
    model_path = pod_path(evaluation.model_relative)
    arguments = evaluation.harness.lm_eval_arguments()
    parameters: dict[str, Any] = {"batch_size": str(arguments["batch_size"])}
    parameters |= {key: arguments[key] for key in ("limit", "num_fewshot") if arguments[key] is not None}
    if arguments["apply_chat_template"]:
        parameters["apply_chat_template"] = True
    test_data = {"pvc": {"claim_name": evaluation.pvc_name}}
    benchmarks = []
    for task in sorted(evaluation.task_names, key=lambda task: task in HELDOUT_TASKS):  # benchmarks, then held-out
        benchmark = {"id": task, "provider_id": PROVIDER, "parameters": dict(parameters), "test_data_ref": test_data}
        if task in HELDOUT_TASKS:
            benchmark["parameters"]["include_path"] = tasks_dir_in_pod(evaluation.tasks_relative)
        benchmarks.append(benchmark)
    model = {"name": model_path, "parameters": {"pretrained": model_path, "weights_digest": evaluation.model_digest}}
    body: dict[str, Any] = {"name": evaluation.name, "tags": ["kfp-finetune"], "model": model, "benchmarks": benchmarks}
    if evaluation.profile is not None:
        body["hardware_config"] = {"hardware_profile_name": evaluation.profile.name}
    return body


def lm_eval_results(job: Mapping[str, Any]) -> dict[str, Any]:
    """The job's ``results.benchmarks[].metrics`` as lm-eval's results; EvalHub's own under ``evalhub``."""
    from lm_eval.api.registry import is_higher_better

    results = job.get("results") or {}
    converted: dict[str, Any] = {"results": {}, "configs": {}, "versions": {}, "higher_is_better": {}}
    for benchmark in results.get("benchmarks") or []:
        task, metrics, directions = str(benchmark.get("id")), {}, {}
        for key, value in (benchmark.get("metrics") or {}).items():
            metrics[key if "," in key else f"{key},none"] = value
            metric = key.partition(",")[0]
            if metric.endswith("_stderr"):
                continue
            higher = HELDOUT_HIGHER_IS_BETTER.get(metric) if task in HELDOUT_TASKS else is_higher_better(metric)
            if higher is not None:
                directions[metric] = higher
        converted["results"][task] = metrics
        converted["higher_is_better"][task] = directions
    converted["evalhub"] = {
        "job_id": (job.get("resource") or {}).get("id", ""),
        "state": _state(job),
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

        deadline, where = self.deadline if deadline is None else deadline, f"{method} {self.url}{path}"

        def attempt() -> Any:
            left = max(deadline - time.monotonic(), 0.01)
            timeout = (min(self.timeout[0], left), min(self.timeout[1], left))
            response = self.session.request(method, self.url + path, timeout=timeout, **kwargs)
            response.raise_for_status()
            return response.json() if response.content else {}

        def transient(error: BaseException) -> bool:
            return isinstance(error, (requests.ConnectionError, requests.Timeout)) or retry.is_transient(error)

        try:
            return retry.call_with_retries(attempt, RETRY_POLICY, retryable=transient, deadline=deadline)
        except retry.GaveUp as error:
            raise EvalHubError(f"{where}: no answer, {error}") from None
        except requests.HTTPError as error:
            hint = " (the step's service account needs access to EvalHub)" if error.response.status_code == 403 else ""
            raise EvalHubError(f"{where}: {error.response.status_code} {_message(error.response)}{hint}") from None

    def submit(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /api/v1/evaluations/jobs``: the job resource (202)."""
        return self._call("POST", JOBS_PATH, json=dict(body))

    def get(self, job_id: str) -> dict[str, Any]:
        """``GET /api/v1/evaluations/jobs/{id}``."""
        return self._call("GET", f"{JOBS_PATH}/{job_id}")

    def cancel(self, job_id: str) -> None:
        """``DELETE /api/v1/evaluations/jobs/{id}`` (cancel), within :data:`CANCEL_BUDGET_SECONDS` from now."""
        self._call("DELETE", f"{JOBS_PATH}/{job_id}", deadline=time.monotonic() + CANCEL_BUDGET_SECONDS)


def _message(response: Any) -> str:
    try:
        return str(response.json().get("message") or response.text[:120])
    except ValueError:
        return response.text[:120]


def _state(job: Mapping[str, Any]) -> str:
    return str((job.get("status") or {}).get("state") or "")


def run_evalhub_job(
    client: EvalHubClient,
    body: Mapping[str, Any],
    poll_seconds: float,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Submits, follows until a final state and returns the completed job; SIGTERM or the deadline cancels it.

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
                time.sleep(poll_seconds)
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


def evaluate(api_client: Any, evaluation: RemoteEvaluation) -> tuple[dict[str, Any], str]:
    """Runs the evaluation's EvalHub job to its end; returns ``(lm-eval results, the model location it evaluated)``.

    Raises:
        WrongModelError: The job echoes another model (location or digest) than the one submitted.
    """
    token_file = Path(SERVICE_ACCOUNT_DIR) / "token"
    token = token_file.read_text(encoding="utf-8").strip() if token_file.is_file() else ""
    remote = evaluation.remote
    deadline = time.monotonic() + (remote.eval_timeout_seconds or 7 * 24 * 3600)
    client = EvalHubClient(remote.evalhub_url, evaluation.namespace, token, deadline)
    job = run_evalhub_job(client, build_job_request(evaluation), evaluation.poll_seconds, evaluation.log)
    submitted = pod_path(evaluation.model_relative)
    echoed = (job.get("model") or {}).get("parameters") or {}
    check_same_location(submitted, str(echoed.get("pretrained") or ""), f"EvalHub job {evaluation.name}")
    digest = str(echoed.get("weights_digest") or "")
    check_same_location(evaluation.model_digest, digest, f"EvalHub job {evaluation.name} (digest)")
    return lm_eval_results(job), submitted
