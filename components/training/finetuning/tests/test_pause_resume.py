"""Pause and resume: a user suspends the running job mid-follow (the dashboard's Pause), then resumes it.

On kmock, for a TrainJob and a PyTorchJob, on a fake clock whose ``sleep`` plays the cluster's and the user's part.
"""

import dataclasses
import json

import pytest

from components.training.finetuning.cluster.errors import JobFailed
from components.training.finetuning.cluster.progress import TRAINER_STATUS_ANNOTATION
from components.training.finetuning.manifests.pytorchjob import build_pytorchjob
from components.training.finetuning.manifests.trainjob import build_trainjob
from components.training.finetuning.tests.cluster_doubles import (
    NS,
    Kind,
    at,
    poll,
    pytorchjob_kind,
    spec,
    trainjob_kind,
    workspace_task_config,
)
from tests.harness.follow_doubles import FakeClock
from tests.harness.kube import condition

SPEC = spec(image="quay.io/example/trainer:1")
KINDS = {"trainjob": trainjob_kind(build_trainjob(SPEC)), "pytorchjob": pytorchjob_kind(build_pytorchjob(SPEC))}
NAME = KINDS["trainjob"].manifest["metadata"]["name"]


@dataclasses.dataclass
class Job:
    """The user's and the controller's hands on one job."""

    kube_api: object
    kind: Kind

    def start_pod(self):
        self.kube_api.put_pod(self.kind.pod())

    def pause(self):  # the dashboard's Pause: spec.suspend=true; the controller reports Suspended, pods go away
        self.kind.patch(self.kube_api, self.kind.suspend_body(True))
        self.kind.set_status(
            self.kube_api, {"conditions": [condition("Suspended", "Suspended", "the job is suspended")]}
        )

    def resume(self):
        self.kind.patch(self.kube_api, self.kind.suspend_body(False))
        self.kind.set_status(self.kube_api, {"conditions": [condition("Suspended", "Resumed", "", status="False")]})

    def report_progress(self):  # the ODH controller copies the rank-0 pod's progress JSON into an annotation
        status = {
            "progressPercentage": 60,
            "estimatedRemainingSeconds": 40,
            "currentStep": 6,
            "totalSteps": 10,
            "currentEpoch": 0.6,
            "totalEpochs": 1,
            "trainMetrics": {"loss": 0.75, "learning_rate": 2e-5},
            "evalMetrics": {},
        }
        self.kind.patch(self.kube_api, {"metadata": {"annotations": {TRAINER_STATUS_ANNOTATION: json.dumps(status)}}})

    def complete(self):
        self.kind.complete(self.kube_api)


@pytest.fixture(params=list(KINDS))
def job(kube_api, request):
    kube_api.create_runtime("training-hub")
    return Job(kube_api, KINDS[request.param])


def _follow(job, clock, log, **options):
    return poll(
        job.kube_api, job.kind.manifest, clock, log.append, start_timeout_seconds=120, timeout_seconds=300, **options
    )


def test_a_paused_job_is_waited_for_and_followed_to_the_end_after_resume(job):
    steps = [(10, job.start_pod), (30, job.pause), (400, job.resume), (420, job.report_progress), (440, job.complete)]
    clock = FakeClock(at(steps))
    log = []
    result = _follow(job, clock, log)
    text = "\n".join(log)
    assert result.duration_seconds == 440  # longer than timeout_seconds=300: the pause of 6m10s did not count
    assert f"[{job.kind.name} {NAME}] paused: the job was suspended" in text
    assert "(the pause does not count against timeout_seconds)" in text
    assert f"[{job.kind.name} {NAME}] resumed after a pause of 6m10s: following the resumed run" in text
    # The progress the dashboard shows (trainerStatus annotation) is what the step logs once resumed.
    progress = "step 6/10 (60%) | epoch 0.60 | loss 0.7500 | lr 2.00e-05 | ETA 0m40s"
    assert f"[{job.kind.name} {NAME}] Running | {progress}" in log
    assert result.last_progress["currentStep"] == 6
    assert len([line for line in log if "paused:" in line]) == 1  # logged once, not at every poll
    (left,) = job.kube_api.objects(job.kind.plural, NS)  # the job was neither deleted nor re-suspended by the step
    assert not [r for r in job.kube_api.requests if r.verb in ("delete", "patch")]
    assert left["metadata"]["name"] == NAME


def test_a_pause_counts_against_the_timeout_only_when_asked(job):
    clock = FakeClock(at([(10, job.start_pod), (30, job.pause)]))
    log = []
    with pytest.raises(JobFailed) as failure:
        _follow(job, clock, log, timeout_counts_paused_time=True)
    assert failure.value.diagnosis.outcome == "Timeout" and clock.now == 300
    assert "(the pause counts against timeout_seconds)" in "\n".join(log)
    assert job.kube_api.objects(job.kind.plural, NS) == []  # cleanup_policy=delete after the timeout


