"""Pure pieces of the TrainJob lifecycle: diagnosis rules, redaction, progress lines, the metrics-file tail."""

import json

import pytest

from components.training.finetuning.cluster.diagnosis import (
    Diagnosis,
    diagnose,
    event_causes,
    log_causes,
    pod_causes,
)
from components.training.finetuning.cluster.job_kinds import trainjob_phase
from components.training.finetuning.cluster.progress import MetricsTail, progress_line
from tests.harness.kube import condition, make_pod

JOB = {"metadata": {"name": "tm-1", "namespace": "ns"}}


def _codes(causes):
    return [cause.code for cause in causes]


def test_pod_rules():
    assert _codes(pod_causes(make_pod("ns", "tm-1", phase="Failed", terminated=("OOMKilled", 137, "")))) == [
        "OOMKilled"
    ]
    crash = make_pod("ns", "tm-1", waiting=("CrashLoopBackOff", "back-off"), last_terminated=("OOMKilled", 137))
    assert _codes(pod_causes(crash)) == ["CrashLoopBackOff", "OOMKilled"]
    pull = pod_causes(make_pod("ns", "tm-1", phase="Pending", waiting=("ErrImagePull", "manifest unknown")))
    assert _codes(pull) == ["ImagePullBackOff"] and "manifest unknown" in pull[0].detail
    key = make_pod(
        "ns",
        "tm-1",
        phase="Pending",
        waiting=("CreateContainerConfigError", "couldn't find key token in Secret ns/hf-token"),
    )
    (missing,) = pod_causes(key)
    assert missing.code == "MissingSecret" and "'hf-token'" in missing.remedy
    failed = pod_causes(make_pod("ns", "tm-1", phase="Failed", terminated=("Error", 3, "bad args\nusage: x")))
    assert _codes(failed) == ["ContainerFailed"] and failed[0].detail == "exited with code 3 (Error): usage: x"
    assert pod_causes(make_pod("ns", "tm-1")) == []
    # Node-pressure eviction (the RHOAI guide's `Evicted`): named, with the node and the batch size as remedies.
    evicted = make_pod("ns", "tm-1", phase="Failed", terminated=("ContainerStatusUnknown", 137, ""))
    pressure = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 52Mi."
    evicted["status"].update(reason="Evicted", message=pressure)
    causes = pod_causes(evicted)
    assert _codes(causes)[0] == "Evicted" and causes[0].detail == pressure, causes
    assert "node" in causes[0].remedy and "batch size" in causes[0].remedy
    assert "Evicted (pod tm-1-node-0-0" in diagnose("Failed", JOB, [evicted]).text()
    assert pod_causes(make_pod("ns", "tm-1", phase="Succeeded", terminated=("Completed", 0, ""))) == []


@pytest.mark.parametrize(
    ("message", "remedy"),
    [
        ("0/4 nodes are available: 4 Insufficient nvidia.com/gpu.", "less nvidia.com/gpu per node"),
        ("0/2 nodes are available: 2 node(s) had untolerated taint {gpu: true}.", "tolerations"),
        ("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.", "node_selector"),
    ],
)
def test_unschedulable_remedies_follow_the_scheduler_message(message, remedy):
    (cause,) = pod_causes(make_pod("ns", "tm-1", phase="Pending", unschedulable=message))
    assert cause.code == "Unschedulable" and remedy in cause.remedy and cause.detail == message


def test_event_rules_skip_normal_events():
    events = [
        {
            "type": "Warning",
            "reason": "FailedMount",
            "message": 'MountVolume.SetUp failed: secret "s3" not found',
            "involvedObject": {"kind": "Pod", "name": "tm-1-node-0-0"},
        },
        {
            "type": "Warning",
            "reason": "FailedScheduling",
            "message": 'persistentvolumeclaim "ws" not found',
            "involvedObject": {"kind": "Pod", "name": "tm-1-node-0-0"},
        },
        {
            "type": "Warning",
            "reason": "Failed",
            "message": 'Failed to pull image "x": ErrImagePull',
            "involvedObject": {"kind": "Pod", "name": "tm-1-node-0-0"},
        },
        {"type": "Normal", "reason": "Pulled", "message": "pulled", "involvedObject": {"kind": "Pod", "name": "p"}},
    ]
    assert _codes(event_causes(events)) == ["MissingSecret", "MissingPVC", "ImagePullBackOff"]


