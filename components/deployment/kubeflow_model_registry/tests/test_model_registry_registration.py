"""Registration for real: the ``model_registry`` client against the stateful registry stub (and moto for S3)."""

import json

import pytest

from components.deployment.kubeflow_model_registry.lineage import ArtifactInfo
from components.deployment.kubeflow_model_registry.registration import VersionConflictError
from components.deployment.kubeflow_model_registry.registry_client import RegistryAuthError, RegistryRequestError
from components.deployment.kubeflow_model_registry.tests.registry_runs import (
    RUN_ID,
    TOKEN,
    properties,
    register,
    s3_environ,
)
from tests.harness.requests import dataset_metadata


def _statuses(stub):
    return [(r.method, r.resource, r.status) for r in stub.requests]


def test_first_registration(registry_stub, tmp_path, model, capsys):
    registry_stub.require_token(TOKEN)
    result = register(registry_stub, tmp_path, model, author="alice", description="first try")

    assert result.status == "registered" and result.api_version == "v1"
    [stored_model] = registry_stub.registered_models.values()
    [version] = registry_stub.model_versions.values()
    [artifact] = registry_stub.artifacts.values()
    assert (result.model_id, result.version_id) == (stored_model["id"], version["id"])
    assert stored_model["name"] == "tiny-chat" and stored_model["owner"] == "alice"
    assert version["name"].endswith("-7c0ffee0") and version["author"] == "alice"
    assert version["description"] == "first try"
    props = properties(version)
    assert props["pipeline_run_id"] == RUN_ID and props["pipeline_run_name"] == "tiny-finetune-run-1"
    assert props["dataset_artifact_uri"] == "s3://pipelines/run-1/dataset" and props["dataset_uri"] == "demo/chat@v1"
    assert props["dataset_sha256"] == "e3" * 32
    assert props["base_model"] == "tiny-llama-offline" and props["algorithm"] == "lora"
    assert props["hyperparameter.learning_rate"] == 0.0002 and props["hyperparameter.lora.r"] == "8"
    assert props["train.loss"] == 1.25 and props["eval.acc"] == 0.7
    assert props["job_name"] == "tj-tiny-1" and props["job_kind"] == "PyTorchJob" and "trainjob_name" not in props
    assert props["library_version.model-registry"] == "0.3.18"
    assert registry_stub.version_artifacts[version["id"]] == [artifact["id"]]
    assert artifact["uri"] == "pvc://models/tiny/run-1" and artifact["modelFormatName"] == "pytorch"
    assert artifact["modelSourceId"] == RUN_ID and artifact["modelSourceKind"] == "kfp"

    assert all(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in registry_stub.requests)
    posts = [r.resource for r in registry_stub.requests if r.method == "POST"]
    assert posts == ["/registered_models", "/model_versions", f"/model_versions/{version['id']}/artifacts"]
    summary = (tmp_path / "summary.md").read_text()
    assert "`registered`" in summary and "pvc://models/tiny/run-1" in summary and f"id {version['id']}" in summary
    assert f"/api/model_registry/v1/model_versions/{version['id']}" in summary
    assert TOKEN not in summary and TOKEN not in capsys.readouterr().out


@pytest.mark.parametrize(
    "arguments", [{}, {"model_version": "1.0.0", "pipeline_run_id": ""}], ids=["derived-version", "explicit-no-run"]
)
def test_rerun_registers_nothing_twice(registry_stub, tmp_path, model, arguments):
    first = register(registry_stub, tmp_path, model, **arguments)
    requests_after_first = len(registry_stub.requests)
    second = register(registry_stub, tmp_path, model, **arguments)

    assert second.status == "already_registered"
    assert (second.model_id, second.version_id) == (first.model_id, first.version_id)
    assert (
        len(registry_stub.registered_models) == len(registry_stub.model_versions) == len(registry_stub.artifacts) == 1
    )
    version_name = arguments.get("model_version", first.version_name)
    assert [v["name"] for v in registry_stub.model_versions.values()] == [version_name]
    assert [r for r in registry_stub.requests[requests_after_first:] if r.method != "GET"] == []
    assert "already existed" in (tmp_path / "summary.md").read_text()


