"""Hostile servers on 127.0.0.1 (silent or refusing APIs, a trickling predictor, a login page, a look-alike service):
each bounded, each one line with what to check."""

from __future__ import annotations

import socket
import time
from types import SimpleNamespace

import pytest

from components._common.kube_auth import load_api_client
from components.deployment.kubeflow_model_registry.kserve_deploy import (
    DeployError,
    deploy_model,
    smoke_request,
)
from components.deployment.kubeflow_model_registry.registry_client import RegistryRequestError, RetryPolicy
from components.deployment.kubeflow_model_registry.tests.registry_runs import FAST_RETRIES, register
from components.deployment.kubeflow_model_registry.tests.test_model_registry_deploy import (
    MODEL,
    URI,
    _settings,
)
from tests.harness.http_server import ScriptedResponse
from tests.harness.tcp_proxy import tcp_proxy

LOGIN_PAGE = b"<!DOCTYPE html><html><head><title>Log in</title></head><body>Log in with OpenShift</body></html>"


# -- KServe ---------------------------------------------------------------------------------------------------------
def test_a_kserve_api_that_never_answers_gets_one_connection_per_try_and_ends_at_its_deadline():
    with tcp_proxy(mode="blackhole") as proxy:
        environ = {"KUBERNETES_SERVER_URL": proxy.url, "KUBERNETES_AUTH_TOKEN": "sha256~test-token"}
        api_client = load_api_client(environ=environ, log=lambda line: None)
        began = time.monotonic()
        with pytest.raises(DeployError) as refused:
            deploy_model(
                api_client,
                _settings(request_timeout=0.5, api_deadline_seconds=2.0),
                URI,
                MODEL,
                "",
                lambda line: None,
                run_id="run-1",
            )
        elapsed = time.monotonic() - began
    message = str(refused.value)
    assert elapsed < 2.0 + 0.5 + 1.5, elapsed  # the deadline, one request timeout, slack
    assert proxy.connections <= 4  # one per try of the policy (urllib3's own retries off), not 4 x 4
    assert message.startswith("cannot get serving.kserve.io servingruntimes in namespace team-a: no answer within")
    assert "\n" not in message


def test_a_smoke_endpoint_that_trickles_a_byte_a_second_ends_at_the_request_deadline(openai_stub):
    openai_stub.trickle_s = 1.0
    began = time.monotonic()
    with pytest.raises(DeployError) as failed:
        smoke_request(openai_stub.url, openai_stub.served_name, 2.0)
    elapsed = time.monotonic() - began
    assert elapsed < 2.0 + 1.0 + 1.0, elapsed  # the deadline, one more byte, slack
    message = str(failed.value)
    assert message.startswith(f"the smoke request to {openai_stub.url}/v1/completions failed: TimeoutError")
    assert "not complete within 2 s" in message and "IncompleteRead" not in message


# -- Model Registry -------------------------------------------------------------------------------------------------
def test_a_model_registry_that_never_answers_ends_the_step_at_its_deadline(tmp_path, model):
    import model_registry.core  # noqa: F401 - imported before the clock starts (a cold import takes seconds)
    import model_registry.types  # noqa: F401

    from components.deployment.kubeflow_model_registry.run import library_versions

    library_versions()
    with tcp_proxy(mode="blackhole") as proxy:
        stub = SimpleNamespace(address="http://127.0.0.1", port=proxy.port)
        policy = RetryPolicy(attempts=4, initial_delay_s=0.01, max_delay_s=0.05, request_timeout_s=0.5, deadline_s=2)
        began = time.monotonic()
        with pytest.raises(RegistryRequestError) as failed:
            register(stub, tmp_path, model, retry_policy=policy)
        elapsed = time.monotonic() - began
    assert elapsed < 2 + 0.5 + 2, elapsed  # (a registry that never answered held the step ~25 minutes)
    message = str(failed.value)
    assert f"Model Registry at http://127.0.0.1:{proxy.port} could not be reached" in message
    assert "TimeoutError: no complete answer within" in message


@pytest.mark.parametrize(
    "body, content_type, expected",
    [
        (LOGIN_PAGE, "text/html", "an HTML page: a login page of an OAuth proxy"),
        (b'{"items": [', "application/json", "JSONDecodeError"),
        (b'{"items": 3, "size": "x"}', "application/json", "not with the registry's JSON"),
    ],
    ids=["oauth-login-page", "not-json", "other-shape"],
)
def test_an_answer_that_is_not_the_registrys_json_is_one_clear_line(
    http_file_server, tmp_path, model, body, content_type, expected
):
    for version in ("v1", "v1alpha3"):
        answer = ScriptedResponse(200, body=body, headers={"Content-Type": content_type})
        http_file_server.script(f"/api/model_registry/{version}/registered_models", *[answer] * 3)
    proxy = SimpleNamespace(address="http://127.0.0.1", port=int(http_file_server.url.rsplit(":", 1)[1]))
    with pytest.raises(RegistryRequestError) as error:
        register(proxy, tmp_path, model, retry_policy=RetryPolicy(attempts=1))
    message = str(error.value)
    assert "\n" not in message and "could not be reached" not in message
    assert "answered while trying to list registered models" in message and expected in message


def test_a_refused_connection_says_so_with_the_guides_remedies(tmp_path, model):
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    closed = SimpleNamespace(address="http://127.0.0.1", port=port)
    with pytest.raises(RegistryRequestError) as error:
        register(closed, tmp_path, model, retry_policy=RetryPolicy(attempts=1))
    message = str(error.value)
    assert "\n" not in message and f"Model Registry at http://127.0.0.1:{port} could not be reached" in message
    assert "connection refused" in message, message
    for remedy in ("installed and running", "phase_04_registry_man_address", "network policies"):
        assert remedy in message, message


# -- credentials in model_uri -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "uri, secret",
    [
        ("s3://AKIAEXAMPLEKEY:wJalrXUtnFEMIsecret@models/tiny/1", "wJalrXUtnFEMIsecret"),
        ("https://storage.example/models/tiny?X-Amz-Signature=5d672d79c15b13162d92&X-Amz-Expires=60", "5d672d79c15"),
        ("https://storage.example/models/tiny?sig=azuresasvalue123&sv=2024", "azuresasvalue123"),
    ],
)
def test_a_model_uri_with_credentials_is_refused_before_anything_is_registered(
    registry_stub,
    tmp_path,
    model,
    uri,
    secret,
):
    with pytest.raises(ValueError) as refused:
        register(registry_stub, tmp_path, model, model_uri=uri, retry_policy=FAST_RETRIES)
    message = str(refused.value)
    assert message.startswith("model_uri=") and "carries credentials" in message and secret not in message
    assert registry_stub.model_versions == {} and registry_stub.artifacts == {}
