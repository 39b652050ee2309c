"""The job client layer against kmock's Kubernetes API, driven by the official client.

The lifecycle scenarios (fixture ``cluster``) run for a TrainJob on upstream Trainer 2.3's API, one on RHOAI 3.3's,
and a PyTorchJob (:class:`Kind` writes out what differs). Poll mode runs on a fake clock whose ``sleep`` plays the
cluster's part; watch mode on the real clock with short windows and the cluster played by a background thread.
"""

import json
import os
import signal
import time

import pytest

from components.training.finetuning.cluster.errors import JobApiError, JobCancelled, JobConflictError, JobFailed
from components.training.finetuning.cluster.job_kinds import API_PERMISSIONS
from components.training.finetuning.cluster.launcher_pod import read_launcher_pod
from components.training.finetuning.cluster.runtimes import RuntimeNotFoundError
from components.training.finetuning.cluster.state import MetricsSource
from components.training.finetuning.manifests import pytorchjob
from components.training.finetuning.manifests.api_generations import POD_TEMPLATE_OVERRIDES, TrainJobApi
from components.training.finetuning.manifests.pytorchjob import build_pytorchjob
from components.training.finetuning.manifests.trainjob import build_trainjob
from components.training.finetuning.tests.cluster_doubles import NS, at, poll, pytorchjob_kind, spec, trainjob_kind
from tests.harness.follow_doubles import FakeClock, Log
from tests.harness.kube import ODH_3_3, condition, make_pod, running_kube_api
from tests.harness.requests import run_job


def _spec(**overrides):
    return spec(workspace=True, **overrides)


def _manifest(**overrides):
    return build_trainjob(_spec(**overrides))


#: RHOAI 3.3's TrainJob API, as discovery reads it from the vendored odh-3.3 CRD.
RHOAI_3_3 = TrainJobApi(POD_TEMPLATE_OVERRIDES, active_deadline=False, trainer_status=False)


MANIFEST = _manifest()
NAME = MANIFEST["metadata"]["name"]
POD = make_pod(NS, NAME)["metadata"]["name"]


KINDS = {
    "trainjob": trainjob_kind(MANIFEST),
    "trainjob-rhoai-3.3": trainjob_kind(build_trainjob(_spec(), RHOAI_3_3), ODH_3_3),
    "pytorchjob": pytorchjob_kind(build_pytorchjob(_spec(image="quay.io/example/trainer:1"))),
}


def _backoff(sleeps):
    """The sleeps without the retry policy's jitter (each wait is lengthened by up to 10%)."""
    bases = [float(2**exponent) for exponent in range(6)] + [10.0]
    found = [next((base for base in bases if base <= sleep <= base * 1.1), sleep) for sleep in sleeps]
    return [int(base) if base == int(base) else base for base in found]


@pytest.fixture(params=list(KINDS))
def cluster(request):
    """The emulator with the default runtime, once per job kind and TrainJob API generation (``cluster.kind``).

    Afterwards: the requests stayed within rbac.yaml, every create and patch asked for ``fieldValidation=Strict``,
    and a job still stored kept its pod settings (the workspace volume) through the server's pruning.
    """
    kind = KINDS[request.param]
    with running_kube_api(kind.generation) as kube_api:
        kube_api.create_runtime("training-hub")
        kube_api.kind = kind
        yield kube_api
        granted = set(API_PERMISSIONS)  # == rbac.yaml (tests/test_doctor.py)
        used = {(r.group, r.rbac_resource, r.verb) for r in kube_api.requests}
        assert used <= granted, f"requests outside rbac.yaml: {used - granted}"
        writes = [r for r in kube_api.requests if r.verb in ("create", "patch")]
        assert all(r.params.get("fieldValidation") == "Strict" for r in writes), [str(r) for r in writes]
        for job in kube_api.objects(kind.plural):
            assert "claimName" in json.dumps(job["spec"]), f"the stored {kind.name} lost its workspace volume: {job}"


def _poll(kube_api, clock, log, **overrides):
    return poll(kube_api, getattr(kube_api, "kind", KINDS["trainjob"]).manifest, clock, log, **overrides)


