"""The job client layer under faults: a hung API, errors while following, the 409/404 race, Kueue, SIGTERM.

Each test asserts the end state (the job untouched when the trouble is the launcher's, cleaned up only when the job
failed or the run was cancelled, else the error names the command) and a bound on the step's time.
"""

import json
import time

import pytest

from components.training.finetuning.cluster.errors import ApiOutageTooLong, JobApiError, JobFailed
from components.training.finetuning.cluster.state import MetricsSource
from components.training.finetuning.manifests.pytorchjob import build_pytorchjob
from components.training.finetuning.manifests.spec import QUEUE_NAME_LABEL, JobSpecError
from components.training.finetuning.manifests.trainjob import build_trainjob
from components.training.finetuning.tests import cluster_doubles as doubles
from components.training.finetuning.tests.cluster_doubles import IMAGE, NS, pytorchjob_kind, spec, trainjob_kind
from components.training.finetuning.tests.cluster_doubles import poll as _poll
from components.training.finetuning.tests.cluster_doubles import proxied_client as _proxied_client
from components.training.finetuning.tests.cluster_doubles import upstream as _upstream
from tests.harness.follow_doubles import FakeClock, Log
from tests.harness.kube import condition, make_pod, make_pytorchjob_pod, validate_trainjob
from tests.harness.requests import run_job
from tests.harness.tcp_proxy import tcp_proxy


def _spec(**overrides):
    return spec(**{"image": IMAGE, **overrides})


TRAINJOB = build_trainjob(_spec())
PYTORCHJOB = build_pytorchjob(_spec())
NAME = TRAINJOB["metadata"]["name"]


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


# -- the launcher's trouble while following: the job is left running, untouched ----------------------------------


def test_watch_errors_are_ridden_out_and_the_job_never_suspended(kube_api):
    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))
    kube_api.fail("watch", "pytorchjobs", status=503, times=3)

    def complete():
        kube_api.wait_for(lambda: len([r for r in kube_api.requests if r.verb == "watch"]) >= 5)
        kube_api.set_pytorchjob_status(NS, NAME, {"conditions": [condition("Succeeded")]})

    log = Log()
    with kube_api.in_background(complete):
        result = run_job(
            kube_api.api_client,
            PYTORCHJOB,
            start_timeout_seconds=60,
            timeout_seconds=60,
            poll_interval_seconds=0.05,
            attempts=3,
            cleanup_policy="suspend",
            log=log,
        )
    assert result.name == NAME and not result.deleted
    assert log.text().count("Kubernetes API unreachable since") == 1
    assert log.text().count("Kubernetes API reachable again after") == 1
    (left,) = kube_api.objects("pytorchjobs")
    assert "suspend" not in left["spec"]["runPolicy"]


def test_polling_through_server_errors_follows_the_job_to_its_end(kube_api):
    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))
    kube_api.fail("fetch", "pytorchjobs", status=503, times=8)
    done = {"conditions": [condition("Succeeded")]}
    clock = FakeClock(lambda now: kube_api.set_pytorchjob_status(NS, NAME, done) if now >= 200 else None)
    log = Log()
    result = _poll(kube_api, PYTORCHJOB, clock, log, attempts=4)
    assert result.name == NAME and clock.now >= 200
    assert "reading PyTorchJob" not in log.text()  # no line per retry: one when it began, one when it ended
    assert log.text().count("Kubernetes API unreachable since") == 1
    assert [job["metadata"]["name"] for job in kube_api.objects("pytorchjobs")] == [NAME]
    assert not [r for r in kube_api.requests if r.verb in ("delete", "patch")]


def test_an_unexpected_error_leaves_the_job_and_is_raised_with_a_note(kube_api):
    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))

    def broken_normalizer(records):
        raise KeyError("a bug in the metrics reader")

    clock = FakeClock()
    with pytest.raises(KeyError, match="a bug in the metrics reader") as error:
        _poll(kube_api, PYTORCHJOB, clock, Log(), metrics=MetricsSource(__file__, broken_normalizer))
    assert f"`kubectl get pytorchjob {NAME} -n {NS}`" in error.value.__notes__[0]
    doubles.assert_untouched(kube_api, "pytorchjobs", PYTORCHJOB)


def test_a_failed_cleanup_never_masks_the_error_and_names_the_command(kube_api):
    # The job timed out (its own limit: the policy applies); the suspend is refused (403).
    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))
    kube_api.fail("update", "pytorchjobs", status=403)
    log = Log()
    with pytest.raises(JobFailed) as error:
        _poll(kube_api, PYTORCHJOB, FakeClock(), log, timeout_seconds=30, cleanup_policy="suspend")
    note = str(error.value).splitlines()[-1]
    assert error.value.diagnosis.outcome == "Timeout"
    assert note.startswith(f"PyTorchJob {NS}/{NAME} could not be suspended (cleanup_policy=suspend: ")
    patch = {"spec": {"runPolicy": {"suspend": True}}}
    assert note.endswith(f"run `kubectl patch pytorchjob {NAME} -n {NS} --type=merge -p '{json.dumps(patch)}'`")
    assert log[-1] == f"[pytorchjob {NAME}] WARNING: {note}"


