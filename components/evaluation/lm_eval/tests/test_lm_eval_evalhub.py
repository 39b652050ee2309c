"""The EvalHub client against the EvalHub server on 127.0.0.1: tenancy, states, cancellation, hostile answers."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from components.evaluation.lm_eval.evalhub_backend import (
    EvalHubClient,
    EvalHubError,
    build_job_request,
    lm_eval_results,
    run_evalhub_job,
)
from components.training.finetuning.cluster.signals import Cancelled
from tests.harness.evalhub_server import running_evalhub
from tests.harness.requests import remote_evaluation


def _body() -> dict:
    return build_job_request(remote_evaluation(name="kfp-finetune-x", task_names=("arc_easy",), batch_size="8"))


def _client(url: str, seconds: float = 20.0, tenant: str = "team-a") -> EvalHubClient:
    return EvalHubClient(url, tenant, "token", time.monotonic() + seconds, timeout=(1.0, 2.0))


@pytest.fixture
def hub(tmp_path):
    """The EvalHub server for the test; its jobs never complete unless a test says otherwise."""
    with running_evalhub({"ws": tmp_path}) as server:
        server.never_complete = True
        yield server


def test_the_request_follows_the_openapi_document_and_names_the_tenant(hub):
    job = _client(hub.url).submit(_body())
    assert job["status"]["state"] == "pending" and job["resource"]["tenant"] == "team-a"
    assert hub.requests[0].tenant == "team-a" and hub.requests[0].body["model"]["parameters"]["pretrained"] == (
        "/test_data/models/m"
    )
    with pytest.raises(EvalHubError, match="404"):  # another tenant does not see the job
        _client(hub.url, tenant="team-b").get(job["resource"]["id"])


def test_a_missing_tenant_header_is_refused_by_the_server(hub):
    import requests

    answer = requests.post(hub.url + "/api/v1/evaluations/jobs", json=_body(), timeout=5)
    assert answer.status_code == 400 and answer.json()["message_code"] == "missing_tenant_header"


def test_forbidden_is_one_line_naming_the_permission(hub):
    hub.forbidden = True
    with pytest.raises(EvalHubError) as refused:
        _client(hub.url).submit(_body())
    assert "403" in str(refused.value) and "service account" in str(refused.value) and "\n" not in str(refused.value)


def test_a_blackholed_server_ends_at_the_deadline(hub):
    hub.blackhole = True
    started = time.monotonic()
    with pytest.raises(EvalHubError, match="no answer|deadline"):
        _client(hub.url, seconds=3.0).submit(_body())
    assert time.monotonic() - started < 15


def test_a_job_that_never_completes_is_cancelled_at_the_deadline(hub):
    with pytest.raises(EvalHubError, match="at the deadline; cancelled"):
        run_evalhub_job(_client(hub.url, seconds=2.0), _body(), poll_seconds=0.2, log=print)
    assert [job["status"]["state"] for job in hub.jobs.values()] == ["cancelled"]


def test_sigterm_cancels_the_job(hub):
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        with pytest.raises(Cancelled):
            run_evalhub_job(_client(hub.url), _body(), poll_seconds=0.1, log=print)
    finally:
        timer.cancel()
    assert [job["status"]["state"] for job in hub.jobs.values()] == ["cancelled"]


def test_partially_failed_and_failed_jobs_are_errors(hub):
    hub.never_complete = False  # no model on the claim: lm_eval fails, the job ends "failed"
    with pytest.raises(EvalHubError, match="ended failed"):
        run_evalhub_job(_client(hub.url, seconds=120), _body(), poll_seconds=0.2, log=print)
    hub.partially_failed = True
    with pytest.raises(EvalHubError, match="ended partially_failed: 1 of 1 benchmarks failed"):
        run_evalhub_job(_client(hub.url), _body(), poll_seconds=0.2, log=print)


def test_results_become_lm_eval_results_with_directions():
    job = {
        "resource": {"id": "j1"},
        "status": {"state": "completed"},
        "results": {
            "benchmarks": [{"id": "arc_easy", "metrics": {"acc": 0.5, "acc_stderr": 0.1}}],
            "test": {"score": 0.5, "threshold": 0.4, "pass": True},
            "mlflow_experiment_url": "http://mlflow/x",
        },
    }
    results = lm_eval_results(job)
    assert results["results"] == {"arc_easy": {"acc,none": 0.5, "acc_stderr,none": 0.1}}
    assert results["higher_is_better"] == {"arc_easy": {"acc": True}}
    assert (
        results["evalhub"]["test"]["pass"] is True and results["evalhub"]["mlflow_experiment_url"] == "http://mlflow/x"
    )
