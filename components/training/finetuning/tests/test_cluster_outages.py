"""A running job survives its launcher's API outages: blackholed and refused, 30 to 300 s, in watch and poll modes.

kmock's API sits behind the TCP proxy; poll mode plays the outage on a fake clock, watch mode on the real clock with
timings scaled down 100 times.
"""

import threading
import time

import pytest

from components._common.retry import RetryPolicy
from components.training.finetuning.cluster.api import UNTIL_DEADLINE
from components.training.finetuning.cluster.errors import ApiOutageTooLong, JobFailed
from components.training.finetuning.manifests.pytorchjob import build_pytorchjob
from components.training.finetuning.manifests.trainjob import build_trainjob
from components.training.finetuning.tests.cluster_doubles import NS, assert_untouched, at, spec
from components.training.finetuning.tests.cluster_doubles import proxied_client as _client
from components.training.finetuning.tests.cluster_doubles import upstream as _upstream
from tests.harness.follow_doubles import FakeClock, Log
from tests.harness.kube import condition, make_pod, make_pytorchjob_pod
from tests.harness.requests import run_job
from tests.harness.tcp_proxy import tcp_proxy

PYTORCHJOB = build_pytorchjob(spec(image="quay.io/example/trainer:1"))
TRAINJOB = build_trainjob(spec())
NAME = PYTORCHJOB["metadata"]["name"]
assert TRAINJOB["metadata"]["name"] == NAME
OUTAGES = [30, 60, 90, 300]
SCALE = 100  # watch mode: real seconds = the case's seconds / SCALE
GROUP_VERSION = ("trainer.kubeflow.org", "v1alpha1")
STAMP = {"metadata": {"resourceVersion": "1001"}}
#: Real timeouts of the requests: short, since each blackholed request waits one out (poll mode: on the real clock,
#: while the outage plays on the fake one), yet long enough for an answer of a machine under CPU load.
REQUEST_TIMEOUT = 0.5
#: Watch mode: the read timeout of the requests before and after the outage (the runtime check, the create); the
#: watches through the outage wait one window plus a margin instead.
SETUP_READ_TIMEOUT = 5.0
#: Watch mode: the poll interval, so a watch's read timeout is 0.5 s (the window plus the same again): a watch answered
#: in 0.2 s on a loaded 2-core machine is no outage. (0.1 s, the 10 s default scaled, left the watches 0.2 s.)
WATCH_WINDOW = 0.25
SCALED_BACKOFF = RetryPolicy(attempts=UNTIL_DEADLINE, initial_delay_s=1 / SCALE, max_delay_s=30 / SCALE)


def _assert_one_line_each(log, seconds=None):
    text = log.text()
    assert text.count("Kubernetes API unreachable since") == 1, text
    assert text.count("Kubernetes API reachable again after") == 1, text
    line = next(line for line in log if "unreachable since" in line)
    assert f"job {NS}/{NAME} last seen Running; still following" in line
    if seconds is not None:
        back = next(line for line in log if "reachable again after" in line)
        measured = float(back.split("reachable again after ")[1].split("s")[0])
        assert seconds - 1 <= measured <= seconds + 31, back  # (the API is seen again at the next retry: <= 30 s)
    return text


