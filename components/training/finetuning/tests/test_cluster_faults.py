"""The job client layer under faults: a hung or unreachable API, errors while following, the 409/404 race, Kueue.

Each test asserts the end state: the job deleted (or suspended) in the emulator, or the error naming the job and the
``kubectl`` command that removes it; and that the step ends within a stated bound. Hangs and outages go through a
TCP proxy (``tests/harness/tcp_proxy.py``) in front of kmock's Kubernetes API, on the real clock with short timeouts;
scripted API errors run on a fake clock.
"""

import json
import time

import pytest

from components.training.finetuning.cluster.auth import load_api_client
from components.training.finetuning.cluster.errors import JobApiError, JobFailed
from components.training.finetuning.cluster.runner import run_job
from components.training.finetuning.manifests.pytorchjob import build_pytorchjob
from components.training.finetuning.manifests.spec import QUEUE_NAME_LABEL, JobSpecError
from components.training.finetuning.manifests.trainjob import build_trainjob
from tests.harness.follow_doubles import FakeClock, Log
from tests.harness.kube import make_pod, make_pytorchjob_pod, validate_trainjob
from tests.harness.requests import job_spec
from tests.harness.tcp_proxy import tcp_proxy

NS = "team-a"
RUN_ID = "0c6a3e1e-57a4-4a8c-b1a7-4d1f6f0e9b21"


def _spec(**overrides):
    fields = dict(
        run_id=RUN_ID,
        task_name="train-model",
        namespace=NS,
        command=["python", "-m", "train"],
        image="quay.io/example/trainer:1",
    )
    fields.update(overrides)
    return job_spec(**fields)


TRAINJOB = build_trainjob(_spec())
PYTORCHJOB = build_pytorchjob(_spec())
NAME = TRAINJOB["metadata"]["name"]


def _poll(kube_api, manifest, clock, log, **overrides):
    options = dict(
        start_timeout_seconds=300,
        timeout_seconds=3600,
        poll_interval_seconds=10,
        use_watch=False,
        clock=clock,
        sleep=clock.sleep,
        log=log,
    )
    options.update(overrides)
    return run_job(kube_api.api_client, manifest, **options)


def _proxied_client(proxy):
    """A client built the way the component builds it (``load_api_client``), pointed at the proxy."""
    environ = {"KUBERNETES_SERVER_URL": proxy.url, "KUBERNETES_AUTH_TOKEN": "sha256~test-token"}
    return load_api_client(environ=environ, log=lambda line: None)


def _upstream(kube_api):
    host, port = kube_api.url.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)


# -- hangs: an API that accepts connections and never answers ----------------------------------------------------------
def test_api_that_never_answers_fails_the_step_within_the_start_timeout_and_names_the_job(kube_api):
    # Bound: start_timeout_seconds (3) + cleanup_timeout_seconds (1) + 2 x the 1 s minimum request timeout + slack.
    log = Log()
    with tcp_proxy(mode="blackhole") as proxy:
        began = time.monotonic()
        with pytest.raises(JobApiError) as error:
            run_job(
                _proxied_client(proxy),
                PYTORCHJOB,
                start_timeout_seconds=3,
                timeout_seconds=0,
                cleanup_timeout_seconds=1,
                connect_timeout_seconds=1,
                log=log,
            )
        elapsed = time.monotonic() - began
    message = str(error.value)
    assert elapsed < 3 + 1 + 2 + 3, elapsed
    assert message.startswith(f"creating PyTorchJob {NS}/{NAME}: the Kubernetes API did not answer before ")
    assert "start_timeout_seconds=3" in message and "ReadTimeoutError" in message
    # The create may have reached the server: the job is named with the command that removes it.
    assert f"run `kubectl delete pytorchjob {NAME} -n {NS}`" in message.splitlines()[-1]
    assert proxy.connections >= 2  # the create, then the cleanup's read


def test_api_hanging_while_following_times_out_then_names_the_job_it_could_not_delete(kube_api):
    # Bound: timeout_seconds (3) + diagnosis and cleanup (1 s each) + 2 x the 1 s minimum request timeout x 2 + slack.
    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))
    log = Log()
    with tcp_proxy(_upstream(kube_api)) as proxy:

        def outage():
            kube_api.wait_for(lambda: [r for r in kube_api.requests if r.verb == "watch"])
            proxy.set_mode("blackhole")

        began = time.monotonic()
        with kube_api.in_background(outage), pytest.raises(JobFailed) as failure:
            run_job(
                _proxied_client(proxy),
                PYTORCHJOB,
                start_timeout_seconds=60,
                timeout_seconds=3,
                poll_interval_seconds=0.5,
                cleanup_timeout_seconds=1,
                connect_timeout_seconds=1,
                log=log,
            )
        elapsed = time.monotonic() - began
        proxy.set_mode("forward")
    assert elapsed < 3 + 1 + 1 + 4 + 3, elapsed
    assert failure.value.diagnosis.outcome == "Timeout"
    assert "diagnosis is incomplete" in log.text()
    assert f"run `kubectl delete pytorchjob {NAME} -n {NS}`" in str(failure.value)
    assert [job["metadata"]["name"] for job in kube_api.objects("pytorchjobs")] == [NAME]  # left: the message says so