def test_log_rules():
    assert _codes(log_causes("pod p", "NCCL WARN Call to recv failed : Connection timed out")) == ["NCCLTimeout"]
    (oom,) = log_causes("pod p", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate")
    assert oom.code == "GPUOutOfMemory"
    # The RHOAI guide's remedy, by the names its users set: the pipelines' batch and token parameters.
    assert "phase_02_train_man_train_batch" in oom.remedy and "phase_02_train_man_train_tokens" in oom.remedy
    assert log_causes("pod p", "loss 0.5\nsaved checkpoint") == []


def test_diagnose_orders_dedupes_redacts_and_tails():
    pods = [make_pod("ns", "tm-1", i, phase="Failed", terminated=("OOMKilled", 137, "")) for i in range(2)]
    pods.append(
        make_pod("ns", "tm-1", 2, phase="Pending", waiting=("CreateContainerConfigError", 'secret "hf" not found'))
    )
    log = "\n".join(f"line {i}" for i in range(30)) + "\nlogin with token=hf_abcdefghijklmnopqrstu\n"
    job = {**JOB, "status": {"conditions": [condition("Failed", "JobSetFailed", "node failed")]}}
    found = diagnose("Failed", job, pods, [], {"pod tm-1-node-0-0-abcde, container node": log}, tail_lines=5)
    assert found.codes == ("MissingSecret", "OOMKilled")  # most specific first; one OOMKilled for two pods
    assert found.summary == "JobSetFailed: node failed"
    assert found.log_tail == ("line 26", "line 27", "line 28", "line 29", "login with token=***")
    text = found.text()
    assert text.splitlines()[0] == "TrainJob ns/tm-1: Failed: JobSetFailed: node failed"
    assert "    | login with token=***" in text and "hf_abc" not in text


def test_diagnose_timeouts_without_pods_and_suspension():
    none = diagnose("StartTimeout", JOB, start_timeout=600)
    assert none.codes == ("NoPods",) and "start_timeout_seconds=600" in none.summary
    suspended = {**JOB, "status": {"conditions": [condition("Suspended", "Quota", "waiting for quota")]}}
    assert diagnose("StartTimeout", suspended).codes == ("Suspended",)
    assert diagnose("Timeout", JOB, timeout=60).summary == "training did not finish within timeout_seconds=60"
    assert "unknown" in Diagnosis("ns", "x", "Failed", "s").text()
    with pytest.raises(ValueError, match="outcome='Exploded'"):
        diagnose("Exploded", JOB)


@pytest.mark.parametrize("outcome", ["StartTimeout", "Deleted", "Failed"])
def test_a_pytorchjob_diagnosis_names_its_own_kind(outcome):
    job = {"kind": "PyTorchJob", **JOB}
    found = diagnose(outcome, job, start_timeout=60)
    text = found.text()
    assert text.startswith("PyTorchJob ns/tm-1: ") and "TrainJob" not in text and "trainjob" not in text
    assert found.codes == {"StartTimeout": ("NoPods",), "Deleted": ("Deleted",), "Failed": ()}[outcome]
    if outcome == "StartTimeout":
        assert "Training Operator" in text and "kubectl describe pytorchjob tm-1 -n ns" in text
    assert diagnose(outcome, JOB, kind="PyTorchJob").text().startswith("PyTorchJob ns/tm-1: ")


def test_phase_and_progress_lines():
    assert trainjob_phase(JOB) == "Pending"
    assert trainjob_phase({"status": {"jobsStatus": [{"ready": 2}]}}) == "Running"
    assert trainjob_phase({"status": {"conditions": [condition("Complete")]}}) == "Complete"
    record = {
        "step": 10,
        "total_steps": 40,
        "epoch": 0.25,
        "loss": 2.5,
        "lr": 1e-4,
        "tokens_per_second": 99.6,
        "time": 100.0,
    }
    assert progress_line("Running", {}, record) == (
        "Running | step 10/40 (25%) | epoch 0.25 | loss 2.5000 | lr 1.00e-04 | 100 tok/s | ETA 5m00s"
    )
    assert progress_line("Running", {}, {"step": 3}) == "Running | step 3"
    status = {"progressPercentage": 90, "estimatedRemainingSeconds": 7322}
    assert progress_line("Running", status, {}) == "Running | 90% | ETA 2h02m02s"
    assert progress_line("Pending", {}, {}) == "Pending"


def test_metrics_tail_reads_appended_complete_lines_only(tmp_path):
    path = tmp_path / "metrics.jsonl"
    tail = MetricsTail(str(path))
    assert tail.poll() == {}
    path.write_text(json.dumps({"step": 1, "loss": 3.0}) + "\n" + '{"step": 2, "lo')
    assert tail.poll() == {"step": 1, "loss": 3.0}
    with path.open("a") as handle:
        handle.write('ss": 2.0}\nnot json\n{"params": true}\n')
    assert tail.poll() == {"step": 2, "loss": 2.0}
    assert MetricsTail("").poll() == {}


def test_metrics_tail_normalizes_training_hub_layouts(tmp_path):
    from components.training.finetuning.pod.metrics import normalize_records

    path = tmp_path / "training_params_and_metrics_global0.jsonl"
    path.write_text(json.dumps({"params": 1}) + "\n" + json.dumps({"step": 4, "avg_loss": 1.5, "lr": 1e-5}) + "\n")
    tail = MetricsTail(str(path), normalize_records)
    assert tail.poll()["loss"] == 1.5 and tail.poll()["step"] == 4


def test_the_pods_and_logs_hint_names_the_container_the_pods_run():
    """The guide's `oc get pods -l training.kubeflow.org/job-name=<job>` / `oc logs <pod> -c pytorch`, per job kind."""
    from components.training.finetuning.cluster.job_kinds import pods_and_logs_hint
    from components.training.finetuning.manifests.api_generations import POD_TEMPLATE_OVERRIDES, TRAINER_2_3, assumed
    from components.training.finetuning.manifests.pytorchjob import build_pytorchjob
    from components.training.finetuning.manifests.trainjob import build_trainjob
    from components.training.finetuning.tests.cluster_doubles import spec

    prefix = "Pods: oc get pods -n team -l training.kubeflow.org/job-name="
    for api in (TRAINER_2_3, assumed(POD_TEMPLATE_OVERRIDES, "RHOAI 3.3")):
        trainjob = build_trainjob(spec(workspace=True), api)
        hint = pods_and_logs_hint(trainjob, "team")
        assert hint == f"{prefix}{trainjob['metadata']['name']}; logs: oc logs <pod-name> -n team -c node", hint
    pytorchjob = build_pytorchjob(spec(workspace=True, image="quay.io/x/trainer:1"))
    hint = pods_and_logs_hint(pytorchjob, "team")
    assert hint == f"{prefix}{pytorchjob['metadata']['name']}; logs: oc logs <pod-name> -n team -c pytorch", hint
