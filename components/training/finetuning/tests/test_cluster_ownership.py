"""Only our job: its uid is recorded, followed, and carried by every delete and patch; pods are optional reads.

kmock enforces a delete's ``preconditions.uid`` and a patch's ``metadata.uid`` as the API server does.
"""

from __future__ import annotations

import copy
import time

import pytest

from components._common.retry import RetryPolicy
from components.training.finetuning.cluster.api import UNTIL_DEADLINE, Api, Deadline
from components.training.finetuning.cluster.errors import ApiOutageTooLong, JobFailed, NotOurJob
from components.training.finetuning.cluster.job_client import JobClient
from components.training.finetuning.cluster.lifecycle import clean_up
from components.training.finetuning.cluster.state import JobState
from components.training.finetuning.manifests.names import RUN_ID_LABEL
from components.training.finetuning.manifests.trainjob import build_trainjob
from components.training.finetuning.tests.cluster_doubles import NS, poll, spec
from tests.harness.follow_doubles import FakeClock, Log
from tests.harness.kube import condition, make_pod
from tests.harness.requests import job_settings, run_job

OTHER_RUN_ID = "7f1d2c3b-0000-4a8c-b1a7-4d1f6f0e9b99"
FAST = RetryPolicy(attempts=UNTIL_DEADLINE, initial_delay_s=0.05, max_delay_s=0.2, jitter=0.0)
TRAINJOB = build_trainjob(spec(image="quay.io/example/trainer:1"))
NAME = TRAINJOB["metadata"]["name"]


def _foreign() -> dict:
    """A TrainJob of another run under our job's name."""
    manifest = copy.deepcopy(TRAINJOB)
    manifest["metadata"]["labels"][RUN_ID_LABEL] = OTHER_RUN_ID
    return manifest


def _jobs(kube_api) -> list[tuple[str, str, str]]:
    return [
        (job["metadata"]["name"], job["metadata"]["uid"], job["metadata"]["labels"][RUN_ID_LABEL])
        for job in kube_api.objects("trainjobs")
    ]


def _writes(kube_api) -> list[str]:
    return [line for line in kube_api.requests_summary() if line.split()[0] in ("delete", "patch")]


def _poll(kube_api, clock, log, **overrides):
    return poll(kube_api, TRAINJOB, clock, log, **{"outage_policy": FAST, **overrides})


def _swap(kube_api) -> str:
    """Our job disappears and another run's appears under the name (its uid returned)."""
    kube_api.custom.delete_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", NS, "trainjobs", NAME)
    return kube_api.create_trainjob(_foreign())["metadata"]["uid"]


@pytest.mark.parametrize("outcome", ["Complete", "Failed"])
def test_a_foreign_job_under_our_name_is_never_followed_reported_or_deleted_when_polling(kube_api, outcome):
    kube_api.create_runtime("training-hub")
    foreign = {}

    def script(now):
        if now == 20:
            foreign["uid"] = _swap(kube_api)
        if now == 30:
            kube_api.set_trainjob_status(NS, NAME, {"conditions": [condition(outcome)]})

    clock = FakeClock(script)
    log = Log()
    with pytest.raises(JobFailed) as failure:
        _poll(kube_api, clock, log, timeout_seconds=60, cleanup_policy="delete")
    assert failure.value.diagnosis.outcome == "Deleted"
    assert f"now holds another job (uid {foreign['uid']}), not this run's" in str(failure.value)
    assert _jobs(kube_api) == [(NAME, foreign["uid"], OTHER_RUN_ID)]  # the other run's job is untouched
    assert _writes(kube_api) == []
    assert kube_api.requests_summary()[-1] == f"get trainjobs {NAME}"  # its pods are not diagnosed as ours


def test_a_foreign_job_seen_after_a_410_relist_is_not_ours(kube_api):
    # While a watch is open, our job is replaced by another run's, already complete, without an event reaching the
    # watch (as when the watch's history expired); the next watch answers 410 and the job is re-read: not ours.
    kube_api.create_runtime("training-hub")
    kube_api.put_pod(make_pod(NS, NAME))
    log = Log()
    foreign = {}

    def operator():
        kube_api.wait_for(lambda: [r for r in kube_api.requests if r.verb == "watch"])
        kube_api.expire_next_watch("trainjobs")
        foreign["uid"] = _swap_quietly(kube_api, status={"conditions": [condition("Complete")]})

    with kube_api.in_background(operator), pytest.raises(JobFailed) as failure:
        run_job(
            kube_api.api_client,
            TRAINJOB,
            start_timeout_seconds=30,
            timeout_seconds=30,
            poll_interval_seconds=1,
            cleanup_policy="delete",
            log=log,
            outage_policy=FAST,
        )
    assert failure.value.diagnosis.outcome == "Deleted"
    assert "watch expired (410 Gone): relisting" in log.text()
    assert _jobs(kube_api) == [(NAME, foreign["uid"], OTHER_RUN_ID)]
    assert _writes(kube_api) == []
    assert " Complete" not in log.text()  # the other run's completion is not reported as this run's