def test_conflicting_rerun_is_refused(registry_stub, tmp_path, model):
    register(registry_stub, tmp_path, model, model_version="1.0.0")
    count = len(registry_stub.requests)
    with pytest.raises(VersionConflictError) as error:
        register(registry_stub, tmp_path, model, model_version="1.0.0", model_uri="pvc://models/tiny/other")
    message = str(error.value)
    assert "'1.0.0'" in message and "pvc://models/tiny/run-1" in message and "pvc://models/tiny/other" in message
    assert [r.method for r in registry_stub.requests[count:]] == ["GET"] * (len(registry_stub.requests) - count)
    assert [a["uri"] for a in registry_stub.artifacts.values()] == ["pvc://models/tiny/run-1"]


def test_gate_pass_registers(registry_stub, tmp_path, model):
    result = register(registry_stub, tmp_path, model, min_metric_name="acc", min_metric_value=0.6)
    assert result.status == "registered" and len(registry_stub.model_versions) == 1
    assert "eval_metrics acc = 0.7 >= min_metric_value 0.6" in (tmp_path / "summary.md").read_text()


def test_gate_fail_is_gated_out_without_touching_the_registry(registry_stub, tmp_path, model):
    result = register(registry_stub, tmp_path, model, min_metric_name="acc", min_metric_value=0.75)
    assert (result.status, result.model_id, result.version_id) == ("gated_out", "", "")
    assert "acc = 0.7 < min_metric_value 0.75" in result.reason
    assert registry_stub.requests == []
    summary = (tmp_path / "summary.md").read_text()
    assert "`gated_out`" in summary and "gate not met" in summary


def test_empty_address_skips(registry_stub, tmp_path, model, capsys):
    result = register(registry_stub, tmp_path, model, registry_address="")
    assert result.status == "skipped" and "registry_address is empty" in result.reason
    assert "skipped: registry_address is empty" in capsys.readouterr().out
    assert registry_stub.requests == [] and "`skipped`" in (tmp_path / "summary.md").read_text()


def test_5xx_then_success(registry_stub, tmp_path, model):
    registry_stub.fail_next(2, 503)
    result = register(registry_stub, tmp_path, model)
    assert result.status == "registered"
    assert _statuses(registry_stub)[:3] == [
        ("GET", "/registered_models", 503),
        ("GET", "/registered_models", 503),
        ("GET", "/registered_models", 200),
    ]
    assert len(registry_stub.model_versions) == len(registry_stub.artifacts) == 1


def test_lost_answers_and_dropped_connections_create_no_duplicates(registry_stub, tmp_path, model):
    # The version is created but its answer is lost (502); the retry must find it, not create a second one.
    registry_stub.fail_next(1, 502, method="POST", path_contains="/model_versions", after_serving=True)
    registry_stub.drop_next(1, method="POST", path_contains="/artifacts")
    result = register(registry_stub, tmp_path, model)
    assert result.status == "registered"
    assert len(registry_stub.model_versions) == len(registry_stub.artifacts) == 1
    version_posts = [
        r.status for r in registry_stub.requests_to("POST", "/model_versions") if "/artifacts" not in r.path
    ]
    assert version_posts == [502]  # the retry found the version instead of posting again
    artifact_posts = [r.status for r in registry_stub.requests if r.path.endswith("/artifacts") and r.method == "POST"]
    assert artifact_posts == [-1, 201]


def test_persistent_5xx_gives_up_clearly(registry_stub, tmp_path, model):
    registry_stub.fail_next(100, 500)
    with pytest.raises(RegistryRequestError, match=r"HTTP 500 .*gave up after 4 tries"):
        register(registry_stub, tmp_path, model)
    assert len(registry_stub.requests) == 4 and registry_stub.registered_models == {}