# -- success -------------------------------------------------------------------------------------------------------
def test_success_by_polling_logs_progress_and_keeps_one_request_per_interval(cluster, tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    record = {"epoch": 0.5, "loss": 1.25, "lr": 2e-5, "tokens_per_second": 1500.0, "total_steps": 4}

    def write(step, seconds):
        with metrics.open("a") as handle:
            handle.write(json.dumps({**record, "step": step, "time": seconds}) + "\n")

    clock = FakeClock()
    clock.script = at(
        [
            (10, lambda: cluster.put_pod(cluster.kind.pod(phase="Pending", waiting=("ContainerCreating", "")))),
            (20, lambda: cluster.put_pod(cluster.kind.pod())),
            (30, lambda: write(1, 30.0)),
            (40, lambda: write(2, 60.0)),
            (60, lambda: cluster.kind.complete(cluster)),
        ],
    )
    log = Log()
    result = _poll(cluster, clock, log, metrics=MetricsSource(file=str(metrics)))
    assert (result.name, result.namespace, result.reattached, result.deleted) == (NAME, NS, False, False)
    assert result.duration_seconds == 60 and result.last_progress["step"] == 2
    assert cluster.requests_summary() == [
        *cluster.kind.runtime_requests,
        f"create {cluster.kind.plural}",
        "list pods",  # t=0: not started
        f"get {cluster.kind.plural} {NAME}",
        "list pods",  # t=10: pending
        f"get {cluster.kind.plural} {NAME}",
        "list pods",  # t=20: running -> started; from now on one GET per interval
        f"get {cluster.kind.plural} {NAME}",
        f"get {cluster.kind.plural} {NAME}",
        f"get {cluster.kind.plural} {NAME}",
        f"get {cluster.kind.plural} {NAME}",
    ]
    assert clock.sleeps == [10] * 6
    progress = "step 2/4 (50%) | epoch 0.50 | loss 1.2500 | lr 2.00e-05 | 1500 tok/s | ETA 1m00s"
    assert f"[{cluster.kind.name} {NAME}] Running | {progress}" in log
    assert log[-1] == f"[{cluster.kind.name} {NAME}] Complete | {progress}"
    created = cluster.requests[len(cluster.kind.runtime_requests)].body
    assert created == cluster.kind.manifest
    assert [job["metadata"]["name"] for job in cluster.objects(cluster.kind.plural)] == [NAME]


def test_success_with_delete_on_success_leaves_nothing(cluster):
    clock = FakeClock()
    clock.script = at([(10, lambda: cluster.kind.complete(cluster))])
    result = _poll(cluster, clock, Log(), delete_on_success=True)
    assert result.deleted
    assert cluster.requests_summary()[-1] == f"delete {cluster.kind.plural} {NAME}"
    assert cluster.requests[-1].params == {"propagationPolicy": "Background"}
    assert cluster.objects(cluster.kind.plural) == []


# -- failures, each with its diagnosis ---------------------------------------------------------------------------------
FAILED = {"conditions": [condition("Failed", "JobSetFailed", "jobset has failed: the trainer node exited")]}
NCCL_LOG = (
    "step 10 loss 1.2\n"
    "[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=42, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.\n"
)
FAILURES = {
    "OOMKilled": dict(
        pod=dict(phase="Failed", terminated=("OOMKilled", 137, "")),
        log=("", "loading model\n"),
        job_fails=True,
        remedy="memory_per_node",
    ),
    "CrashLoopBackOff": dict(
        pod=dict(
            phase="Running", waiting=("CrashLoopBackOff", "back-off 5m0s"), last_terminated=("Error", 1), restarts=4
        ),
        log=("previous", "Traceback (most recent call last):\nValueError: dataset row 3 has no messages\n"),
        job_fails=True,
        remedy="log lines",
    ),
    "NCCLTimeout": dict(
        pod=dict(phase="Failed", terminated=("Error", 1, "")),
        log=("", NCCL_LOG),
        job_fails=True,
        remedy="INSTRUCTLAB_NCCL_TIMEOUT_MS",
    ),
    "ImagePullBackOff": dict(
        pod=dict(phase="Pending", waiting=("ImagePullBackOff", 'Back-off pulling image "quay.io/x/trainer:nope"')),
        job_fails=False,
        remedy="image name and tag",
    ),
    "Unschedulable": dict(
        pod=dict(phase="Pending", unschedulable="0/3 nodes are available: 3 Insufficient nvidia.com/gpu."),
        job_fails=False,
        remedy="gpus_per_node",
    ),
    "MissingSecret": dict(
        pod=dict(phase="Pending", waiting=("CreateContainerConfigError", 'secret "hf-token" not found')),
        job_fails=False,
        remedy="create secret 'hf-token'",
    ),
    "MissingPVC": dict(
        pod=dict(phase="Pending", unschedulable='persistentvolumeclaim "ws" not found'),
        event=("FailedScheduling", 'persistentvolumeclaim "ws" not found'),
        job_fails=False,
        remedy="create PVC 'ws'",
    ),
}


@pytest.mark.parametrize("code", list(FAILURES))
def test_failure_is_diagnosed_and_the_job_deleted(cluster, code):
    case = FAILURES[code]
    pod = cluster.kind.pod(**case["pod"])
    steps = [(10, lambda: cluster.put_pod(pod))]
    if "log" in case:
        previous, text = case["log"]
        steps.append(
            (
                10,
                lambda: cluster.set_pod_log(
                    NS, cluster.kind.pod_name, text, container=cluster.kind.container, previous=bool(previous)
                ),
            )
        )
    if "event" in case:
        steps.append((10, lambda: cluster.add_event(NS, "Pod", cluster.kind.pod_name, *case["event"])))
    if case["job_fails"]:
        steps.append((20, lambda: cluster.kind.set_status(cluster, FAILED)))
    clock = FakeClock()
    clock.script = at(steps)
    log = Log()
    with pytest.raises(JobFailed) as failure:
        _poll(cluster, clock, log, start_timeout_seconds=60)
    diagnosis = failure.value.diagnosis
    assert diagnosis.outcome == ("Failed" if case["job_fails"] else "StartTimeout")
    assert code in diagnosis.codes, diagnosis.text()
    cause = diagnosis.causes[diagnosis.codes.index(code)]
    assert case["remedy"] in cause.remedy and cluster.kind.pod_name in cause.where
    assert str(failure.value) == diagnosis.text() and diagnosis.text() in log.text()
    seen = cluster.requests_summary()
    assert seen[-3:-1] == ["list pods", "list events"] or seen[-4:-2] == ["list pods", "list events"]
    assert seen[-1] == f"delete {cluster.kind.plural} {NAME}"
    if "log" in case:
        log_request = [r for r in cluster.requests if r.subresource == "log"]
        assert [(r.params["container"], r.params["previous"]) for r in log_request] == [
            (cluster.kind.container, "True" if case["log"][0] else "False")
        ]
        assert diagnosis.log_tail[-1] == case["log"][1].rstrip("\n").splitlines()[-1]
    else:
        assert not [r for r in cluster.requests if r.subresource == "log"]
        assert f"waiting: {code}" in log.text()  # reported while waiting, before the start timeout
    if not case["job_fails"]:
        assert clock.now == 60
    assert cluster.objects(cluster.kind.plural) == []


def test_start_timeout_without_pods_suspends_the_job(cluster):
    clock = FakeClock()
    with pytest.raises(JobFailed) as failure:
        _poll(cluster, clock, Log(), start_timeout_seconds=45, cleanup_policy="suspend")
    diagnosis = failure.value.diagnosis
    assert (diagnosis.outcome, diagnosis.codes) == ("StartTimeout", ("NoPods",))
    assert "start_timeout_seconds=45" in diagnosis.summary
    assert clock.sleeps == [10, 10, 10, 10, 5] and clock.now == 45
    assert cluster.requests_summary()[-1] == f"patch {cluster.kind.plural} {NAME}"
    (left,) = cluster.objects(cluster.kind.plural)
    uid = {"metadata": {"uid": left["metadata"]["uid"]}}  # a precondition: only this very job is suspended
    assert cluster.requests[-1].body == {**cluster.kind.suspend_body(True), **uid}
    assert cluster.kind.suspend_value(left) is True


def test_total_timeout_keeps_the_job_when_asked(cluster):
    clock = FakeClock()
    clock.script = at([(10, lambda: cluster.put_pod(cluster.kind.pod()))])
    log = Log()
    with pytest.raises(JobFailed) as failure:
        _poll(cluster, clock, log, timeout_seconds=95, cleanup_policy="keep")
    assert failure.value.diagnosis.outcome == "Timeout"
    assert "timeout_seconds=95" in failure.value.diagnosis.summary and clock.now == 95
    assert f"kubectl delete {cluster.kind.name} {NAME} -n {NS}" in log.text()
    assert not [r for r in cluster.requests if r.verb in ("delete", "patch")]
    assert [job["metadata"]["name"] for job in cluster.objects(cluster.kind.plural)] == [NAME]


def test_job_deleted_by_someone_else_is_reported(cluster):
    from kubernetes import client

    def delete():
        client.CustomObjectsApi(cluster._operator).delete_namespaced_custom_object(
            *cluster.kind.group_version, NS, cluster.kind.plural, NAME
        )

    clock = FakeClock()
    clock.script = at([(10, delete)])
    with pytest.raises(JobFailed) as failure:
        _poll(cluster, clock, Log())
    assert failure.value.diagnosis.codes == ("Deleted",)
    assert not [r for r in cluster.requests if r.verb == "delete"]


# -- idempotent submit ---------------------------------------------------------------------------------------------
def test_retried_task_reattaches_instead_of_creating_a_second_job(cluster):
    cluster.kind.create(cluster, cluster.kind.manifest)
    if cluster.kind.name == "trainjob":
        ready = [{"name": "node", "ready": 1, "active": 1, "failed": 0, "succeeded": 0, "suspended": 0}]
        cluster.kind.set_status(cluster, {"jobsStatus": ready})
    else:
        cluster.kind.set_status(cluster, {"conditions": [condition("Created"), condition("Running")]})
    clock = FakeClock()
    clock.script = at([(10, lambda: cluster.kind.complete(cluster))])
    log = Log()
    result = _poll(cluster, clock, log)
    assert result.reattached
    assert f"re-attached to the existing {cluster.kind.manifest['kind']} of this run/task" in log.text()
    assert cluster.requests_summary() == [
        *cluster.kind.runtime_requests,
        f"create {cluster.kind.plural}",  # 409
        f"get {cluster.kind.plural} {NAME}",
        f"get {cluster.kind.plural} {NAME}",
    ]
    assert len(cluster.objects(cluster.kind.plural)) == 1


def test_reattach_resumes_a_suspended_job(cluster):
    cluster.kind.create(cluster, cluster.kind.suspended_manifest())
    clock = FakeClock()
    clock.script = at([(10, lambda: cluster.kind.complete(cluster))])
    assert _poll(cluster, clock, Log()).reattached
    resume = [r for r in cluster.requests if r.verb == "patch"]
    uid = {"metadata": {"uid": cluster.objects(cluster.kind.plural)[0]["metadata"]["uid"]}}
    assert [r.body for r in resume] == [{**cluster.kind.suspend_body(False), **uid}]
    assert cluster.kind.suspend_value(cluster.objects(cluster.kind.plural)[0]) is False


def test_conflict_with_a_foreign_job_fails_and_leaves_it_alone(cluster):
    foreign = json.loads(json.dumps(cluster.kind.manifest))
    foreign["metadata"]["labels"]["kfp-finetune.kubeflow.org/run-id"] = "someone-elses-run"
    cluster.kind.create(cluster, foreign)
    with pytest.raises(JobConflictError, match="belongs to another run/task.*someone-elses-run"):
        _poll(cluster, FakeClock(), Log())
    assert cluster.requests_summary() == [
        *cluster.kind.runtime_requests,
        f"create {cluster.kind.plural}",
        f"get {cluster.kind.plural} {NAME}",
    ]
    assert cluster.objects(cluster.kind.plural)[0]["metadata"]["labels"] == foreign["metadata"]["labels"]


# -- retries ---------------------------------------------------------------------------------------------------------
def test_server_errors_are_retried_with_backoff_then_succeed(cluster):
    # The create's response is lost after the object was stored (500, then 409 on retry): re-attach, no second job.
    cluster.fail("create", cluster.kind.plural, status=500, persist=True)
    checks_runtime = bool(cluster.kind.runtime_requests)
    if checks_runtime:
        cluster.fail("fetch", "clustertrainingruntimes", status=503, times=2)
    cluster.fail("list", "pods", status=502)
    clock = FakeClock()
    clock.script = at([(10, lambda: cluster.kind.complete(cluster))])
    log = Log()
    result = _poll(cluster, clock, log)
    assert result.reattached
    # (runtime x2,) create x1, then one poll interval (pods are an optional read: tried once per poll)
    assert _backoff(clock.sleeps) == ([1, 2] if checks_runtime else []) + [1, 10]
    assert ("reading ClusterTrainingRuntime 'training-hub': HTTP 503" in log.text()) is checks_runtime
    assert cluster.requests_summary()[: 3 + 3 * checks_runtime] == [
        *(["get clustertrainingruntimes training-hub"] * 3 * checks_runtime),
        f"create {cluster.kind.plural}",
        f"create {cluster.kind.plural}",
        f"get {cluster.kind.plural} {NAME}",
    ]
    assert len(cluster.objects(cluster.kind.plural)) == 1


def test_validation_errors_are_not_retried_and_show_the_api_message(cluster):
    plural, kind = cluster.kind.plural, cluster.kind.manifest["kind"]
    cluster.fail("create", plural, status=422)
    with pytest.raises(JobApiError, match=f"creating {kind} .* rejected .*422.*scripted 422 for create {plural}"):
        _poll(cluster, FakeClock(), Log())
    assert cluster.requests_summary() == [*cluster.kind.runtime_requests, f"create {plural}"]
    assert cluster.objects(cluster.kind.plural) == []


def test_api_down_through_every_retry_is_a_clear_error(cluster):
    # The runtime check gives up after api_attempts; the create rides the outage out until the start timeout.
    if cluster.kind.runtime_requests:
        cluster.fail("fetch", "clustertrainingruntimes", status=500, times=10)
    else:
        cluster.fail("create", cluster.kind.plural, status=500, times=1000)
    clock = FakeClock()
    log = Log()
    with pytest.raises(JobApiError) as error:
        _poll(cluster, clock, log, attempts=3, start_timeout_seconds=120)
    if cluster.kind.runtime_requests:
        assert "failed 3 times, last: HTTP 500" in str(error.value)
        assert _backoff(clock.sleeps) == [1, 2]
    else:
        first = str(error.value).splitlines()[0]
        assert first.startswith(f"creating PyTorchJob {NS}/{NAME}: the Kubernetes API did not answer before ")
        assert "start_timeout_seconds=120" in first and "HTTP 500" in first
        # Capped exponential backoff with jitter, the whole start timeout long; one line when it began.
        assert _backoff(clock.sleeps[:5]) == [1, 2, 4, 8, 16] and max(clock.sleeps) <= 33
        assert 120 - 33 <= clock.now <= 120  # (it stops when the next wait would pass the deadline)
        assert log.text().count("Kubernetes API unreachable since") == 1
    assert cluster.objects(cluster.kind.plural) == []


# -- runtime discovery -------------------------------------------------------------------------------------------
def test_missing_runtime_lists_the_available_ones(kube_api):
    kube_api.create_runtime("torch-distributed")
    kube_api.create_runtime("team-runtime", kind="TrainingRuntime", namespace=NS)
    with pytest.raises(RuntimeNotFoundError) as error:
        _poll(kube_api, FakeClock(), Log())
    assert str(error.value) == (
        f"TrainJob {NS}/{NAME}: spec.runtimeRef names ClusterTrainingRuntime 'training-hub', which does not exist. "
        f"Available: ClusterTrainingRuntime: torch-distributed; TrainingRuntime in {NS}: team-runtime. "
        "Set runtime_name/runtime_kind to one of them (`kfp-finetune doctor` checks this before a run)."
    )
    assert kube_api.requests_summary() == [
        "get clustertrainingruntimes training-hub",
        "list clustertrainingruntimes",
        "list trainingruntimes",
    ]
    assert kube_api.objects("trainjobs") == []


def test_namespaced_runtime_without_the_patched_job_is_refused(kube_api):
    kube_api.create_runtime("mine", kind="TrainingRuntime", namespace=NS, jobs=("trainer",))
    manifest = _manifest(runtime_name="mine", runtime_kind="TrainingRuntime")
    with pytest.raises(RuntimeNotFoundError, match=r"has no replicated job 'node' to patch \(it has \['trainer'\]\)"):
        run_job(kube_api.api_client, manifest, start_timeout_seconds=1, timeout_seconds=1, use_watch=False)
    assert kube_api.requests_summary() == ["get trainingruntimes mine"]


def test_forbidden_runtime_check_warns_and_submits(kube_api):
    kube_api.fail("fetch", "clustertrainingruntimes", status=403)
    clock = FakeClock()
    clock.script = at([(10, lambda: kube_api.set_trainjob_status(NS, NAME, {"conditions": [condition("Complete")]}))])
    log = Log()
    _poll(kube_api, clock, log)
    assert "WARNING: cannot check ClusterTrainingRuntime 'training-hub'" in log.text()


# -- watch mode (real clock, short windows) ----------------------------------------------------------------------------
def _watch_run(kube_api, log, **overrides):
    options = dict(start_timeout_seconds=20, timeout_seconds=30, poll_interval_seconds=0.05, log=log)
    options.update(overrides)
    return run_job(kube_api.api_client, getattr(kube_api, "kind", KINDS["trainjob"]).manifest, **options)


def _created(kube_api):
    return kube_api.wait_for(lambda: kube_api.objects(kube_api.kind.plural, NS))


def test_watch_follow_to_success_with_trainer_status(cluster):
    def operator():
        _created(cluster)
        cluster.put_pod(cluster.kind.pod())
        time.sleep(0.15)
        if cluster.kind.generation == ODH_3_3:  # no status.trainerStatus: the ODH controller annotates the job
            progress = {"progressPercentage": 40, "estimatedRemainingSeconds": 130, "currentStep": 4}
            progress["trainMetrics"] = {"loss": 0.91}
            annotations = {"trainer.opendatahub.io/trainerStatus": json.dumps(progress)}
            group, version = cluster.kind.group_version
            cluster.custom.patch_namespaced_custom_object(
                group, version, NS, "trainjobs", NAME, {"metadata": {"annotations": annotations}}
            )
        elif cluster.kind.name == "trainjob":
            progress = {
                "progressPercentage": 40,
                "estimatedRemainingSeconds": 130,
                "lastUpdatedTime": "2026-11-23T10:00:00Z",
                "metrics": [{"name": "loss", "value": "0.91"}],
            }
            cluster.kind.set_status(cluster, {"trainerStatus": progress})
        else:  # the Training Operator reports no progress: the phase comes from its conditions
            cluster.kind.set_status(cluster, {"conditions": [condition("Created"), condition("Running")]})
        time.sleep(0.3)
        cluster.kind.complete(cluster)

    log = Log()
    began = time.monotonic()
    with cluster.in_background(operator):
        result = _watch_run(cluster, log)
    elapsed = time.monotonic() - began
    assert not result.reattached
    progress = " | 40% | loss 0.91 | ETA 2m10s" if cluster.kind.name == "trainjob" else ""
    if cluster.kind.generation == ODH_3_3:
        progress = " | step 4 | loss 0.9100 | ETA 2m10s"
    assert f"[{cluster.kind.name} {NAME}] Running{progress}" in log
    verbs = [r.verb for r in cluster.requests[1 + len(cluster.kind.runtime_requests) :]]
    assert set(verbs) <= {"watch", "list"} and "watch" in verbs and "get" not in verbs
    watches = [r for r in cluster.requests if r.verb == "watch"]
    assert all(r.params["fieldSelector"] == f"metadata.name={NAME}" for r in watches)
    assert all(r.params["timeoutSeconds"] == "1" for r in watches)
    # Steady state: one watch request per poll interval (0.05 s here; 10 s by default), never a burst.
    assert len(watches) <= elapsed / 0.05 + 2
    assert [job["metadata"]["name"] for job in cluster.objects(cluster.kind.plural)] == [NAME]


def test_dropped_and_expired_watches_are_resumed(cluster):
    cluster.end_watch_after(cluster.kind.plural, events=1)

    def operator():
        _created(cluster)
        cluster.put_pod(cluster.kind.pod())
        cluster.wait_for(lambda: len([r for r in cluster.requests if r.verb == "watch"]) >= 2)
        cluster.expire_next_watch(cluster.kind.plural)
        cluster.wait_for(lambda: len([r for r in cluster.requests if r.verb == "watch"]) >= 4)
        cluster.kind.complete(cluster)

    log = Log()
    with cluster.in_background(operator):
        _watch_run(cluster, log)
    assert "watch expired (410 Gone): relisting" in log.text()
    seen = cluster.requests_summary()
    expired = next(
        i for i, r in enumerate(cluster.requests) if r.verb == "watch" and i > 3 and seen[i + 1].startswith("get")
    )
    assert seen[expired + 1] == f"get {cluster.kind.plural} {NAME}"  # relist after 410
    assert len(cluster.objects(cluster.kind.plural)) == 1


def test_sigterm_during_follow_deletes_the_job(cluster):
    def operator():
        _created(cluster)
        cluster.put_pod(cluster.kind.pod())
        cluster.wait_for(lambda: len([r for r in cluster.requests if r.verb == "watch"]) >= 2)
        assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN, None)
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.getsignal(signal.SIGTERM)
    log = Log()
    with pytest.raises(JobCancelled) as cancelled:
        with cluster.in_background(operator):
            _watch_run(cluster, log)
    assert cancelled.value.diagnosis.outcome == "Cancelled"
    assert signal.getsignal(signal.SIGTERM) == previous
    assert "cancelled (SIGTERM): applying cleanup_policy=delete" in log.text()
    assert cluster.requests_summary()[-1] == f"delete {cluster.kind.plural} {NAME}"
    assert cluster.objects(cluster.kind.plural) == []