def test_refused_connections_make_the_watch_fail_repeatedly_then_the_error_names_the_job(kube_api):
    # Bound: 3 failed watches one window (0.3 s) apart + cleanup_timeout_seconds (2) + slack.
    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))
    log = Log()
    with tcp_proxy(_upstream(kube_api)) as proxy:

        def outage():
            kube_api.wait_for(lambda: [r for r in kube_api.requests if r.verb == "watch"])
            proxy.set_mode("refuse")

        began = time.monotonic()
        with kube_api.in_background(outage), pytest.raises(JobApiError) as error:
            run_job(
                _proxied_client(proxy),
                PYTORCHJOB,
                start_timeout_seconds=60,
                timeout_seconds=60,
                poll_interval_seconds=0.3,
                api_attempts=3,
                cleanup_timeout_seconds=2,
                connect_timeout_seconds=1,
                log=log,
            )
        elapsed = time.monotonic() - began
        proxy.set_mode("forward")
    assert elapsed < 1 + 2 + 4, elapsed
    first, note = str(error.value).splitlines()
    assert first.startswith(f"watching PyTorchJob {NAME}: failed 3 times, last: ") and "refused" in first.lower()
    assert note.endswith(f"run `kubectl delete pytorchjob {NAME} -n {NS}`")
    assert log.text().count("watch failed") == 2
    assert [job["metadata"]["name"] for job in kube_api.objects("pytorchjobs")] == [NAME]


# -- errors while following: cleanup applied, original error kept -------------------------------------------------
def test_forbidden_pod_listing_while_pending_deletes_the_job_and_keeps_the_error(kube_api):
    kube_api.create_runtime("training-hub")
    kube_api.fail("list", "pods", status=403)
    log = Log()
    with pytest.raises(JobApiError, match="listing pods of TrainJob .* rejected .*HTTP 403") as error:
        _poll(kube_api, TRAINJOB, FakeClock(), log)
    assert "kubectl" not in str(error.value)  # the cleanup worked: nothing to do by hand
    assert "stopped by an error (JobApiError): applying cleanup_policy=delete" in log.text()
    assert kube_api.requests_summary()[-1] == f"delete trainjobs {NAME}"
    assert kube_api.objects("trainjobs") == []


def test_watch_failing_repeatedly_suspends_the_job_when_asked(kube_api):
    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))
    kube_api.fail("watch", "pytorchjobs", status=503, times=3)
    log = Log()
    with pytest.raises(JobApiError, match=f"watching PyTorchJob {NAME}: failed 3 times, last: HTTP 503"):
        run_job(
            kube_api.api_client,
            PYTORCHJOB,
            start_timeout_seconds=60,
            timeout_seconds=60,
            poll_interval_seconds=0.05,
            api_attempts=3,
            cleanup_policy="suspend",
            log=log,
        )
    (left,) = kube_api.objects("pytorchjobs")
    assert left["spec"]["runPolicy"]["suspend"] is True


def test_polling_outage_through_every_retry_deletes_the_job(kube_api):
    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))
    kube_api.fail("fetch", "pytorchjobs", status=503, times=4)
    clock = FakeClock()
    with pytest.raises(JobApiError, match="reading PyTorchJob .*: failed 4 times, last: HTTP 503"):
        _poll(kube_api, PYTORCHJOB, clock, Log(), api_attempts=4)
    assert kube_api.objects("pytorchjobs") == []


def test_an_unexpected_error_still_cleans_up_and_is_raised_unchanged(kube_api):
    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))

    def broken_normalizer(records):
        raise KeyError("a bug in the metrics reader")

    clock = FakeClock()
    with pytest.raises(KeyError, match="a bug in the metrics reader"):
        _poll(kube_api, PYTORCHJOB, clock, Log(), metrics_normalizer=broken_normalizer, metrics_file=__file__)
    assert kube_api.objects("pytorchjobs") == []