def test_401_gives_a_clear_message_without_the_token(registry_stub, tmp_path, model):
    registry_stub.require_token("the-right-one")
    with pytest.raises(RegistryAuthError) as error:
        register(registry_stub, tmp_path, model)
    message = str(error.value)
    assert "rejected the bearer token (HTTP 401)" in message and "MODEL_REGISTRY_TOKEN" in message
    assert registry_stub.url in message and TOKEN not in message
    assert [r.status for r in registry_stub.requests] == [401]  # not retried
    assert registry_stub.registered_models == {} and not (tmp_path / "summary.md").exists()


def test_old_server_is_spoken_to_in_v1alpha3(registry_stub, tmp_path, model):
    registry_stub.serve_api_versions("v1alpha3")
    result = register(registry_stub, tmp_path, model)
    assert result.status == "registered" and result.api_version == "v1alpha3"
    assert _statuses(registry_stub)[0] == ("GET", "/registered_models", 404)
    assert {r.api_version for r in registry_stub.requests[1:]} == {"v1alpha3"}
    assert len(registry_stub.artifacts) == 1
    assert "API /api/model_registry/v1alpha3" in (tmp_path / "summary.md").read_text()


def test_server_without_any_known_api(registry_stub, tmp_path, model):
    registry_stub.serve_api_versions()
    with pytest.raises(RegistryRequestError, match="serves no Model Registry REST API"):
        register(registry_stub, tmp_path, model)


def test_half_done_version_is_completed(registry_stub, tmp_path, model):
    register(registry_stub, tmp_path, model, model_version="2.0", model_uri="pvc://models/seed")
    [version] = registry_stub.model_versions.values()
    registry_stub.version_artifacts[version["id"]].clear()  # as if the artifact call never happened
    result = register(registry_stub, tmp_path, model, model_version="2.0")
    assert result.status == "registered" and result.version_id == version["id"]
    assert [a["uri"] for a in registry_stub.artifacts_of(version["id"])] == ["pvc://models/tiny/run-1"]


def test_tls_is_verified_with_the_ca_bundle(registry_stub_tls, tmp_path, model):
    registry_stub_tls.require_token(TOKEN)
    trusted = register(
        registry_stub_tls, tmp_path, model, is_secure=True, ca_bundle_path=str(registry_stub_tls.ca_bundle)
    )
    assert trusted.status == "registered" and len(registry_stub_tls.artifacts) == 1
    with pytest.raises(RegistryRequestError, match="TLS verification of Model Registry at https://localhost:.* failed"):
        register(registry_stub_tls, tmp_path, model, is_secure=True, model_version="other")


def test_s3_upload_registers_the_s3_uri(registry_stub, tmp_path, model, model_files, s3_data_connection):
    client, bucket = s3_data_connection  # a moto server on 127.0.0.1 and the data-connection env vars
    environ = s3_environ()
    prefix = f"s3://{bucket}/tiny-chat/run-1"
    result = register(registry_stub, tmp_path, model, model_uri="", s3_upload_prefix=prefix, environ=environ)

    assert result.status == "registered" and result.uri == prefix
    [artifact] = registry_stub.artifacts.values()
    assert artifact["uri"] == prefix
    listed = client.list_objects_v2(Bucket=bucket, Prefix="tiny-chat/run-1/")["Contents"]
    stored = {obj["Key"]: obj["Size"] for obj in listed}
    expected = {
        f"tiny-chat/run-1/{p.relative_to(model_files).as_posix()}": p.stat().st_size
        for p in model_files.rglob("*")
        if p.is_file()
    }
    assert stored == expected
    body = client.get_object(Bucket=bucket, Key="tiny-chat/run-1/model.safetensors")["Body"].read()
    assert body == (model_files / "model.safetensors").read_bytes()

    # A re-run finds the registration and uploads nothing.
    client.delete_object(Bucket=bucket, Key="tiny-chat/run-1/config.json")
    again = register(registry_stub, tmp_path, model, model_uri="", s3_upload_prefix=prefix, environ=environ)
    assert again.status == "already_registered"
    assert "tiny-chat/run-1/config.json" not in {
        o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="tiny-chat/")["Contents"]
    }