# -- the 409/404 race ----------------------------------------------------------------------------------------------
def test_conflict_on_a_job_being_deleted_backs_off_a_bounded_number_of_times(kube_api):
    kube_api.fail("create", "pytorchjobs", status=409, times=100)
    clock = FakeClock()
    with pytest.raises(JobApiError, match="HTTP 409 AlreadyExists, then HTTP 404 .* on each of 4 attempts"):
        _poll(kube_api, PYTORCHJOB, clock, Log(), attempts=4)
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
    build, job_kind = (build_trainjob, trainjob_kind) if kind == "trainjob" else (build_pytorchjob, pytorchjob_kind)
    job = job_kind(build(_spec(queue_name="team-queue")))
    kube_api.create_runtime("training-hub")
    job.create(kube_api, job.suspended_manifest())
    # Kueue admits the job at t=100: it unsuspends it; the pods start at t=110.
    steps = {
        100: lambda: job.patch(kube_api, job.suspend_body(False)),
        110: lambda: kube_api.put_pod(job.pod()),
        130: lambda: job.complete(kube_api),
    }
    clock = FakeClock(lambda now: steps.pop(now)() if now in steps else None)
    log = Log()
    result = _poll(kube_api, job.manifest, clock, log, start_timeout_seconds=60)  # queued 100 s > start timeout: fine
    assert result.reattached
    assert not [r for r in kube_api.requests if r.verb == "patch"]  # never spec.suspend=false from this code
    text = log.text()
    assert "it is suspended and queued in Kueue LocalQueue 'team-queue': leaving its admission to Kueue" in text
    assert "Kueue LocalQueue 'team-queue': suspended, waiting for Kueue to admit it" in text
    assert "Kueue LocalQueue 'team-queue': admitted" in text


@pytest.mark.parametrize("status", [403, 503])
def test_an_api_answering_errors_to_everything_while_following_never_deletes_the_job(kube_api, status):
    # RBAC revoked mid-run (403: final, not retried: the step ends at once) or a broken API server (503: ridden out
    # until api_outage_tolerance_seconds). Either way the job keeps running and the error says how to find it.
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
                attempts=3,
                api_outage_tolerance_seconds=600,
                clock=clock,
                sleep=clock.sleep,
                log=log,
            )
        proxy.set_mode("forward")
    message = str(error.value)
    if status == 403:
        assert message.startswith(
            f"reading PyTorchJob {NS}/{NAME} was rejected by the Kubernetes API: "
            "HTTP 403 Forbidden: proxy answers 403 to every request; `kfp-finetune doctor` lists every permission"
        )
        assert proxy.answered == 1  # the poll: not retried, and no delete
        assert message.splitlines()[-1].startswith(f"PyTorchJob {NS}/{NAME} was left running")
    else:
        assert isinstance(error.value, ApiOutageTooLong)
        assert message.startswith("the Kubernetes API was unreachable for ")
        assert "longer than api_outage_tolerance_seconds=600 (last: HTTP 503" in message
        assert f"PyTorchJob {NS}/{NAME} was NOT deleted" in message
        assert f"`kubectl get pytorchjob {NAME} -n {NS}`" in message
        assert 20 + 600 - 33 <= clock.now <= 20 + 600 + 10
        assert 10 <= proxy.answered <= 40  # capped backoff: about one request per 30 s
    doubles.assert_untouched(kube_api, "pytorchjobs", PYTORCHJOB)


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
                cancel_timeout_seconds=3,
                connect_timeout_seconds=0.5,
                log=log,
            )
        elapsed = time.monotonic() - began
        proxy.set_mode("forward")
    # The cleanup retries the whole 3 s budget (the grace period less a margin), not a fixed count, then reports.
    # Bound: the cancel after the first watch (0.3 s), the budget (3 s) + the 1 s minimum request timeout + slack.
    assert 0.3 + 3 - 1 <= elapsed < 0.3 + 3 + 1 + 2, elapsed
    assert "cancelled (SIGTERM): applying cleanup_policy=delete within 3 s" in log.text()
    note = str(cancelled.value).splitlines()[-1]
    assert "the 3 s left of the pod's termination grace period after SIGTERM" in note
    assert note.endswith(f"run `kubectl delete pytorchjob {NAME} -n {NS}`")
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


def test_sigterm_cleanup_keeps_retrying_and_deletes_the_job_when_the_api_returns_within_the_grace(kube_api):
    # The run is cancelled while the API refuses connections; it comes back 1 s later, within the 3 s budget: the
    # cleanup (a reason to delete: the run was cancelled) is still retrying then, and deletes the job.
    import os
    import signal

    from components._common.retry import RetryPolicy
    from components.training.finetuning.cluster.api import UNTIL_DEADLINE
    from components.training.finetuning.cluster.errors import JobCancelled

    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))
    log = Log()
    with tcp_proxy(_upstream(kube_api)) as proxy:

        def cancel_during_outage():
            kube_api.wait_for(lambda: [r for r in kube_api.requests if r.verb == "watch"])
            proxy.set_mode("refuse")
            time.sleep(0.2)
            if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, signal.SIG_IGN, None):
                return
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1.0)
            proxy.set_mode("forward")

        began = time.monotonic()
        with kube_api.in_background(cancel_during_outage), pytest.raises(JobCancelled) as cancelled:
            run_job(
                _proxied_client(proxy),
                PYTORCHJOB,
                start_timeout_seconds=60,
                timeout_seconds=60,
                poll_interval_seconds=0.5,
                cancel_timeout_seconds=3,
                connect_timeout_seconds=0.5,
                outage_policy=RetryPolicy(attempts=UNTIL_DEADLINE, initial_delay_s=0.05, max_delay_s=0.3),
                log=log,
            )
        elapsed = time.monotonic() - began
    assert elapsed < 0.2 + 3 + 2, elapsed
    assert "could not be deleted" not in str(cancelled.value)  # nothing left to do by hand
    assert kube_api.requests_summary()[-1] == f"delete pytorchjobs {NAME}"
    assert kube_api.objects("pytorchjobs") == []