def test_a_failed_cleanup_never_masks_the_error_and_names_the_command(kube_api):
    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))
    kube_api.fail("fetch", "pytorchjobs", status=503, times=2)
    kube_api.fail("update", "pytorchjobs", status=403)
    log = Log()
    with pytest.raises(JobApiError) as error:
        _poll(kube_api, PYTORCHJOB, FakeClock(), log, api_attempts=2, cleanup_policy="suspend")
    first, note = str(error.value).splitlines()
    assert first.startswith(f"reading PyTorchJob {NS}/{NAME}: failed 2 times, last: HTTP 503")
    assert note.startswith(f"PyTorchJob {NS}/{NAME} could not be suspended (cleanup_policy=suspend: ")
    patch = {"spec": {"runPolicy": {"suspend": True}}}
    assert note.endswith(f"run `kubectl patch pytorchjob {NAME} -n {NS} --type=merge -p '{json.dumps(patch)}'`")
    assert log[-1] == f"[pytorchjob {NAME}] WARNING: {note}"


# -- the 409/404 race ----------------------------------------------------------------------------------------------
def test_conflict_on_a_job_being_deleted_backs_off_a_bounded_number_of_times(kube_api):
    kube_api.fail("create", "pytorchjobs", status=409, times=100)
    clock = FakeClock()
    with pytest.raises(JobApiError, match="HTTP 409 AlreadyExists, then HTTP 404 .* on each of 4 attempts"):
        _poll(kube_api, PYTORCHJOB, clock, Log(), api_attempts=4)
    assert kube_api.requests_summary() == ["create pytorchjobs", f"get pytorchjobs {NAME}"] * 4
    assert len(clock.sleeps) == 3 and all(a < b for a, b in zip(clock.sleeps, clock.sleeps[1:]))
    assert 1 <= clock.sleeps[0] <= 1.1 and 4 <= clock.sleeps[2] <= 4.4
    assert kube_api.objects("pytorchjobs") == []


# -- Kueue -----------------------------------------------------------------------------------------------------------
def test_queue_name_labels_valid_manifests_of_both_kinds():
    trainjob = build_trainjob(_spec(queue_name="team-queue"))
    pytorchjob = build_pytorchjob(_spec(queue_name="team-queue"))
    validate_trainjob(trainjob)  # (a PyTorchJob's metadata is not constrained by its CRD)
    for manifest in (trainjob, pytorchjob):
        assert manifest["metadata"]["labels"][QUEUE_NAME_LABEL] == "team-queue"
    assert QUEUE_NAME_LABEL not in TRAINJOB["metadata"]["labels"]
    with pytest.raises(JobSpecError, match="queue_name"):
        _spec(queue_name="Team Queue")


@pytest.mark.parametrize("kind", ["trainjob", "pytorchjob"])
def test_reattaching_to_a_queued_job_leaves_admission_to_kueue(kube_api, kind):
    queued = build_trainjob(_spec(queue_name="team-queue")) if kind == "trainjob" else None
    queued = queued or build_pytorchjob(_spec(queue_name="team-queue"))
    plural = queued["kind"].lower() + "s"
    group, version = queued["apiVersion"].split("/")
    suspended = json.loads(json.dumps(queued))
    if kind == "trainjob":
        kube_api.create_runtime("training-hub")
        suspended["spec"]["suspend"] = True
        kube_api.create_trainjob(suspended)
        pod = make_pod(NS, NAME)
    else:
        suspended["spec"]["runPolicy"]["suspend"] = True
        kube_api.create_pytorchjob(suspended)
        pod = make_pytorchjob_pod(NS, NAME)

    def admit():  # Kueue admits the job at t=100: it unsuspends it; the pods start at t=110
        body = {"spec": {"suspend": False}} if kind == "trainjob" else {"spec": {"runPolicy": {"suspend": False}}}
        kube_api.custom.patch_namespaced_custom_object(group, version, NS, plural, NAME, body)

    def complete():
        done = {"conditions": [{"type": "Complete" if kind == "trainjob" else "Succeeded", "status": "True"}]}
        kube_api.custom.patch_namespaced_custom_object_status(group, version, NS, plural, NAME, {"status": done})

    steps = {100: admit, 110: lambda: kube_api.put_pod(pod), 130: complete}
    clock = FakeClock(lambda now: steps.pop(now)() if now in steps else None)
    log = Log()
    result = _poll(kube_api, queued, clock, log, start_timeout_seconds=60)  # queued 100 s > start timeout: fine
    assert result.reattached
    assert not [r for r in kube_api.requests if r.verb == "patch"]  # never spec.suspend=false from this code
    text = log.text()
    assert "it is suspended and queued in Kueue LocalQueue 'team-queue': leaving its admission to Kueue" in text
    assert "Kueue LocalQueue 'team-queue': suspended, waiting for Kueue to admit it" in text
    assert "Kueue LocalQueue 'team-queue': admitted" in text


