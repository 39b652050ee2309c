"""The ``model_registry`` tests' fixtures: a model to register, KServe on the Kubernetes emulator."""

from __future__ import annotations

import json

import pytest

from components.deployment.kubeflow_model_registry.lineage import ArtifactInfo


@pytest.fixture
def model_files(tmp_path):
    directory = tmp_path / "model"
    (directory / "tokenizer").mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (directory / "model.safetensors").write_bytes(bytes(range(256)) * 8)
    (directory / "tokenizer" / "tokenizer.json").write_text("{}")
    return directory


@pytest.fixture
def model(model_files):
    return ArtifactInfo(
        uri=str(model_files),
        path=str(model_files),
        metadata={
            "checkpoint_path": str(model_files),
            "base_model": "tiny-llama-offline",
            "algorithm": "lora",
            "hyperparameters": {"learning_rate": 0.0002, "num_epochs": 2, "lora": {"r": 8}},
            "job_name": "tj-tiny-1",
            "job_kind": "PyTorchJob",
            "backend": "local",
            "dataset_sha256": "e3" * 32,
        },
    )


@pytest.fixture
def kserve(kube_api):
    """The Kubernetes emulator serving KServe's two resources, with API-server uids and resourceVersions."""
    for resource in ("inferenceservices", "servingruntimes"):
        kube_api.serve(f"serving.kserve.io/{'v1beta1' if resource == 'inferenceservices' else 'v1alpha1'}/{resource}")
        kube_api.track_metadata(resource)
    return kube_api
