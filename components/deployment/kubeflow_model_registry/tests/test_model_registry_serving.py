"""The whole step: modelcar → registration → InferenceService → smoke answer, with real servers at every edge."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from components.deployment.kubeflow_model_registry.lineage import ArtifactInfo
from components.deployment.kubeflow_model_registry.registry_client import RetryPolicy
from components.deployment.kubeflow_model_registry.run import run_model_registration
from components.deployment.kubeflow_model_registry.tests.test_model_registry_deploy import NS, _become_ready
from tests.harness.oci_registry import write_image_layout
from tests.harness.requests import model_registry_request

pytest.importorskip("olot", reason="modelcar publishing needs model-registry[olot] (olot is in the lock)")
TOKEN = "mr-token-serving-5d6e"
PINNED = re.compile(r"^oci://127\.0\.0\.1:\d+/published/tiny-chat@sha256:[0-9a-f]{64}$")


@pytest.fixture
def base_image(oci_registry, tmp_path) -> str:
    layout = tmp_path / "base"
    write_image_layout(layout, [{"bin/sh": b"#!/bin/true\n"}], "1", history=True)
    oci_registry.push(layout, "1", "base/micro:1")
    return f"{oci_registry.host}/base/micro:1"


def _run(tmp_path, environ, model_dir: Path, stub=None, target="", base_image="", **arguments):
    """The step on ``model_dir``: against ``stub`` as ``tiny-chat`` over plain HTTP, pushed to ``target`` when set."""
    if stub is not None:
        registry = dict(registry_address=stub.address, registry_port=stub.port, model_name="tiny-chat")
        arguments = registry | dict(is_secure=False, allow_token_over_http=True) | arguments
    if target:
        arguments |= dict(modelcar_uri=target, modelcar_base_image=base_image, modelcar_insecure=True)
    metadata = {"checkpoint_path": str(model_dir), "base_model": "tiny", "algorithm": "sft"}
    model = ArtifactInfo(str(model_dir), str(model_dir), metadata)
    return run_model_registration(
        model_registry_request(model=model, **arguments),
        str(tmp_path / "summary.md"),
        environ=environ,
        retry_policy=RetryPolicy(attempts=2, initial_delay_s=0.01, max_delay_s=0.05),
        log=print,
    )


def test_modelcar_registered_pinned_then_served_and_smoke_tested(
    oci_registry, base_image, registry_stub, kserve, openai_stub, tiny_model_dir, tmp_path
):
    environ = {
        "MODEL_REGISTRY_TOKEN": TOKEN,
        "KUBERNETES_SERVER_URL": kserve.url,
        "KUBERNETES_AUTH_TOKEN": "kube-token",
        "POD_NAMESPACE": NS,
    }
    with _become_ready(kserve, openai_stub.url):
        target = f"oci://{oci_registry.host}/published/tiny-chat:1"
        arguments = dict(model_version="1", deploy_inference_service=True)
        result = _run(tmp_path, environ, tiny_model_dir, registry_stub, target, base_image, **arguments)
    assert result.status == "registered" and PINNED.match(result.uri), result
    digest = result.uri.split("@", 1)[1]
    request = urllib.request.Request(
        f"http://{oci_registry.host}/v2/published/tiny-chat/manifests/1",
        method="HEAD",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["Docker-Content-Digest"] == digest  # the tag is the pinned image
    version = registry_stub.versions_of("tiny-chat")[0]
    (artifact,) = registry_stub.artifacts_of(version["id"])
    assert artifact["uri"] == result.uri
    properties = version.get("customProperties") or {}
    assert properties["modelcar_digest"]["string_value"] == digest
    (isvc,) = kserve.objects("inferenceservices", NS)
    assert isvc["spec"]["predictor"]["model"]["storageUri"] == result.uri
    assert (result.endpoint_url, result.smoke_answer) == (openai_stub.url, openai_stub.answer)
    summary = (tmp_path / "summary.md").read_text()
    assert result.uri in summary and f"| Endpoint | {openai_stub.url} |" in summary
    assert TOKEN not in summary and "kube-token" not in summary


def test_gated_out_neither_publishes_nor_deploys(
    oci_registry, base_image, registry_stub, kserve, tiny_model_dir, tmp_path
):
    environ = {"MODEL_REGISTRY_TOKEN": TOKEN, "KUBERNETES_SERVER_URL": kserve.url, "KUBERNETES_AUTH_TOKEN": "t"}
    target = f"oci://{oci_registry.host}/published/gated:1"
    gate = dict(train_metrics=ArtifactInfo("file:///m", "/tmp/m", {"loss": 2.0}), min_metric_name="loss")
    arguments = dict(min_metric_value=3.0, deploy_inference_service=True, **gate)
    result = _run(tmp_path, environ, tiny_model_dir, registry_stub, target, base_image, **arguments)
    assert result.status == "gated_out"
    with urllib.request.urlopen(f"http://{oci_registry.host}/v2/_catalog", timeout=10) as response:
        assert "published/gated" not in json.loads(response.read())["repositories"]
    assert kserve.requests == [] and registry_stub.versions_of("tiny-chat") == []


def test_without_a_registry_the_modelcar_is_published_and_not_registered(
    oci_registry, base_image, tiny_model_dir, tmp_path
):
    result = _run(tmp_path, {}, tiny_model_dir, None, f"oci://{oci_registry.host}/published/tiny-chat:solo", base_image)
    assert result.status == "skipped" and PINNED.match(result.uri)
    assert "published, not registered" in (tmp_path / "summary.md").read_text()


def test_deploy_of_a_run_scoped_uri_is_refused_before_anything_is_registered(registry_stub, tiny_model_dir, tmp_path):
    arguments = dict(model_uri="pvc://models/tiny/run-1", deploy_inference_service=True)
    with pytest.raises(ValueError, match="'pvc://models/tiny/run-1' is not oci:// or s3://"):
        _run(tmp_path, {"MODEL_REGISTRY_TOKEN": TOKEN}, tiny_model_dir, registry_stub, **arguments)
    assert registry_stub.versions_of("tiny-chat") == []


def test_a_rerun_republishes_the_same_digest_and_registers_nothing_twice(
    oci_registry, base_image, registry_stub, tiny_model_dir, tmp_path
):
    target, environ = f"oci://{oci_registry.host}/published/tiny-chat:rerun", {"MODEL_REGISTRY_TOKEN": TOKEN}
    first, second = (
        _run(tmp_path, environ, tiny_model_dir, registry_stub, target, base_image, model_version="rerun")
        for _ in range(2)
    )
    assert (first.status, second.status) == ("registered", "already_registered")
    assert second.uri == first.uri and PINNED.match(first.uri)
    assert len(registry_stub.versions_of("tiny-chat")) == 1


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"KUBERNETES_SERVER_URL": "api.x:6443", "KUBERNETES_AUTH_TOKEN": "t"}, "must be an http(s):// URL"),
        ({"KUBERNETES_AUTH_TOKEN": "t"}, "KUBERNETES_AUTH_TOKEN is set but KUBERNETES_SERVER_URL is not"),
    ],
)
def test_deploy_credentials_are_the_training_steps(environ, message):
    """The deploy builds its client with ``kube_auth.load_api_client`` (URL checked), one line naming the step."""
    from components._common.kube_auth import KubeAuthError
    from components.deployment.kubeflow_model_registry.kserve_deploy import deploy

    options = model_registry_request(model=None, deploy_inference_service=True, deploy_namespace=NS).deploy
    with pytest.raises(KubeAuthError, match=rf"^deploy_inference_service: .*{re.escape(message)}") as raised:
        deploy(options, "oci://quay.io/x/m@sha256:" + "0" * 64, "m", "", environ, print)
    assert "\n" not in str(raised.value)
