"""Two runs register one version at once (``before_next`` lands the other's create first): never adopted."""

from __future__ import annotations

import datetime

import pytest

from components.deployment.kubeflow_model_registry.lineage import RunInfo
from components.deployment.kubeflow_model_registry.registration import VersionConflictError, derived_version_name
from components.deployment.kubeflow_model_registry.tests.registry_runs import RUN_ID, register

OTHER_RUN = "0ther-run-5678-aaaa"
OTHER_URI = "pvc://models/tiny/other-run"
NOW = datetime.datetime(2026, 11, 26, 12, 0, 0, tzinfo=datetime.timezone.utc)


def _other_run_creates(version_name: str):
    """What another run does at the same moment: create ``version_name`` with its lineage and its artifact."""

    def create(stub) -> None:
        (model_id,) = [m["id"] for m in stub.registered_models.values() if m["name"] == "tiny-chat"]
        properties = {"pipeline_run_id": {"string_value": OTHER_RUN, "metadataType": "MetadataStringValue"}}
        _, version = stub._op_createModelVersion(
            body={"name": version_name, "registeredModelId": model_id, "customProperties": properties}
        )
        stub._op_upsertModelVersionArtifact(
            path_params={"modelversionId": version["id"]},
            body={"artifactType": "model-artifact", "name": "tiny-chat", "uri": OTHER_URI},
        )

    return create


def _versions(stub) -> dict[str, tuple[str, list[str]]]:
    """version name -> (recorded run, artifact URIs)."""
    return {
        version["name"]: (
            version["customProperties"]["pipeline_run_id"]["string_value"],
            [artifact["uri"] for artifact in stub.artifacts_of(version["id"])],
        )
        for version in stub.versions_of("tiny-chat")
    }


def test_a_version_created_at_the_same_time_by_another_run_is_never_adopted(registry_stub, tmp_path, model):
    registry_stub.before_next(_other_run_creates("1.0"), method="POST", path_contains="/model_versions")
    with pytest.raises(VersionConflictError) as error:
        register(registry_stub, tmp_path, model, model_version="1.0")
    message = str(error.value)
    assert "\n" not in message and f"created at the same time by pipeline run {OTHER_RUN}" in message
    assert RUN_ID in message
    assert _versions(registry_stub) == {"1.0": (OTHER_RUN, [OTHER_URI])}  # its artifact and lineage untouched


def test_an_auto_version_taken_at_the_same_time_registers_the_next_free_name(registry_stub, tmp_path, model):
    derived = derived_version_name(RunInfo(run_id=RUN_ID), NOW)
    registry_stub.before_next(_other_run_creates(derived), method="POST", path_contains="/model_versions")
    lines: list[str] = []
    result = register(registry_stub, tmp_path, model, now=NOW, log=lines.append)
    assert result.status == "registered" and result.version_name == f"{derived}-2"
    assert _versions(registry_stub) == {
        derived: (OTHER_RUN, [OTHER_URI]),
        f"{derived}-2": (RUN_ID, ["pvc://models/tiny/run-1"]),
    }
    assert any(f"version {derived!r} is pipeline run {OTHER_RUN}'s: trying {derived}-2" in line for line in lines)


def test_a_retry_of_this_run_still_finds_its_own_version_after_a_lost_answer(registry_stub, tmp_path, model):
    registry_stub.fail_next(1, 502, method="POST", path_contains="/model_versions", after_serving=True)
    result = register(registry_stub, tmp_path, model, model_version="1.0")
    assert result.status == "registered"
    assert _versions(registry_stub) == {"1.0": (RUN_ID, ["pvc://models/tiny/run-1"])}