def _swap_quietly(kube_api, status: dict) -> str:
    """Replaces our job by another run's (with ``status``) in the store, no watch event sent: its new uid."""
    import uuid

    uid = str(uuid.uuid4())
    manifest = _foreign()
    manifest["metadata"]["uid"] = uid
    manifest["status"] = status

    def replace() -> None:
        for key, obj in list(kube_api.emulator.objects.items()):
            if key[0].plural == "trainjobs" and key[2] == NAME and not obj.deleted:
                obj.delete()
                obj.create(manifest)

    kube_api.call(replace)
    return uid


def _client(kube_api, log) -> JobClient:
    api = Api(kube_api.api_client, time.sleep, log, 1)
    return JobClient(api=api, manifest=TRAINJOB, say=log)


@pytest.mark.parametrize("policy", ["delete", "suspend"])
def test_cleanup_carries_our_uid_and_leaves_a_job_that_took_the_name(kube_api, policy):
    # Our job timed out; before the cleanup, another run's job took the name. The delete / suspend patch carries our
    # uid as precondition: the API refuses it (409), nothing of the other run's is touched.
    ours = kube_api.create_trainjob(TRAINJOB)["metadata"]["uid"]
    other = _swap(kube_api)
    log = Log()
    clock = FakeClock()
    state = JobState(started_at=0.0, start_clock_at=0.0, job={"metadata": {"uid": ours}}, uid=ours, submitted=True)
    settings = job_settings(
        **dict.fromkeys(("start_timeout_seconds", "timeout_seconds", "api_outage_tolerance_seconds"), 0),
        cleanup_policy=policy,
        log=log,
        clock=clock,
        sleep=clock.sleep,
    )
    note = clean_up(_client(kube_api, log), state, settings, Deadline(5.0, "cleanup_timeout_seconds=5"))
    assert note == ""  # nothing left to do by hand: our job is gone
    assert "no longer this run's job" in log.text() and ours in log.text()
    (job,) = kube_api.objects("trainjobs")
    assert job["metadata"]["uid"] == other and "suspend" not in job["spec"]
    sent = [r for r in kube_api.requests if r.verb in ("delete", "patch")]
    assert len(sent) == 1
    body = sent[0].body
    assert (body["preconditions"]["uid"] if policy == "delete" else body["metadata"]["uid"]) == ours


def test_delete_with_our_uid_deletes_our_job(kube_api):
    ours = kube_api.create_trainjob(TRAINJOB)["metadata"]["uid"]
    log = Log()
    client = _client(kube_api, log)
    with pytest.raises(NotOurJob):
        client.delete_job("00000000-0000-0000-0000-000000000000")
    assert [job["metadata"]["uid"] for job in kube_api.objects("trainjobs")] == [ours]
    assert client.delete_job(ours) is True
    assert kube_api.objects("trainjobs") == []


# -- pods and events are optional reads ---------------------------------------------------------------------------
@pytest.mark.parametrize("status", [403, 500])
def test_unreadable_pods_never_stop_following_a_pending_job(kube_api, status):
    kube_api.create_runtime("training-hub")
    kube_api.fail("list", "pods", status=status, times=10_000)
    steps = {
        20: lambda: kube_api.set_trainjob_status(NS, NAME, {"jobsStatus": [{"name": "node", "ready": 1}]}),
        30: lambda: kube_api.set_trainjob_status(NS, NAME, {"conditions": [condition("Complete")]}),
    }
    clock = FakeClock(lambda now: steps.pop(now)() if now in steps else None)
    log = Log()
    result = _poll(kube_api, clock, log, cleanup_policy="delete")
    assert result.name == NAME and clock.now == 30  # read on time: every poll, no outage backoff
    warnings = [line for line in log if "WARNING" in line]
    assert len(warnings) == 1 and f"HTTP {status}" in warnings[0] and "job's own status" in warnings[0]
    assert warnings[0].startswith(f"[trainjob {NAME}] WARNING: listing pods of TrainJob")
    assert "unreachable" not in log.text()
    assert [name for name, _, _ in _jobs(kube_api)] == [NAME] and _writes(kube_api) == []


def test_unreadable_pods_and_events_still_leave_a_diagnosis_of_a_failed_job(kube_api):
    kube_api.create_runtime("training-hub")
    kube_api.fail("list", "pods", status=403, times=10_000)
    kube_api.fail("list", "events", status=403, times=10_000)
    message = "trainer exited 1"
    clock = FakeClock(
        lambda now: (
            kube_api.set_trainjob_status(NS, NAME, {"conditions": [condition("Failed", message=message)]})
            if now == 20
            else None
        )
    )
    log = Log()
    with pytest.raises(JobFailed) as failure:
        _poll(kube_api, clock, log, cleanup_policy="keep")
    assert failure.value.diagnosis.outcome == "Failed" and message in str(failure.value)
    assert log.text().count("diagnosis is incomplete") == 2  # pods, then events: each read on its own