# -- arguments and RBAC ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"cleanup_policy": "orphan"}, "cleanup_policy='orphan'"),
        ({"timeout_seconds": -1}, "timeout_seconds=-1"),
        ({"start_timeout_seconds": "10"}, "start_timeout_seconds='10'"),
        ({"poll_interval_seconds": 0}, "poll_interval_seconds=0"),
    ],
)
def test_bad_arguments_are_named(overrides, message):
    options = dict(start_timeout_seconds=1, timeout_seconds=1)
    options.update(overrides)
    with pytest.raises(ValueError, match=message):
        run_job(None, MANIFEST, **options)


TRAINER_PERMISSIONS = API_PERMISSIONS - pytorchjob.API_PERMISSIONS
POD_PERMISSIONS = {("", "pods", "list"), ("", "pods", "get"), ("", "pods/log", "get"), ("", "events", "list")}


def test_the_scenarios_use_every_granted_permission(cluster):
    # Runtime listing (missing runtime), diagnosis reads (pods, events, logs), suspend, watch, delete.
    if cluster.kind.name == "trainjob":
        with pytest.raises(RuntimeNotFoundError):
            run_job(cluster.api_client, _manifest(runtime_name="nope"), start_timeout_seconds=1, timeout_seconds=1)
        with pytest.raises(RuntimeNotFoundError):
            run_job(
                cluster.api_client,
                _manifest(runtime_name="nope", runtime_kind="TrainingRuntime"),
                start_timeout_seconds=1,
                timeout_seconds=1,
            )
    cluster.put_pod(cluster.kind.pod(phase="Failed", terminated=("Error", 2, "")))
    cluster.set_pod_log(NS, cluster.kind.pod_name, "boom\n")
    with pytest.raises(JobFailed):
        _watch_run(cluster, Log(), timeout_seconds=0.2, cleanup_policy="suspend")
    launcher = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "launcher", "namespace": NS}}
    cluster.core.create_namespaced_pod(NS, {**launcher, "spec": {"containers": [{"name": "main", "image": "x"}]}})
    read_launcher_pod(cluster.api_client, NS, environ={"KFP_POD_NAME": "launcher", "POD_NAMESPACE": NS}, log=Log())
    _poll(
        cluster,
        FakeClock(at([(10, lambda: cluster.kind.complete(cluster))])),
        Log(),
        delete_on_success=True,
    )
    used = {(r.group, r.rbac_resource, r.verb) for r in cluster.requests}
    # Each kind uses all of its own permissions; together they are exactly rbac.yaml.
    expected = TRAINER_PERMISSIONS if cluster.kind.name == "trainjob" else pytorchjob.API_PERMISSIONS | POD_PERMISSIONS
    assert used == set(expected)
    assert set(TRAINER_PERMISSIONS | pytorchjob.API_PERMISSIONS) == set(API_PERMISSIONS)