# -- the whole train_model step: paused mid-follow, resumed, the pod continues from its JIT checkpoint ---------------
STAND_IN_HUB = '''
"""training-hub's osft as the resumed pod sees it: records the call, writes the final model and the metrics log."""
import json, os, shutil
from pathlib import Path

def osft(**kwargs):  # no named parameter: the pod cannot tell what it takes, so it passes every keyword (a note)
    Path(os.environ["FAKE_HUB_CALLS"]).write_text(json.dumps(kwargs))
    out = Path(kwargs["ckpt_output_dir"])
    shutil.copytree(kwargs["model_path"], out / "hf_format" / "samples_64.0")
    with open(out / "training_metrics_0.jsonl", "a") as handle:
        for step, loss in ((3, 1.25), (4, 1.2)):
            handle.write(json.dumps({"step": step, "epoch": 0, "steps_per_epoch": 4, "lr": 1e-5, "loss": loss}) + "\\n")
'''


@pytest.mark.slow
def test_the_train_model_step_logs_the_pause_and_completes_the_resumed_run(
    kube_api, tiny_model_dir, demo_dataset_path, tmp_path
):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from kfp import dsl

    from components.training.finetuning.run import run_train_model
    from tests.harness.requests import train_model_request

    kube_api.create_runtime("training-hub")
    workspace = tmp_path / "kfp-workspace"
    task_config = workspace_task_config(workspace)
    hub = tmp_path / "hub" / "training_hub"
    hub.mkdir(parents=True)
    (hub / "__init__.py").write_text(STAND_IN_HUB)
    logged, seen = [], {}

    def cluster_and_user():
        (created,) = kube_api.wait_for(lambda: kube_api.objects("trainjobs", NS), timeout=60)
        job = Job(kube_api, trainjob_kind(created))
        run_dir = Path(created["spec"]["trainer"]["args"][1]).parent
        job.start_pod()
        kube_api.wait_for(lambda: any("Running" in line for line in logged), timeout=60)
        # The first pod trained two steps; Pause: SIGTERM made Training Hub save a JIT checkpoint, then the pods went.
        metrics_log = run_dir / "checkpoints" / "training_metrics_0.jsonl"
        metrics_log.parent.mkdir(parents=True, exist_ok=True)
        metrics_log.write_text(
            "".join(
                json.dumps({"step": s, "epoch": 0, "steps_per_epoch": 4, "loss": v}) + "\n"
                for s, v in ((1, 2.0), (2, 1.5))
            )
        )
        jit = run_dir / "checkpoints" / "full_state_checkpoints" / "step_2"
        jit.mkdir(parents=True)
        (jit / "training_state.pt").write_bytes(b"state")
        job.pause()
        kube_api.wait_for(lambda: any("paused:" in line for line in logged), timeout=60)
        job.resume()
        kube_api.wait_for(lambda: any("resumed after a pause" in line for line in logged), timeout=60)
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(hub.parent), "FAKE_HUB_CALLS": str(tmp_path / "call.json")}
        trainer = created["spec"]["trainer"]
        pod = subprocess.run(
            [sys.executable, *trainer["command"][1:], *trainer["args"]],
            env={**env, "PET_NODE_RANK": "0"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        seen["pod"] = pod.stdout + pod.stderr
        assert pod.returncode == 0, seen["pod"]
        job.complete()

    data = tmp_path / "in" / "train.jsonl"
    data.parent.mkdir()
    data.write_text(demo_dataset_path.read_text())
    outputs = {
        name: cls(uri=str(tmp_path / "out" / name))
        for name, cls in (("model", dsl.Model), ("metrics", dsl.Metrics), ("report", dsl.HTML))
    }
    (tmp_path / "out").mkdir()
    with kube_api.in_background(cluster_and_user):
        run_train_model(
            train_model_request(
                dataset=dsl.Dataset(uri=str(data)),
                task_config=task_config,
                training_base_model=str(tiny_model_dir),
                training_algorithm="osft",
                training_launcher="trainjob",
                training_namespace=NS,
                pvc_path=str(workspace),
                run_id="run-pause",
                task_name="train-model",
                training_timeout_seconds=3600,
                training_progress_metrics_port=28112,
            ),
            **outputs,
            api_client=kube_api.api_client,
            log=logged.append,
            job_options={"poll_interval_seconds": 0.1},
        )
    text = "\n".join(logged)
    assert "paused: the job was suspended" in text and "resumed after a pause of" in text
    call = json.loads((tmp_path / "call.json").read_text())
    assert call["enable_jit_checkpoint"] is True
    assert call["resume_from_full_state_checkpoint"].endswith("full_state_checkpoints/step_2")
    assert "resuming osft from" in seen["pod"]
    # The step's outputs cover the whole run: the steps before the pause and after it.
    assert outputs["metrics"].metadata["steps"] == 4.0 and outputs["metrics"].metadata["final_loss"] == 1.2