@pytest.mark.parametrize("seconds", OUTAGES)
@pytest.mark.parametrize("mode", ["blackhole", "refuse"])
def test_poll_mode_follows_through_an_outage_and_the_job_finishes(kube_api, mode, seconds):
    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))
    running = {"conditions": [condition("Created"), condition("Running")]}
    log = Log()
    with tcp_proxy(_upstream(kube_api)) as proxy:
        done = 40 + seconds + 60
        clock = FakeClock(
            at(
                [
                    (0, lambda: kube_api.set_pytorchjob_status(NS, NAME, running)),
                    (40, lambda: proxy.set_mode(mode)),
                    (40 + seconds, lambda: proxy.set_mode("forward")),
                    (done, lambda: kube_api.set_pytorchjob_status(NS, NAME, {"conditions": [condition("Succeeded")]})),
                ]
            )
        )
        result = run_job(
            _client(proxy),
            PYTORCHJOB,
            start_timeout_seconds=300,
            timeout_seconds=3600,
            poll_interval_seconds=10,
            use_watch=False,
            connect_timeout_seconds=REQUEST_TIMEOUT,
            read_timeout_seconds=REQUEST_TIMEOUT,
            clock=clock,
            sleep=clock.sleep,
            log=log,
        )
    assert result.name == NAME and not result.deleted and result.duration_seconds >= done
    text = _assert_one_line_each(log, seconds)
    assert "Complete" in log[-1]
    assert "; retry " not in text  # no line per failed request
    waits = [wait for wait in clock.sleeps if wait != 10]
    assert waits and max(waits) <= 33  # capped exponential backoff with jitter between the polls' own waits
    assert_untouched(kube_api, "pytorchjobs", PYTORCHJOB)


@pytest.mark.parametrize("seconds", OUTAGES)
@pytest.mark.parametrize("mode", ["blackhole", "refuse"])
def test_watch_mode_follows_through_an_outage_and_the_job_finishes(kube_api, mode, seconds):
    kube_api.create_runtime("training-hub")
    log = Log()

    def watches():
        return [r for r in kube_api.requests if r.verb == "watch"]

    with tcp_proxy(_upstream(kube_api)) as proxy:

        def cluster():
            kube_api.wait_for(lambda: kube_api.objects("trainjobs", NS))
            kube_api.put_pod(make_pod(NS, NAME))
            ready = [{"name": "node", "ready": 1, "active": 1, "failed": 0, "succeeded": 0, "suspended": 0}]
            kube_api.set_trainjob_status(NS, NAME, {"jobsStatus": ready})
            # (kmock keeps no resourceVersions: the cluster stamps one, as the API server would on every write)
            kube_api.custom.patch_namespaced_custom_object(*GROUP_VERSION, NS, "trainjobs", NAME, STAMP)
            kube_api.wait_for(lambda: len(watches()) >= 3)
            outage_began.append(len(watches()))
            proxy.set_mode(mode)
            time.sleep(seconds / SCALE)
            kube_api.wait_for(lambda: "unreachable since" in log.text(), timeout=30)  # (see the module docstring)
            proxy.set_mode("forward")
            kube_api.wait_for(lambda: "reachable again" in log.text(), timeout=30)
            kube_api.wait_for(lambda: len(watches()) >= outage_began[0] + 2)  # two watches after the outage
            kube_api.set_trainjob_status(NS, NAME, {"conditions": [condition("Complete")]})

        outage_began = []
        began = time.monotonic()
        with kube_api.in_background(cluster):
            result = run_job(
                _client(proxy),
                TRAINJOB,
                start_timeout_seconds=60,
                timeout_seconds=120,
                poll_interval_seconds=WATCH_WINDOW,
                connect_timeout_seconds=REQUEST_TIMEOUT,
                read_timeout_seconds=SETUP_READ_TIMEOUT,
                outage_policy=SCALED_BACKOFF,
                log=log,
            )
        elapsed = time.monotonic() - began
    assert result.name == NAME and not result.deleted
    assert elapsed >= seconds / SCALE
    _assert_one_line_each(log)
    assert "Complete" in log[-1]
    # Each watch after the outage resumes from the last resourceVersion seen (none starts from scratch).
    after = watches()[outage_began[0] :]
    assert after and all(r.params.get("resourceVersion") == "1001" for r in after), [r.params for r in after]
    assert_untouched(kube_api, "trainjobs", TRAINJOB)