# -- secrets masked by value in quoted pod logs ------------------------------------------------------------------------
SECRETS = {  # values no pattern recognises: only masking by value can hide them
    "HF_TOKEN": "Zq9xLmN4pW7rT2vKc8",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzz",
    "AWS_ACCESS_KEY_ID": "AKIAQ4EXAMPLE7Z2",
    "KUBERNETES_AUTH_TOKEN": "sha256~kUbEaUtH0123456789",
    "OCI_PULL_SECRET_MODEL_DOWNLOAD": json.dumps({"auths": {"quay.io": {"auth": "cXVheTpwdWxsc2VjcmV0MTIz"}}}),
}
LEAKY_LOG = (
    f"config: {{'hub': {SECRETS['HF_TOKEN']!r}, 'region': 'us-east-1', 'key': {SECRETS['AWS_SECRET_ACCESS_KEY']!r}}}\n"
    f'{{"client": "{SECRETS["AWS_ACCESS_KEY_ID"]}", "endpoint": "https://s3.example.com"}}\n'
    f"exec: downloader --hub-credential {SECRETS['HF_TOKEN']} --kube {SECRETS['KUBERNETES_AUTH_TOKEN']}\n"
    "pulling with auth cXVheTpwdWxsc2VjcmV0MTIz\n"
    f"url: https://hub.example.com/resolve?token={SECRETS['HF_TOKEN']}\n"
    "Traceback (most recent call last):\nRuntimeError: download failed\n"
)