@pytest.mark.parametrize("status", [403, 503])
def test_an_api_answering_errors_to_everything_while_following_ends_with_the_command(kube_api, status):
    # RBAC revoked mid-run (403: final, not retried) or a broken API server (503: retried, then given up).
    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))
    log = Log()
    with tcp_proxy(_upstream(kube_api)) as proxy:

        def outage(now):
            if now >= 20 and proxy.mode == "forward":
                proxy.set_mode("status", status=status)

        clock = FakeClock(outage)
        with pytest.raises(JobApiError) as error:
            run_job(
                _proxied_client(proxy),
                PYTORCHJOB,
                start_timeout_seconds=300,
                timeout_seconds=3600,
                poll_interval_seconds=10,
                use_watch=False,
                api_attempts=3,
                clock=clock,
                sleep=clock.sleep,
                log=log,
            )
        proxy.set_mode("forward")
    first, note = str(error.value).splitlines()
    if status == 403:
        assert first.startswith(
            f"reading PyTorchJob {NS}/{NAME} was rejected by the Kubernetes API: "
            "HTTP 403 Forbidden: proxy answers 403 to every request; `kfp-finetune doctor` lists every permission"
        )
        assert proxy.answered == 2  # the poll, then the delete: neither retried
    else:
        assert first.startswith(f"reading PyTorchJob {NS}/{NAME}: failed 3 times, last: HTTP 503")
        assert proxy.answered == 6  # 3 polls, 3 deletes
    assert note.endswith(f"run `kubectl delete pytorchjob {NAME} -n {NS}`")
    assert [job["metadata"]["name"] for job in kube_api.objects("pytorchjobs")] == [NAME]


def test_sigterm_while_the_api_hangs_still_ends_promptly_naming_the_job(kube_api):
    import os
    import signal

    from components.training.finetuning.cluster.errors import JobCancelled

    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))
    log = Log()
    with tcp_proxy(_upstream(kube_api)) as proxy:

        def cancel_during_outage():
            kube_api.wait_for(lambda: [r for r in kube_api.requests if r.verb == "watch"])
            proxy.set_mode("blackhole")
            time.sleep(0.3)
            if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, signal.SIG_IGN, None):
                return  # the run is over already (the test fails): a SIGTERM now would stop pytest itself
            os.kill(os.getpid(), signal.SIGTERM)

        began = time.monotonic()
        with kube_api.in_background(cancel_during_outage), pytest.raises(JobCancelled) as cancelled:
            run_job(
                _proxied_client(proxy),
                PYTORCHJOB,
                start_timeout_seconds=60,
                timeout_seconds=60,
                poll_interval_seconds=5,
                cleanup_timeout_seconds=1,
                connect_timeout_seconds=1,
                log=log,
            )
        elapsed = time.monotonic() - began
        proxy.set_mode("forward")
    # Bound: the cancel after the first watch, then the cleanup (1 s + 2 x the 1 s minimum request timeout) + slack.
    assert elapsed < 0.3 + 1 + 2 + 3, elapsed
    assert "cancelled (SIGTERM): applying cleanup_policy=delete" in log.text()
    assert str(cancelled.value).splitlines()[-1].endswith(f"run `kubectl delete pytorchjob {NAME} -n {NS}`")
    assert [job["metadata"]["name"] for job in kube_api.objects("pytorchjobs")] == [NAME]


# -- every request has a deadline ------------------------------------------------------------------------------------
def test_every_request_of_a_run_carries_a_connect_and_read_timeout(kube_api):
    # Runtime check, create, watch, pods, events, logs, suspend: each request the client layer sends is recorded.
    from components.training.finetuning.cluster.errors import JobFailed

    kube_api.create_runtime("training-hub")
    kube_api.put_pod(make_pod(NS, NAME, phase="Failed", terminated=("Error", 2, "")))
    kube_api.set_pod_log(NS, make_pod(NS, NAME)["metadata"]["name"], "boom\n")
    api_client = kube_api.api_client
    seen = []
    original = api_client.rest_client.request

    def recording(method, url, *args, **kwargs):
        seen.append((method, url.split("?")[0], kwargs.get("_request_timeout")))
        return original(method, url, *args, **kwargs)

    api_client.rest_client.request = recording
    with pytest.raises(JobFailed):
        run_job(
            api_client,
            TRAINJOB,
            start_timeout_seconds=20,
            timeout_seconds=0.5,
            poll_interval_seconds=0.2,
            cleanup_policy="suspend",
            log=Log(),
        )
    methods = {method for method, _, _ in seen}
    assert {"GET", "POST", "PATCH"} <= methods and any(url.endswith("/log") for _, url, _ in seen)
    assert any(method == "GET" and url.endswith(f"/namespaces/{NS}/trainjobs") for method, url, _ in seen)  # watches
    for method, url, timeout in seen:
        assert isinstance(timeout, tuple) and len(timeout) == 2 and all(0 < t <= 30 for t in timeout), (method, url)
