"""Rank 0 reports progress to Kubeflow Trainer's status endpoint (``TrainJobRuntimeStatus``), as the SDK does.

A loopback HTTPS server plays the controller's endpoint; the Kubeflow SDK's own ``update_trainjob_status`` is sent to
it too, so the payloads are compared with what upstream sends.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import pytest

from components.training.finetuning.cluster.progress import progress_line, status_record
from components.training.finetuning.cluster.progress import trainer_status as cluster_status
from components.training.finetuning.pod import progress_server, trainer_status
from components.training.finetuning.tests.real_metrics_writers import write_metrics
from tests.harness.http_server import LoopbackServer, QuietHandler
from tests.harness.requests import pod_run_config
from tests.harness.tls import write_self_signed_certificate

TOKEN = "projected-sa-token-abc"
STATUS = {
    "progressPercentage": 50,
    "estimatedRemainingSeconds": 12,
    "currentStep": 10,
    "totalSteps": 20,
    "currentEpoch": 1.0,
    "totalEpochs": 2,
    "trainMetrics": {"loss": 1.25, "learning_rate": 2e-5, "grad_norm": 0.3},
    "evalMetrics": {"eval_loss": 1.5},
}


class StatusEndpoint:
    """Kubeflow Trainer's status endpoint: HTTPS with a test CA; 200 for the right bearer token, else 401."""

    def __init__(self, directory: Path, status: int = 200) -> None:
        self.bodies: list[dict] = []
        self.rejected = 0
        certificate, key = write_self_signed_certificate(directory, "trainer-status")
        self.ca_file = str(certificate)
        endpoint = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.body()
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    endpoint.rejected += 1
                    return self.reply(401)
                endpoint.bodies.append(json.loads(body))
                self.reply(status)

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificate, key)
        self.httpd = LoopbackServer(Handler, "trainer-status", tls=context)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}/apis/trainer/v1/status"

    def env(self, token_file: Path) -> dict[str, str]:
        token_file.write_text(TOKEN + "\n")
        return {
            trainer_status.SERVER_URL_ENV: self.url,
            trainer_status.CA_CERT_ENV: self.ca_file,
            trainer_status.TOKEN_ENV: str(token_file),
        }

    def close(self) -> None:
        self.httpd.stop()


@pytest.fixture
def endpoint(tmp_path):
    server = StatusEndpoint(tmp_path / "tls")
    yield server
    server.close()


def _without_time(body: dict) -> dict:
    status = dict(body["trainerStatus"])
    assert status.pop("lastUpdatedTime").endswith("+00:00")
    return status


def test_the_standard_library_payload_equals_the_sdks(endpoint, tmp_path, monkeypatch):
    from kubeflow.trainer.backends.kubernetes import utils as sdk

    env = endpoint.env(tmp_path / "token")
    ours = trainer_status.KubeflowStatusReporter(env, use_sdk=False, log=lambda line: None)
    assert ours.sdk is None and ours.report(STATUS)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sdk, "_last_update_time", 0.0)  # the SDK's process-wide throttle
    assert sdk.update_trainjob_status(
        progress_percent=50, estimated_remaining_seconds=12, metrics=trainer_status.kubeflow_metrics(STATUS)
    )
    ours_body, sdk_body = endpoint.bodies
    assert _without_time(ours_body) == _without_time(sdk_body)
    metrics = {m["name"]: m["value"] for m in ours_body["trainerStatus"]["metrics"]}
    assert metrics == {
        "loss": "1.25",
        "learning_rate": "2e-05",
        "grad_norm": "0.3",
        "eval_loss": "1.5",
        "current_step": "10",
        "total_steps": "20",
        "current_epoch": "1.0",
    }
    # Through the SDK where the image has it: the same body again.
    via_sdk = trainer_status.KubeflowStatusReporter(env, log=lambda line: None)
    monkeypatch.setattr(sdk, "_last_update_time", 0.0)
    assert via_sdk.sdk is sdk.update_trainjob_status and via_sdk.report(STATUS)
    assert _without_time(endpoint.bodies[-1]) == _without_time(sdk_body)


def test_throttled_to_one_update_per_five_seconds_and_the_final_one_waits(endpoint, tmp_path):
    now = [100.0]
    reporter = trainer_status.KubeflowStatusReporter(
        endpoint.env(tmp_path / "token"), use_sdk=False, clock=lambda: now[0], log=lambda line: None
    )
    assert reporter.report(STATUS)
    now[0] += 1
    assert not reporter.report({**STATUS, "currentStep": 11}) and len(endpoint.bodies) == 1
    now[0] += 4.5
    assert reporter.report({**STATUS, "currentStep": 12}) and len(endpoint.bodies) == 2