def test_s3_upload_without_credentials_fails_before_registering(registry_stub, tmp_path, model):
    with pytest.raises(ValueError, match="s3_upload_prefix is set, but S3 credentials missing: set AWS_ACCESS_KEY_ID"):
        register(registry_stub, tmp_path, model, model_uri="", s3_upload_prefix="s3://models/tiny/x")
    assert registry_stub.model_versions == {}


@pytest.mark.parametrize("recorded", ["0ther-run-5678", None])
def test_half_done_version_of_another_run_is_refused_naming_both_runs(registry_stub, tmp_path, model, recorded):
    register(registry_stub, tmp_path, model, model_version="2.0", model_uri="pvc://models/seed")
    [version] = registry_stub.model_versions.values()
    registry_stub.version_artifacts[version["id"]].clear()  # left without an artifact...
    if recorded is None:
        del version["customProperties"]["pipeline_run_id"]  # ...by a run that recorded no id
    else:
        version["customProperties"]["pipeline_run_id"]["string_value"] = recorded  # ...by another run
    with pytest.raises(VersionConflictError) as error:
        register(registry_stub, tmp_path, model, model_version="2.0")
    message = str(error.value)
    assert f"created by pipeline run {recorded or '<none recorded>'}" in message and RUN_ID in message
    assert "Delete the version" in message
    assert registry_stub.artifacts_of(version["id"]) == []  # nothing was attached under the other run's lineage


def test_token_is_withheld_from_plain_http_unless_allowed(registry_stub, tmp_path, model, monkeypatch):
    sa_token = tmp_path / "sa-token"
    sa_token.write_text("sa-token-9f8e7d")  # where the client itself would look for a token when given none
    monkeypatch.setenv("KF_PIPELINES_SA_TOKEN_PATH", str(sa_token))
    lines = []
    result = register(registry_stub, tmp_path, model, allow_token_over_http=False, log=lines.append)
    assert result.status == "registered"
    assert all("authorization" not in {k.lower() for k in r.headers} for r in registry_stub.requests)
    assert any("bearer token (env var MODEL_REGISTRY_TOKEN) is NOT sent to http://" in line for line in lines)
    assert not any(TOKEN in line for line in lines)
    register(registry_stub, tmp_path, model, model_version="9", log=lines.append)  # allow_token_over_http=True
    assert registry_stub.requests[-1].headers.get("authorization") == f"Bearer {TOKEN}"


def test_unverified_https_warns(registry_stub_tls, tmp_path, model):
    lines = []
    result = register(registry_stub_tls, tmp_path, model, is_secure=False, log=lines.append)
    assert result.status == "registered"
    [warning] = [line for line in lines if "is_secure=False with https://" in line]
    assert "certificate is NOT verified" in warning and TOKEN not in warning


def test_secret_values_never_reach_the_registry_or_the_summary(registry_stub, tmp_path, model, monkeypatch, capsys):
    secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzz"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    leaky = ArtifactInfo("s3://pipelines/run-1/dataset", "/tmp/ds", dataset_metadata(f"https://x/d.jsonl?sig={secret}"))
    register(registry_stub, tmp_path, model, dataset=leaky, environ={"MODEL_REGISTRY_TOKEN": TOKEN})
    [version] = registry_stub.model_versions.values()
    stored = json.dumps(version["customProperties"])
    assert "sig=***" in stored and secret not in stored
    summary = (tmp_path / "summary.md").read_text()
    out, err = capsys.readouterr()
    assert secret not in summary + out + err and TOKEN not in summary + out + err
