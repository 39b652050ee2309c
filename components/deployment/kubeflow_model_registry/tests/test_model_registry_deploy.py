"""The KServe deployment: manifests against the vendored CRDs, the lifecycle against the Kubernetes emulator."""

from __future__ import annotations

import copy
import time

import jsonschema
import pytest

from components.deployment.kubeflow_model_registry.kserve_deploy import (
    RUN_ANNOTATION,
    DeployError,
    DeploySettings,
    deploy_model,
)
from components.deployment.kubeflow_model_registry.kserve_manifests import (
    build_inference_service,
    build_serving_runtime,
    owner_labels,
    service_name,
)
from tests.harness.kube import crd_schema

NS = "team-a"
MODEL = "tiny-chat"
URI = "oci://quay.io/org/tiny@sha256:" + "a" * 64
RUN_ID = "5e1f0c2a-run-of-this-pipeline"


def _this_runs(manifest):
    """``manifest`` as this run's earlier (retried) task created it: the run's id recorded."""
    manifest["metadata"].setdefault("annotations", {})[RUN_ANNOTATION] = RUN_ID
    return manifest


def _settings(**changes) -> DeploySettings:
    base = DeploySettings(NS, MODEL, "vllm-runtime", "docker.io/vllm/vllm-openai:v0.11.0", 1, 5.0, 0.02, 5.0)
    return DeploySettings(**{**base.__dict__, **changes})


def _create(api, manifest, plural="inferenceservices"):
    version = "v1beta1" if plural == "inferenceservices" else "v1alpha1"
    return api.custom.create_namespaced_custom_object("serving.kserve.io", version, NS, plural, manifest)


def _isvcs(api):
    return {o["metadata"]["name"]: o for o in api.objects("inferenceservices", NS)}


def _become_ready(api, url: str, *, name: str = MODEL, after_generation: int = 1):
    """The KServe controller: once the service exists at ``after_generation``, it reports Ready at ``url``."""

    def script():
        obj = api.wait_for(
            lambda: next(
                (
                    o
                    for o in api.objects("inferenceservices", NS)
                    if o["metadata"]["name"] == name and o["metadata"].get("generation", 0) >= after_generation
                ),
                None,
            ),
            timeout=60,  # the whole step's push and registration come first in test_model_registry_serving
        )
        status = {
            "observedGeneration": obj["metadata"]["generation"],
            "url": url,
            "address": {"url": url},
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-26T10:00:00Z"}],
        }
        api.custom.patch_namespaced_custom_object_status(
            "serving.kserve.io", "v1beta1", NS, "inferenceservices", name, {"status": status}
        )

    return api.in_background(script)


def test_manifests_validate_against_the_vendored_crds():
    isvc_schema = crd_schema("serving.kserve.io_inferenceservices.yaml")
    runtime_schema = crd_schema("serving.kserve.io_servingruntimes.yaml")
    for uri, key in ((URI, ""), ("s3://models/tiny/v1", "aws-connection-models"), ("pvc://claim/model", "")):
        manifest = build_inference_service(MODEL, NS, uri, "vllm-runtime", "Tiny Chat", 1, key)
        jsonschema.Draft7Validator(isvc_schema).validate(manifest)
        model = manifest["spec"]["predictor"]["model"]
        assert (model.get("storageUri"), model.get("storage")) == (
            (None, {"key": key, "path": "tiny/v1"}) if key else (uri, None)
        )
    jsonschema.Draft7Validator(runtime_schema).validate(build_serving_runtime("vllm-runtime", NS, "img:1", MODEL))
    broken = build_inference_service(MODEL, NS, URI, "vllm-runtime", MODEL, 0)
    broken["spec"]["predictor"]["model"]["storageURI"] = URI  # a typo the API server's Strict validation refuses
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(isvc_schema).validate(broken)


def test_service_names():
    assert service_name("", "Tiny_Chat v2") == "tiny-chat-v2"
    assert service_name("", "42-model") == "model"
    assert len(service_name("", "x" * 80)) == 45
    for bad in ("Tiny", "1abc", "a" * 46):
        with pytest.raises(ValueError, match="deploy_service_name="):
            service_name(bad, MODEL)