# -- malformed watch events ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "event",
    [b"{not json\n", {"type": "ERROR", "object": {"kind": "Status"}}, {"type": "ADDED"}],
    ids=["not-json", "error-without-code", "no-object"],
)
def test_an_unreadable_watch_event_rereads_the_job_and_follows_on(kube_api, event):
    kube_api.create_runtime("training-hub")
    kube_api.put_pod(make_pod(NS, NAME))

    async def bad(request):
        yield b""
        yield event

    kube_api.call(lambda: kube_api.emulator.scripted_watches.append(("trainjobs", bad)))

    def complete():
        kube_api.wait_for(lambda: len([r for r in kube_api.requests if r.verb == "watch"]) >= 2)
        kube_api.set_trainjob_status(NS, NAME, {"conditions": [condition("Complete")]})

    log = Log()
    with kube_api.in_background(complete):
        result = run_job(
            kube_api.api_client,
            TRAINJOB,
            start_timeout_seconds=30,
            timeout_seconds=30,
            poll_interval_seconds=0.3,
            log=log,
            outage_policy=FAST,
        )
    assert result.name == NAME
    assert "the API sent an unreadable event" in log.text() and "relisting" in log.text()
    assert [name for name, _, _ in _jobs(kube_api)] == [NAME]


# -- deadlines -------------------------------------------------------------------------------------------------------
def test_an_outage_tolerance_is_used_to_its_end_and_the_message_says_the_measured_time(kube_api):
    kube_api.create_runtime("training-hub")
    kube_api.put_pod(make_pod(NS, NAME))
    clock = FakeClock()
    began = {}

    def outage(now):
        if now >= 20 and "at" not in began:
            began["at"] = now
            kube_api.fail("fetch", "trainjobs", status=503, times=10_000)

    clock.script = outage
    policy = RetryPolicy(attempts=UNTIL_DEADLINE, initial_delay_s=1.0, max_delay_s=30.0, jitter=0.1)
    with pytest.raises(ApiOutageTooLong) as error:
        _poll(kube_api, clock, Log(), api_outage_tolerance_seconds=60, outage_policy=policy)
    assert clock.now - began["at"] >= 60
    assert "unreachable for 60s, longer than api_outage_tolerance_seconds=60" in str(error.value)
    assert [name for name, _, _ in _jobs(kube_api)] == [NAME] and _writes(kube_api) == []


def test_a_cleanup_retries_until_the_end_of_its_budget(kube_api):
    # The job timed out (the policy applies); every delete answers 503: the last try is at the end of the budget.
    kube_api.create_runtime("training-hub")
    kube_api.put_pod(make_pod(NS, NAME))
    kube_api.fail("delete", "trainjobs", status=503, times=10_000)
    clock = FakeClock()
    policy = RetryPolicy(attempts=UNTIL_DEADLINE, initial_delay_s=1.0, max_delay_s=30.0, jitter=0.1)
    with pytest.raises(JobFailed) as failure:
        _poll(kube_api, clock, Log(), timeout_seconds=30, cleanup_timeout_seconds=25, outage_policy=policy)
    assert failure.value.diagnosis.outcome == "Timeout"
    assert clock.now == pytest.approx(30 + 25)
    assert "could not be deleted" in str(failure.value)
    assert "did not answer before cleanup_timeout_seconds=25 (" in str(failure.value)
    assert "attempt(s) in 25.0s" in str(failure.value)  # the measured time


def test_the_cleanup_after_sigterm_uses_its_whole_budget(kube_api):
    # The run is cancelled at t=20 while every delete answers 503: the cleanup retries until the end of its 25 s
    # budget (the last try at t=45), and the error names the job, the command and the measured time.
    import os
    import signal

    from components.training.finetuning.cluster.errors import JobCancelled

    kube_api.create_runtime("training-hub")
    kube_api.put_pod(make_pod(NS, NAME))

    def cancel(now):
        if now == 20:
            kube_api.fail("delete", "trainjobs", status=503, times=10_000)
            os.kill(os.getpid(), signal.SIGTERM)

    clock = FakeClock(cancel)
    policy = RetryPolicy(attempts=UNTIL_DEADLINE, initial_delay_s=1.0, max_delay_s=30.0, jitter=0.1)
    with pytest.raises(JobCancelled) as cancelled:
        _poll(kube_api, clock, Log(), cancel_timeout_seconds=25, outage_policy=policy)
    assert clock.now == pytest.approx(20 + 25)
    message = str(cancelled.value)
    assert "attempt(s) in 25.0s" in message and f"run `kubectl delete trainjob {NAME} -n {NS}`" in message
    assert [name for name, _, _ in _jobs(kube_api)] == [NAME]
