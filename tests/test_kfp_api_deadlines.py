"""``kfp-finetune upload|run|schedule`` against a KFP API that accepts connections but never answers: each call ends
within the request timeout plus slack, in one line saying what did not answer and what to do, without the token."""

import threading
import time

import pytest

from pipelines import kfp_api
from pipelines.cli import main
from pipelines.kfp_api import Connection, KfpApiError
from tests.harness.tcp_proxy import closed_port, tcp_proxy

TOKEN = "sha256~deadline-test-token"
API = "/apis/v2beta1"


pytestmark = pytest.mark.usefixtures("no_kfp_environment")


@pytest.fixture(scope="module")
def package_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    from kfp import compiler, dsl

    @dsl.component
    def add(a: int, b: int) -> int:
        return a + b

    @dsl.pipeline(name="add-numbers")
    def add_numbers(a: int = 1):
        add(a=a, b=2)

    path = tmp_path_factory.mktemp("package") / "add_numbers.yaml"
    compiler.Compiler().compile(add_numbers, str(path))
    return str(path)


def _upstream(stub):
    host, port = stub.url.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)


@pytest.mark.parametrize("call", ["upload", "run", "schedule"])
def test_a_health_check_that_never_answers_fails_within_the_timeout(package_path, call):
    with tcp_proxy(mode="blackhole") as proxy:
        connection = Connection(host=proxy.url, token=TOKEN, timeout_seconds=1)
        began = time.monotonic()
        with pytest.raises(KfpApiError) as error:
            if call == "upload":
                kfp_api.upload_pipeline(connection, package_path, "p")
            elif call == "run":
                kfp_api.create_run(connection, package_path, {})
            else:
                kfp_api.schedule_run(connection, package_path, {}, job_name="j", cron="@daily")
        elapsed = time.monotonic() - began
    # Bound: one request of at most (connect 1 s, read 1 s), no retries.
    assert elapsed < 1 + 1 + 1.5, elapsed
    message = str(error.value)
    assert message.startswith(f"cannot reach the KFP API at {proxy.url} to check health (GET {API}/healthz): ")
    assert "Read timed out" in message and "no answer within 1 s" in message and "--request-timeout" in message
    assert "\n" not in message and TOKEN not in message
    assert proxy.connections == 1


def test_a_refused_connection_says_it_was_refused_not_that_it_timed_out(package_path):
    closed = f"http://127.0.0.1:{closed_port()}"
    connection = Connection(host=closed, token=TOKEN, timeout_seconds=60)
    began = time.monotonic()
    with pytest.raises(KfpApiError) as error:
        kfp_api.upload_pipeline(connection, package_path, "p")
    assert time.monotonic() - began < 10
    message = str(error.value)
    assert "the connection was refused at once: check --host and its port" in message, message
    assert "no answer within" not in message and "--request-timeout" not in message


def test_a_server_that_stops_answering_after_the_health_check_fails_the_call_within_the_timeout(
    kfp_api_stub, package_path
):
    """The health check answers, then the stub's handler holds every request: the pipeline lookup fails in 1 s."""
    answer = kfp_api_stub.handle
    release = threading.Event()

    def stop_answering_after_the_health_check(request):
        if request.path != f"{API}/healthz":
            release.wait(30)  # until the test has its answer: a server that stopped answering
        return answer(request)

    kfp_api_stub.handle = stop_answering_after_the_health_check
    began = time.monotonic()
    try:
        with pytest.raises(KfpApiError) as error:
            kfp_api.upload_pipeline(
                Connection(host=kfp_api_stub.url, token=TOKEN, timeout_seconds=1), package_path, "p"
            )
        elapsed = time.monotonic() - began
    finally:
        release.set()
    assert elapsed < 1 + 1 + 3, elapsed
    message = str(error.value)
    assert message.startswith(f"cannot reach the KFP API at {kfp_api_stub.url} to look up pipeline 'p': "), message
    assert "no answer within 1 s" in message and "\n" not in message and TOKEN not in message
    assert [r.path for r in kfp_api_stub.requests][0] == f"{API}/healthz"
    assert kfp_api_stub.pipelines == {}


def test_the_cli_reports_a_hung_api_in_one_line(package_path, capsys, monkeypatch):
    monkeypatch.setenv("KFP_TOKEN", TOKEN)
    with tcp_proxy(mode="blackhole") as proxy:
        began = time.monotonic()
        code = main(["upload", package_path, "--host", proxy.url, "--request-timeout", "1"])
        elapsed = time.monotonic() - began
    err = capsys.readouterr().err
    assert code == 1 and elapsed < 1 + 1 + 3, elapsed  # (slack: the first import of kfp.Client falls in the window)
    assert err.startswith("kfp-finetune upload: failed: cannot reach the KFP API") and err.count("\n") == 1
    assert TOKEN not in err


def test_the_request_timeout_must_be_positive():
    with pytest.raises(ValueError, match=r"request timeout 0 \(--request-timeout\) must be a positive number"):
        kfp_api.connection_from_options(host="https://kfp.example", timeout_seconds=0, environ={})
    assert Connection(host="h", timeout_seconds=30).request_timeout == (10.0, 30)
    assert Connection(host="h", timeout_seconds=2).request_timeout == (2, 2)


def test_every_request_of_upload_run_and_schedule_carries_a_tuple_timeout(kfp_api_stub, package_path, monkeypatch):
    from kfp_server_api import rest

    seen = []
    original = rest.RESTClientObject.request

    def recording(self, method, url, *args, **kwargs):
        seen.append((method, url.split("?")[0], kwargs.get("_request_timeout")))
        return original(self, method, url, *args, **kwargs)

    monkeypatch.setattr(rest.RESTClientObject, "request", recording)
    connection = Connection(host=kfp_api_stub.url, token=TOKEN, timeout_seconds=7)
    kfp_api.upload_pipeline(connection, package_path, "p")
    kfp_api.upload_pipeline(connection, package_path, "p")  # a new version
    kfp_api.create_run(connection, package_path, {})
    kfp_api.schedule_run(connection, package_path, {}, job_name="j", cron="@daily")
    assert len(seen) == len(kfp_api_stub.requests) >= 12
    assert {timeout for _, _, timeout in seen} == {(7, 7)}, seen
    assert rest.RESTClientObject.request is recording  # nothing replaced kfp_server_api's own method
