"""An address that answers, but not as the registry does, or where nothing answers: one line, with what to check."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest

from components.deployment.kubeflow_model_registry.registry_client import RegistryRequestError, RetryPolicy
from components.deployment.kubeflow_model_registry.tests.registry_runs import register
from tests.harness.http_server import ScriptedResponse

LOGIN_PAGE = b"<!DOCTYPE html><html><head><title>Log in</title></head><body>Log in with OpenShift</body></html>"


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