def test_creates_runtime_and_service_waits_for_ready_and_smoke_tests(kserve, openai_stub):
    lines: list[str] = []
    with _become_ready(kserve, openai_stub.url):
        deployment = deploy_model(kserve.api_client, _settings(), URI, MODEL, "", lines.append)
    isvc = _isvcs(kserve)[MODEL]
    assert deployment.action == "created" and deployment.runtime_created
    assert deployment.uid == isvc["metadata"]["uid"]
    assert (deployment.url, deployment.smoke_answer) == (openai_stub.url, openai_stub.answer)
    assert isvc["spec"]["predictor"]["model"]["storageUri"] == URI
    assert openai_stub.requests[0]["body"]["model"] == MODEL
    writes = [r for r in kserve.requests if r.verb in ("create", "patch")]
    assert [w.rbac_resource for w in writes] == ["servingruntimes", "inferenceservices"]
    assert all(w.params.get("fieldValidation") == "Strict" for w in writes)


def test_updates_its_own_service_with_uid_and_resource_version_preconditions(kserve, openai_stub):
    _create(kserve, build_serving_runtime("vllm-runtime", NS, "i:1", "x"), "servingruntimes")
    previous = build_inference_service(MODEL, NS, "oci://quay.io/org/tiny@sha256:" + "b" * 64, "vllm-runtime", MODEL, 1)
    created = _create(kserve, _this_runs(previous))
    with _become_ready(kserve, openai_stub.url, after_generation=2):
        deployment = deploy_model(kserve.api_client, _settings(), URI, MODEL, "", print, run_id=RUN_ID)
    isvc = _isvcs(kserve)[MODEL]
    assert (deployment.action, deployment.runtime_created) == ("updated", False)
    assert isvc["metadata"]["uid"] == created["metadata"]["uid"] == deployment.uid
    assert isvc["spec"]["predictor"]["model"]["storageUri"] == URI
    patch = next(r for r in kserve.requests if r.verb == "patch")
    assert patch.body["metadata"]["uid"] == created["metadata"]["uid"]
    assert patch.body["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert patch.params["fieldValidation"] == "Strict"


@pytest.mark.parametrize(
    ("labels", "owner_model", "made_by", "why"),
    [
        ({"app": "theirs"}, "someone-else", "", 'labels {"app": "theirs"}, made by no recorded pipeline run'),
        (None, "other-model", "", '"kfp-finetune.opendatahub.io/registered-model": "other-model"'),
        (None, MODEL, "another-run", "made by pipeline run 'another-run'"),  # our two labels, another run's service
    ],
    ids=["foreign-labels", "another-models-labels", "another-runs-service"],
)
def test_a_service_not_made_by_this_run_for_this_model_is_never_touched(kserve, labels, owner_model, made_by, why):
    theirs = build_inference_service(MODEL, NS, "s3://theirs/model", "their-runtime", owner_model, 0)
    theirs["metadata"]["labels"] = labels or theirs["metadata"]["labels"]
    if made_by:
        theirs["metadata"]["annotations"][RUN_ANNOTATION] = made_by
    before = _create(kserve, theirs)
    with pytest.raises(DeployError) as refused:
        deploy_model(kserve.api_client, _settings(), URI, MODEL, "", print, run_id="this-run")
    message = str(refused.value)
    assert "\n" not in message and "was not made by this pipeline run (this-run)" in message, message
    assert why in message and "never overwritten" in message, message
    assert _isvcs(kserve)[MODEL] == before
    assert not [r for r in kserve.requests if r.verb == "patch"]


def test_never_ready_times_out_and_leaves_the_service(kserve, openai_stub):
    started = time.monotonic()
    with pytest.raises(DeployError, match=r"did not become Ready within 0.3 s \(last: no Ready condition yet\)"):
        deploy_model(kserve.api_client, _settings(timeout_seconds=0.3), URI, MODEL, "", print)
    assert time.monotonic() - started < 10
    assert MODEL in _isvcs(kserve) and not openai_stub.requests


def test_ready_for_an_older_generation_is_not_ready(kserve, openai_stub):
    stale = _this_runs(build_inference_service(MODEL, NS, URI, "vllm-runtime", MODEL, 1))
    created = _create(kserve, stale)
    status = {"observedGeneration": 1, "url": openai_stub.url, "conditions": [{"type": "Ready", "status": "True"}]}
    kserve.custom.patch_namespaced_custom_object_status(
        "serving.kserve.io", "v1beta1", NS, "inferenceservices", MODEL, {"status": status}
    )
    with pytest.raises(DeployError, match="did not become Ready"):
        deploy_model(kserve.api_client, _settings(timeout_seconds=0.3), URI, MODEL, "", print, run_id=RUN_ID)
    assert _isvcs(kserve)[MODEL]["metadata"]["uid"] == created["metadata"]["uid"]


def test_forbidden_is_one_line_naming_the_rbac_file(kserve):
    kserve.fail("create", "inferenceservices", status=403, times=5)
    with pytest.raises(DeployError, match="forbidden to create serving.kserve.io inferenceservices .*rbac.yaml"):
        deploy_model(kserve.api_client, _settings(), URI, MODEL, "", print)
    assert not _isvcs(kserve)


def test_a_service_replaced_between_read_and_patch_is_refused(kserve):
    mine = _this_runs(build_inference_service(MODEL, NS, URI, "vllm-runtime", MODEL, 1))
    _create(kserve, mine)
    stale = copy.deepcopy(_isvcs(kserve)[MODEL])
    stale["metadata"]["uid"] = "0000-replaced"  # what a read before a delete + re-create would have seen
    from components.deployment.kubeflow_model_registry import kserve_deploy

    api = kserve_deploy._Api(
        kserve.api_client, _settings(), kserve_deploy.RetryPolicy(attempts=1), time.sleep, time.monotonic
    )
    real_get = api.get
    api.get = lambda version, plural, name: stale if plural == "inferenceservices" else real_get(version, plural, name)
    with pytest.raises(DeployError, match="Precondition failed: UID in precondition"):
        kserve_deploy._apply_service(api, mine, MODEL, RUN_ID, print)
    assert _isvcs(kserve)[MODEL]["metadata"]["labels"] == owner_labels(MODEL)


def test_rbac_yaml_grants_exactly_what_the_client_uses(kserve, openai_stub):
    from pathlib import Path

    import yaml

    from components.deployment.kubeflow_model_registry import kserve_deploy

    role = next(yaml.safe_load_all((Path(kserve_deploy.__file__).parent / "rbac.yaml").read_text()))
    granted = {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    assert granted == kserve_deploy.API_PERMISSIONS
    with _become_ready(kserve, openai_stub.url):  # creates the runtime and the service
        deploy_model(kserve.api_client, _settings(), URI, MODEL, "", print, run_id=RUN_ID)
    with _become_ready(kserve, openai_stub.url, after_generation=2):  # updates its own service
        deploy_model(kserve.api_client, _settings(), URI + "0", MODEL, "", print, run_id=RUN_ID)
    used = {(r.group, r.rbac_resource, r.verb) for r in kserve.requests}
    assert used == granted  # within rbac.yaml, and every rule of it used


def test_a_failed_smoke_request_is_one_line_and_the_service_stays(kserve, openai_stub):
    openai_stub.served_name = "another-model"  # the predictor serves a name other than the service's
    with _become_ready(kserve, openai_stub.url):
        with pytest.raises(
            DeployError, match=r"the smoke request to http://127\.0\.0\.1:\d+/v1/completions failed"
        ) as e:
            deploy_model(kserve.api_client, _settings(), URI, MODEL, "", print)
    assert len(str(e.value).splitlines()) == 1 and "404" in str(e.value)
    assert MODEL in _isvcs(kserve)