def test_an_outage_past_the_tolerance_fails_the_step_without_touching_the_job(kube_api):
    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))
    log = Log()
    with tcp_proxy(_upstream(kube_api)) as proxy:

        def cluster(now):
            if now >= 30 and proxy.mode == "forward":
                proxy.set_mode("blackhole")

        clock = FakeClock(cluster)
        with pytest.raises(ApiOutageTooLong) as error:
            run_job(
                _client(proxy),
                PYTORCHJOB,
                start_timeout_seconds=300,
                timeout_seconds=3600,
                poll_interval_seconds=10,
                use_watch=False,
                connect_timeout_seconds=0.2,
                read_timeout_seconds=0.2,
                api_outage_tolerance_seconds=300,
                clock=clock,
                sleep=clock.sleep,
                log=log,
            )
        proxy.set_mode("forward")
    message = str(error.value)
    assert "longer than api_outage_tolerance_seconds=300" in message and "ReadTimeoutError" in message
    assert f"PyTorchJob {NS}/{NAME} was NOT deleted: it keeps running on its own (last seen Running)" in message
    assert f"`kubectl get pytorchjob {NAME} -n {NS}`" in message
    assert 30 + 300 - 33 <= clock.now <= 30 + 300
    assert "stopped by an error" not in log.text()  # no second note, no cleanup
    assert_untouched(kube_api, "pytorchjobs", PYTORCHJOB)


def test_after_an_outage_an_expired_watch_is_relisted(kube_api):
    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))
    log = Log()
    with tcp_proxy(_upstream(kube_api)) as proxy:
        stop = threading.Event()

        def cluster():
            kube_api.wait_for(lambda: [r for r in kube_api.requests if r.verb == "watch"])
            proxy.set_mode("refuse")
            kube_api.expire_next_watch("pytorchjobs")  # the resourceVersion is too old once the API is back
            time.sleep(0.5)
            kube_api.wait_for(lambda: "unreachable since" in log.text(), timeout=30)
            proxy.set_mode("forward")
            kube_api.wait_for(lambda: "relisting" in log.text(), timeout=30)
            kube_api.set_pytorchjob_status(NS, NAME, {"conditions": [condition("Succeeded")]})
            stop.set()

        with kube_api.in_background(cluster):
            result = run_job(
                _client(proxy),
                PYTORCHJOB,
                start_timeout_seconds=60,
                timeout_seconds=120,
                poll_interval_seconds=WATCH_WINDOW,
                connect_timeout_seconds=REQUEST_TIMEOUT,
                outage_policy=SCALED_BACKOFF,
                log=log,
            )
    assert result.name == NAME and stop.is_set()
    seen = kube_api.requests_summary()
    expired = max(i for i, line in enumerate(seen) if line.startswith("get pytorchjobs"))
    assert seen[expired - 1] == "watch pytorchjobs"  # the 410 watch, then the re-list (one GET of the job)
    _assert_one_line_each(log)
    assert_untouched(kube_api, "pytorchjobs", PYTORCHJOB)


def test_a_watch_cut_to_a_sliver_by_the_start_deadline_is_no_outage(kube_api):
    """A watch cut to a microsecond before the start timeout still gets MIN_TIMEOUT_SECONDS to answer (50 ms here)."""
    for _ in range(2):
        kube_api.end_watch_after("pytorchjobs", 1)
    log = Log()
    clock = FakeClock()
    with tcp_proxy(_upstream(kube_api), latency=0.05) as proxy, pytest.raises(JobFailed) as failure:
        run_job(
            _client(proxy),
            PYTORCHJOB,
            start_timeout_seconds=20.000001,
            timeout_seconds=3600,
            poll_interval_seconds=10,
            cleanup_policy="keep",
            clock=clock,
            sleep=clock.sleep,
            log=log,
        )
    assert failure.value.diagnosis.outcome == "StartTimeout", log.text()
    assert "unreachable" not in log.text()
    assert clock.sleeps[:2] == [10, 10] and clock.now <= 20.000001 + 1  # (a watch outlives its deadline by < 1 s)
    assert_untouched(kube_api, "pytorchjobs", PYTORCHJOB)
