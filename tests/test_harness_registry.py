"""The Model Registry stub: it must behave like the real REST API and refuse what the real one would refuse."""

import json
import ssl
import urllib.error
import urllib.request

import pytest
from model_registry import ModelRegistry
from model_registry.exceptions import StoreError

from tests.harness.registry_stub import find_operation, schema_ref, validation_errors

V1 = "/api/model_registry/v1"


def _call(stub, method, path, body=None, token=None, context=None):
    """One raw HTTP call; returns (status, parsed JSON body)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(stub.url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _client(stub, token="t"):
    return ModelRegistry(stub.address, stub.port, author="tester", is_secure=False, user_token=token)


def test_real_client_registers_and_reads_back(registry_stub):
    registry = _client(registry_stub)
    registry.register_model(
        "tiny",
        "s3://models/tiny/v1",
        version="v1",
        model_format_name="pytorch",
        model_format_version="1",
        metadata={"epochs": 3, "lr": 0.001, "algorithm": "lora", "merged": True},
    )
    assert registry.get_model_version("tiny", "v1").custom_properties == {
        "epochs": 3,
        "lr": 0.001,
        "algorithm": "lora",
        "merged": True,
    }
    assert registry.get_model_artifact("tiny", "v1").uri == "s3://models/tiny/v1"
    [model] = registry_stub.registered_models.values()
    [version] = registry_stub.versions_of("tiny")
    assert model["name"] == "tiny" and model["owner"] == "tester"
    assert version["customProperties"]["epochs"] == {"int_value": "3", "metadataType": "MetadataIntValue"}
    assert [a["uri"] for a in registry_stub.artifacts_of(version["id"])] == ["s3://models/tiny/v1"]
    posts = [r.resource for r in registry_stub.requests if r.method == "POST"]
    assert posts == ["/registered_models", "/model_versions", f"/model_versions/{version['id']}/artifacts"]
    assert {r.api_version for r in registry_stub.requests} == {"v1"}


def test_duplicate_version_is_refused_by_the_client_after_a_find(registry_stub):
    registry = _client(registry_stub)
    kwargs = dict(version="v1", model_format_name="pytorch", model_format_version="1")
    registry.register_model("tiny", "s3://models/a", **kwargs)
    with pytest.raises(StoreError, match="already exists"):
        registry.register_model("tiny", "s3://models/b", **kwargs)
    assert len(registry_stub.model_versions) == 1


def test_body_missing_a_required_field_is_rejected(registry_stub):
    status, body = _call(registry_stub, "POST", f"{V1}/registered_models", {"description": "no name"})
    assert status == 400
    assert "RegisteredModelCreate" in body["message"] and "'name' is a required property" in body["message"]
    status, body = _call(registry_stub, "POST", f"{V1}/registered_models", {"name": "m"})
    assert status == 201
    status, body = _call(registry_stub, "POST", f"{V1}/model_versions", {"name": "v1"})
    assert status == 400 and "'registeredModelId' is a required property" in body["message"]
    assert registry_stub.model_versions == {}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"artifactType": "bogus", "uri": "s3://x/y"}, "artifactType='bogus' is not one of"),
        (
            {"artifactType": "model-artifact", "customProperties": {"n": {"metadataType": "MetadataIntValue"}}},
            "'int_value' is a required property",
        ),
        (
            {
                "artifactType": "model-artifact",
                "customProperties": {"n": {"int_value": 3, "metadataType": "MetadataIntValue"}},
            },
            "3 is not of type 'string'",
        ),
    ],
)
def test_artifact_bodies_are_validated_through_the_discriminator(registry_stub, body, expected):
    _call(registry_stub, "POST", f"{V1}/registered_models", {"name": "m"})
    _call(registry_stub, "POST", f"{V1}/model_versions", {"name": "v", "registeredModelId": "1"})
    status, answer = _call(registry_stub, "POST", f"{V1}/model_versions/2/artifacts", body)
    assert status == 400 and expected in answer["message"]
    assert registry_stub.artifacts == {}


def test_path_and_query_parameters_are_validated(registry_stub):
    status, body = _call(registry_stub, "GET", f"{V1}/model_versions/abc")
    assert status == 400 and "modelversionId='abc'" in body["message"]
    status, body = _call(registry_stub, "GET", f"{V1}/registered_models?pageSize=0")
    assert status == 400 and "pageSize='0'" in body["message"]
    status, body = _call(registry_stub, "GET", f"{V1}/registered_models?orderBy=NAME")
    assert status == 400 and "orderBy" in body["message"]


def test_unknown_ids_and_paths_are_404(registry_stub):
    assert _call(registry_stub, "GET", f"{V1}/model_versions/42")[0] == 404
    assert _call(registry_stub, "GET", f"{V1}/no_such_thing")[0] == 404
    assert _call(registry_stub, "GET", "/api/model_registry/v2/registered_models")[0] == 404


def test_serves_v1alpha3_and_can_play_an_old_server(registry_stub):
    assert _call(registry_stub, "POST", "/api/model_registry/v1alpha3/registered_models", {"name": "m"})[0] == 201
    status, listing = _call(registry_stub, "GET", f"{V1}/registered_models")
    assert status == 200 and [m["name"] for m in listing["items"]] == ["m"]  # one store behind both prefixes
    registry_stub.serve_api_versions("v1alpha3")
    assert _call(registry_stub, "GET", f"{V1}/registered_models")[0] == 404
    assert _call(registry_stub, "GET", "/api/model_registry/v1alpha3/registered_models")[0] == 200
    with pytest.raises(ValueError, match="unknown API versions"):
        registry_stub.serve_api_versions("v2")


def test_scripted_5xx_faults_then_service(registry_stub):
    registry_stub.fail_next(2, 503, method="POST")
    assert _call(registry_stub, "GET", f"{V1}/registered_models")[0] == 200  # GETs are not affected
    assert _call(registry_stub, "POST", f"{V1}/registered_models", {"name": "m"})[0] == 503
    assert _call(registry_stub, "POST", f"{V1}/registered_models", {"name": "m"})[0] == 503
    assert _call(registry_stub, "POST", f"{V1}/registered_models", {"name": "m"})[0] == 201
    assert [r.status for r in registry_stub.requests_to("POST", "")] == [503, 503, 201]


def test_dropped_connection_fault(registry_stub):
    registry_stub.drop_next(1)
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        _call(registry_stub, "GET", f"{V1}/registered_models")
    assert _call(registry_stub, "GET", f"{V1}/registered_models")[0] == 200


def test_bearer_token_is_required_when_configured(registry_stub):
    registry_stub.require_token("good")
    assert _call(registry_stub, "GET", f"{V1}/registered_models")[0] == 401
    assert _call(registry_stub, "GET", f"{V1}/registered_models", token="bad")[0] == 401
    assert _call(registry_stub, "GET", f"{V1}/registered_models", token="good")[0] == 200
    with pytest.raises(Exception, match="401"):
        _client(registry_stub, token="bad")


def test_conflicting_names_are_409(registry_stub):
    assert _call(registry_stub, "POST", f"{V1}/registered_models", {"name": "m"})[0] == 201
    assert _call(registry_stub, "POST", f"{V1}/registered_models", {"name": "m"})[0] == 409


def test_tls_stub_needs_its_ca(registry_stub_tls):
    trusted = ssl.create_default_context(cafile=str(registry_stub_tls.ca_bundle))
    assert _call(registry_stub_tls, "GET", f"{V1}/registered_models", context=trusted)[0] == 200
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        _call(registry_stub_tls, "GET", f"{V1}/registered_models", context=ssl.create_default_context())


def test_spec_helpers():
    op, params = find_operation("POST", "/model_versions/7/artifacts")
    assert op.operation_id == "upsertModelVersionArtifact" and params == {"modelversionId": "7"}
    assert find_operation("PUT", "/model_versions/7") is None
    assert validation_errors({"name": "x"}, schema_ref("RegisteredModelCreate")) == []
    assert validation_errors({}, schema_ref("RegisteredModelCreate")) == ["$: 'name' is a required property"]