def test_a_failing_endpoint_never_fails_training_and_warns_once(tmp_path):
    lines: list[str] = []
    wrong_ca = StatusEndpoint(tmp_path / "a")
    other = StatusEndpoint(tmp_path / "b")
    try:
        env = wrong_ca.env(tmp_path / "token")
        env[trainer_status.CA_CERT_ENV] = other.ca_file  # a server the CA did not sign: TLS must refuse it
        reporter = trainer_status.KubeflowStatusReporter(env, use_sdk=False, log=lines.append)
        assert not reporter.report(STATUS) and wrong_ca.bodies == []
        env = wrong_ca.env(tmp_path / "token")
        (tmp_path / "token").write_text("stolen")
        refused = trainer_status.KubeflowStatusReporter(env, use_sdk=False, log=lines.append)
        assert not refused.report(STATUS) and wrong_ca.rejected == 1
        gone = {**env, trainer_status.SERVER_URL_ENV: "https://127.0.0.1:9/status"}
        assert not trainer_status.KubeflowStatusReporter(gone, use_sdk=False, log=lines.append).report(STATUS)
        missing_token = {**env, trainer_status.TOKEN_ENV: str(tmp_path / "nope")}
        assert not trainer_status.KubeflowStatusReporter(missing_token, use_sdk=False, log=lines.append).report(STATUS)
    finally:
        wrong_ca.close()
        other.close()
    assert len(lines) == 4 and all("training goes on" in line for line in lines)  # one per reporter that failed
    assert "401" in lines[1] and "nope" in lines[3]
    assert "CERTIFICATE_VERIFY_FAILED" in lines[0] and TOKEN not in "\n".join(lines)


@pytest.mark.slow
def test_rank_zero_reports_the_runs_progress_and_the_launcher_reads_it_back(endpoint, tmp_path):
    """The pod's tracker (real OSFT lines, 2 epochs) -> the endpoint -> status.trainerStatus -> the progress line."""
    ckpt = tmp_path / "ckpt"
    write_metrics("osft", ckpt, steps_per_epoch=5, epochs=2)
    run_config = pod_run_config(
        "osft",
        ckpt_output_dir=str(ckpt),
        data_path="",
        hyperparameters={"num_epochs": 2, "effective_batch_size": 16, "max_steps": 0},
    )
    env = endpoint.env(tmp_path / "token")
    assert progress_server.start_for_run(run_config, node_rank=1, env=env) is None
    lines: list[str] = []
    progress = progress_server.start_for_run(run_config, node_rank=0, env=env, log=lines.append)
    assert progress is not None and "via the" in lines[0]
    final = progress.stop(succeeded=True)
    assert final["progressPercentage"] == 100 and final["totalSteps"] == 10
    sent = endpoint.bodies[-1]["trainerStatus"]
    assert sent["progressPercentage"] == 100 and sent["estimatedRemainingSeconds"] == 0
    job = {"status": {"trainerStatus": {**sent, "progressPercentage": 60, "estimatedRemainingSeconds": 95}}}
    record = status_record(cluster_status(job))
    assert (record["step"], record["total_steps"], record["loss"]) == (10, 10, 1.6)
    assert progress_line("Running", cluster_status(job), {}) == (
        "Running | step 10/10 (60%) | epoch 2.00 | loss 1.6000 | lr 2.00e-05 | ETA 1m35s"
    )


def test_the_step_logs_the_progress_the_controller_stored_in_status_trainer_status(kube_api, endpoint, tmp_path):
    """kmock holds the TrainJob; the controller's part copies what rank 0 POSTed into ``status.trainerStatus``."""
    import time

    from components.training.finetuning.manifests.trainjob import build_trainjob
    from tests.harness.follow_doubles import Log
    from tests.harness.kube import condition, make_pod
    from tests.harness.requests import job_spec, run_job

    namespace = "team-a"
    spec = job_spec(run_id="0f3c", task_name="train-model", namespace=namespace, command=["python", "entrypoint.py"])
    manifest = build_trainjob(spec)
    name = manifest["metadata"]["name"]
    kube_api.create_runtime("training-hub")
    reporter = trainer_status.KubeflowStatusReporter(endpoint.env(tmp_path / "token"), use_sdk=False, log=print)
    assert reporter.report(STATUS)

    def controller():
        kube_api.wait_for(lambda: kube_api.objects("trainjobs", namespace))
        kube_api.put_pod(make_pod(namespace, name))
        time.sleep(0.15)
        kube_api.set_trainjob_status(namespace, name, endpoint.bodies[-1])  # {"trainerStatus": {...}}
        time.sleep(0.3)
        kube_api.set_trainjob_status(namespace, name, {"conditions": [condition("Complete")]})

    log = Log()
    with kube_api.in_background(controller):
        run_job(kube_api.api_client, manifest, start_timeout_seconds=20, timeout_seconds=30, poll_interval_seconds=0.05,
                log=log)  # fmt: skip
    assert f"[trainjob {name}] Running | step 10/20 (50%) | epoch 1.00 | loss 1.2500 | lr 2.00e-05 | ETA 0m12s" in log


def test_without_the_injected_status_server_no_status_reporting_is_attempted():
    """RHOAI 3.3-3.5 serve no status.trainerStatus and inject no status server: rank 0 reports nothing to it."""
    lines = []
    rhoai_3_3_pod = {"PET_NODE_RANK": "0", "PATH": "/usr/bin"}  # no KUBEFLOW_TRAINER_SERVER_* variables
    assert trainer_status.start_reporting(rhoai_3_3_pod, 0, lambda: STATUS, lines.append) is None
    assert lines == []
    upstream = {trainer_status.SERVER_URL_ENV: "https://127.0.0.1:9/status"}
    assert trainer_status.start_reporting(upstream, 1, lambda: STATUS, lines.append) is None  # rank 1 never reports
