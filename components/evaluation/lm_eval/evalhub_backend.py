"""``eval_backend=evalhub``: the evaluation submitted to EvalHub's REST API (README: *Evaluation backends*).

API: EvalHub ``v1.0.1`` (OpenAPI document vendored as ``tests/specs/openapi/eval-hub.yaml``): ``POST``, ``GET`` and
``DELETE`` (cancel) of ``/api/v1/evaluations/jobs[/{id}]``, each with the namespace as tenant header ``X-Tenant`` and
the pod's service-account token (EvalHub sits behind kube-rbac-proxy). Client: plain ``requests`` with a per-request
timeout, a few retries and an overall deadline (``eval-hub-sdk`` 1.0.6 needs ``httpx``, not in the lock).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from components._common.hardware_profiles import HardwareProfile
from components._common.namespace import SERVICE_ACCOUNT_DIR
from components.evaluation.lm_eval.custom_task import HELDOUT_HIGHER_IS_BETTER, HELDOUT_TASKS

JOBS_PATH = "/api/v1/evaluations/jobs"
TENANT_HEADER = "X-Tenant"
PROVIDER = "lm_evaluation_harness"
TEST_DATA_PATH = "/test_data"
FINAL_STATES = ("completed", "failed", "cancelled", "partially_failed")
#: Seconds the cancel request may take (after the deadline, or within the pod's termination grace period).
CANCEL_BUDGET_SECONDS = 10.0
#: Attempts per request (transient errors: no answer, 429, 5xx), with backoff between them.
ATTEMPTS = 4


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
) -> dict[str, Any]:
    """The ``EvaluationJobConfig`` (benchmarks form) evaluating the workspace model on the tasks."""
    model_path = f"{TEST_DATA_PATH}/{model_relative.strip('/')}"
    parameters: dict[str, Any] = {"batch_size": str(options.get("batch_size") or "1")}
    for key in ("limit", "num_fewshot"):
        if options.get(key) is not None:
            parameters[key] = options[key]
    if options.get("apply_chat_template"):
        parameters["apply_chat_template"] = True
    test_data = {"pvc": {"claim_name": pvc_name}}
    benchmarks = []
    for task in [*task_names, *heldout_tasks]:
        benchmark = {"id": task, "provider_id": PROVIDER, "parameters": dict(parameters), "test_data_ref": test_data}
        if task in heldout_tasks:
            benchmark["parameters"]["include_path"] = f"{TEST_DATA_PATH}/{tasks_relative.strip('/')}"
        benchmarks.append(benchmark)
    model = {"name": model_path, "parameters": {"pretrained": model_path, "weights_digest": model_digest}}
    body: dict[str, Any] = {"name": name, "tags": ["kfp-finetune"], "model": model, "benchmarks": benchmarks}
    if profile is not None:
        body["hardware_config"] = {"hardware_profile_name": profile.name}
    return body


def higher_is_better(task: str, metric: str) -> bool | None:
    """A metric's direction (EvalHub's results carry none): the held-out tasks' own, else lm-eval's registry's."""
    if task in HELDOUT_TASKS:
        return HELDOUT_HIGHER_IS_BETTER.get(metric)
    from lm_eval.api.registry import is_higher_better

    return is_higher_better(metric)


def lm_eval_results(job: Mapping[str, Any]) -> dict[str, Any]:
    """The job's ``results.benchmarks[].metrics`` as lm-eval's results dict (``acc`` → ``acc,none``).

    EvalHub's own verdict (``results.test``) and MLflow link are kept under ``evalhub``.
    """
    results = job.get("results") or {}
    converted: dict[str, Any] = {"results": {}, "configs": {}, "versions": {}, "higher_is_better": {}}
    for benchmark in results.get("benchmarks") or []:
        task, metrics, directions = str(benchmark.get("id")), {}, {}
        for key, value in (benchmark.get("metrics") or {}).items():
            metrics[key if "," in key else f"{key},none"] = value
            metric = key.partition(",")[0]
            if not metric.endswith("_stderr") and higher_is_better(task, metric) is not None:
                directions[metric] = higher_is_better(task, metric)
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

        deadline, where, problem = self.deadline if deadline is None else deadline, f"{method} {self.url}{path}", ""
        for attempt in range(ATTEMPTS):
            left = deadline - time.monotonic()
            if left <= 0:
                raise EvalHubError(f"{where}: the evaluation's deadline passed" + (f" ({problem})" if problem else ""))
            timeout = (min(self.timeout[0], left), min(self.timeout[1], left))
            try:
                response = self.session.request(method, self.url + path, timeout=timeout, **kwargs)
            except (requests.ConnectionError, requests.Timeout) as error:
                problem = str(error)
            else:
                if response.status_code < 400:
                    return response.json() if response.content else {}
                status = response.status_code
                if status < 500 and status != 429:
                    hint = " (the step's service account needs access to EvalHub)" if status == 403 else ""
                    raise EvalHubError(f"{where}: {status} {_message(response)}{hint}")
                problem = f"{status} {response.text[:120]}"
            if attempt + 1 < ATTEMPTS:
                time.sleep(min(0.5 * 2**attempt, 5.0, max(0.0, deadline - time.monotonic())))
        raise EvalHubError(f"{where}: no answer ({problem})")

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


def evaluate_with_evalhub(
    url: str,
    namespace: str,
    pvc_name: str,
    name: str,
    model_relative: str,
    model_digest: str,
    task_names: Sequence[str],
    tasks_relative: str,
    options: Mapping[str, Any],
    profile: HardwareProfile | None,
    timeout_seconds: float,
    poll_seconds: float,
    log: Callable[[str], None],
) -> tuple[dict[str, Any], str]:
    """Runs the EvalHub job ``name`` to its end; returns ``(lm-eval results, the model location it evaluated)``.

    Raises:
        EvalHubError: See :func:`run_evalhub_job`.
        WrongModelError: The job echoes another model (location or digest) than the one submitted.
    """
    from components.evaluation.lm_eval.model_identity import check_same_location

    benchmarks = [task for task in task_names if task not in HELDOUT_TASKS]
    heldout = [task for task in task_names if task in HELDOUT_TASKS]
    body = build_job_request(
        name, pvc_name, model_relative, model_digest, benchmarks, heldout, tasks_relative, options, profile
    )
    token_file = Path(SERVICE_ACCOUNT_DIR) / "token"
    token = token_file.read_text(encoding="utf-8").strip() if token_file.is_file() else ""
    deadline = time.monotonic() + (timeout_seconds or 7 * 24 * 3600)
    job = run_evalhub_job(EvalHubClient(url, namespace, token, deadline), body, poll_seconds=poll_seconds, log=log)
    submitted = f"{TEST_DATA_PATH}/{model_relative}"
    echoed = (job.get("model") or {}).get("parameters") or {}
    check_same_location(submitted, str(echoed.get("pretrained") or ""), f"EvalHub job {name}")
    if echoed.get("weights_digest") != model_digest:
        check_same_location(model_digest, str(echoed.get("weights_digest") or ""), f"EvalHub job {name} (digest)")
    return lm_eval_results(job), submitted
