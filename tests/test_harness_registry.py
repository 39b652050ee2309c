"""The Model Registry stub: it must behave like the real REST API and refuse what the real one would refuse."""

import json
import urllib.error
import urllib.request

import pytest
from model_registry import ModelRegistry
from model_registry.exceptions import StoreError

from tests.harness.registry_stub import find_operation, schema_ref, validation_errors

V1 = "/api/model_registry/v1"


def _call(stub, method, path, body=None):
    """One raw HTTP call; returns (status, parsed JSON body)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(stub.url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_duplicate_version_is_refused_by_the_client_after_a_find(registry_stub):
    registry = ModelRegistry(registry_stub.address, registry_stub.port, author="t", is_secure=False, user_token="t")
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
        ({"artifactType": "bogus", "uri": "s3://x/y"}, "reference '#/components/schemas/bogus' could not be resolved"),
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


def test_conflicting_names_are_409(registry_stub):
    assert _call(registry_stub, "POST", f"{V1}/registered_models", {"name": "m"})[0] == 201
    assert _call(registry_stub, "POST", f"{V1}/registered_models", {"name": "m"})[0] == 409


def test_spec_helpers():
    op, params = find_operation("POST", "/model_versions/7/artifacts")
    assert op.operation_id == "upsertModelVersionArtifact" and params == {"modelversionId": "7"}
    assert find_operation("PUT", "/model_versions/7") is None
    assert validation_errors({"name": "x"}, schema_ref("RegisteredModelCreate")) == []
    assert validation_errors({}, schema_ref("RegisteredModelCreate")) == ["$: 'name' is a required property"]
