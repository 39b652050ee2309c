"""The registry step and ``train_model``'s manifest: weights read in place on the workspace, never registered there."""

from __future__ import annotations

import json

import pytest

from components._common.model_location import STORAGE_WORKSPACE, build_manifest, write_manifest
from components.deployment.kubeflow_model_registry.lineage import ArtifactInfo
from components.deployment.kubeflow_model_registry.model_uri import model_files_dir, resolve_serving_uri
from components.deployment.kubeflow_model_registry.tests.registry_runs import TOKEN, register, s3_environ


@pytest.fixture
def workspace_model(tmp_path):
    """A manifest-only ``Model`` artifact whose weights are in ``<workspace>/train_model/<task>/checkpoints/final``."""
    weights = tmp_path / "kfp-workspace" / "train_model" / "train-model-1" / "checkpoints" / "final"
    weights.mkdir(parents=True)
    (weights / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (weights / "model.safetensors").write_bytes(bytes(range(256)) * 8)
    manifest = build_manifest(weights, STORAGE_WORKSPACE, in_artifact=False)
    artifact = tmp_path / "artifact" / "output_model"
    write_manifest(artifact, manifest)
    metadata = {
        "checkpoint_path": str(weights),
        "base_model": "tiny-llama-offline",
        "algorithm": "sft",
        "backend": "trainjob",
        **manifest.metadata(),
    }
    return ArtifactInfo(uri="s3://pipeline-root/run-1/train-model/output_model", path=str(artifact), metadata=metadata)


def _register(stub, tmp_path, model, environ, **overrides):
    """No ``model_uri``: the URI comes from the model's manifest, as ``train_model`` wrote it."""
    workspace = str(tmp_path / "kfp-workspace")
    environ = {"MODEL_REGISTRY_TOKEN": TOKEN, **environ}
    overrides = {"model_uri": "", "pvc_path": workspace, "log": lambda line: None, **overrides}
    return register(stub, tmp_path, model, environ, **overrides)


def test_the_upload_streams_the_weights_from_the_workspace(
    registry_stub, tmp_path, workspace_model, s3_data_connection
):
    client, bucket = s3_data_connection
    environ = s3_environ()
    prefix = f"s3://{bucket}/tiny-chat/run-1"
    result = _register(registry_stub, tmp_path, workspace_model, environ, s3_upload_prefix=prefix)
    assert result.status == "registered" and result.uri == prefix
    weights = model_files_dir(workspace_model)
    stored = {o["Key"]: o["Size"] for o in client.list_objects_v2(Bucket=bucket, Prefix="tiny-chat/")["Contents"]}
    assert stored == {f"tiny-chat/run-1/{p.name}": p.stat().st_size for p in weights.iterdir()}
    assert "tiny-chat/run-1/kfp_finetune_model.json" not in stored  # the manifest is not the model


def test_the_run_workspace_is_never_registered_silently(registry_stub, tmp_path, workspace_model):
    with pytest.raises(ValueError) as error:
        _register(registry_stub, tmp_path, workspace_model, {})
    message = str(error.value)
    assert "\n" not in message and "workspace PVC, which KFP deletes when the run succeeds" in message
    assert "modelcar_uri" in message and "s3_upload_prefix" in message
    assert registry_stub.model_versions == {}
    # Nor when the claim is named explicitly: KFP's workspace claims are "<run>-kfp-workspace".
    with pytest.raises(ValueError, match=r"model_uri='pvc://sft-abc12-kfp-workspace/.*modelcar_uri.*s3_upload_prefix"):
        _register(registry_stub, tmp_path, workspace_model, {}, model_uri="pvc://sft-abc12-kfp-workspace/train_model/x")
    # Nor through the artifact's own URI in the pipeline root: it holds the manifest, not the weights.
    with pytest.raises(ValueError, match="workspace PVC"):
        resolve_serving_uri(workspace_model, environ={})


def test_a_claim_of_the_users_own_is_registered(registry_stub, tmp_path, workspace_model):
    result = _register(registry_stub, tmp_path, workspace_model, {}, model_uri="pvc://team-models/tiny-chat/v1")
    assert result.status == "registered" and result.uri == "pvc://team-models/tiny-chat/v1"


def test_changed_weights_are_refused_before_anything_is_uploaded(
    registry_stub, tmp_path, workspace_model, s3_data_connection
):
    client, bucket = s3_data_connection
    weights = tmp_path / "kfp-workspace" / "train_model" / "train-model-1" / "checkpoints" / "final"
    (weights / "model.safetensors").write_bytes(b"\0" * 10)
    environ = s3_environ()
    with pytest.raises(ValueError, match="model.safetensors has 10 bytes, the manifest 2048"):
        _register(registry_stub, tmp_path, workspace_model, environ, s3_upload_prefix=f"s3://{bucket}/tiny/run-1")
    assert "Contents" not in client.list_objects_v2(Bucket=bucket, Prefix="tiny/")
    assert registry_stub.model_versions == {}