def test_secrets_in_a_failed_pods_log_are_masked_by_value(cluster, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    pod = cluster.kind.pod(phase="Failed", terminated=("Error", 1, ""))
    clock = FakeClock()
    clock.script = at(
        [
            (10, lambda: cluster.put_pod(pod)),
            (10, lambda: cluster.set_pod_log(NS, cluster.kind.pod_name, LEAKY_LOG, container=cluster.kind.container)),
            (20, lambda: cluster.kind.set_status(cluster, FAILED)),
        ],
    )
    log = Log()
    with pytest.raises(JobFailed) as failure:
        _poll(cluster, clock, log, start_timeout_seconds=60)
    diagnosis = failure.value.diagnosis
    outputs = {"diagnosis": diagnosis.text(), "error": str(failure.value), "log": log.text()}
    assert "RuntimeError: download failed" in outputs["diagnosis"]  # the log tail is quoted...
    assert "'region': 'us-east-1'" in outputs["diagnosis"]  # ...with what is not secret kept
    leaked = {
        (where, name)
        for where, text in outputs.items()
        for name, value in [*SECRETS.items(), ("docker auth", "cXVheTpwdWxsc2VjcmV0MTIz")]
        if value in text
    }
    assert not leaked, leaked
    assert cluster.objects(cluster.kind.plural) == []
