"""All six pipelines take an ``oci://`` base model: the parameter, the TLS options, the pull secret's two keys."""

from __future__ import annotations

import pytest

from tests.harness.compiled import pipeline_documents

OCI_MODEL = "oci://quay.io/org/granite-modelcar:1.0"


def _base_model_parameter(documents: list[dict]) -> str:
    """The dashboard parameter feeding ``train_model``'s base model (found by meaning, not by name)."""
    inputs = documents[0]["root"]["inputDefinitions"]["parameters"]
    found = [name for name, spec in inputs.items() if "_train_man_" in name and "oci://" in spec["description"]]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def compiled(default_settings_yamls) -> dict[str, list[dict]]:
    """Every pipeline compiled with default settings (the session's compile): name -> YAML documents."""
    return {name: pipeline_documents(path) for name, path in default_settings_yamls.items()}


def test_every_pipeline_passes_an_oci_base_model_to_train_model_and_it_validates(compiled):
    from components.training.finetuning.run import validate_request
    from tests.harness.requests import train_model_request

    assert len(compiled) == 8  # the guide's six and the two GRPO pipelines
    names = {_base_model_parameter(documents) for documents in compiled.values()}
    assert len(names) == 1  # one name in every pipeline
    for name, documents in compiled.items():
        parameter = _base_model_parameter(documents)
        inputs = documents[0]["root"]["inputDefinitions"]["parameters"]
        assert inputs[parameter]["parameterType"] == "STRING", name
        task = documents[0]["root"]["dag"]["tasks"]["train-model"]
        fed = task["inputs"]["parameters"]
        wired = [arg for arg, value in fed.items() if value.get("componentInputParameter") == parameter]
        assert wired == ["training_base_model"], f"{name}: {parameter} does not reach train-model's base model"
        # What train_model checks first, with the value a user types in the dashboard.
        algorithm = next(v["runtimeValue"]["constant"] for k, v in fed.items() if k.endswith("algorithm"))
        request = train_model_request(
            training_base_model=OCI_MODEL, training_algorithm=algorithm, training_launcher="local"
        )
        config = validate_request(request, False)
        assert config.base_model == OCI_MODEL


def test_expert_pipelines_expose_the_tls_options_and_minimal_ones_fix_them_to_verify(compiled):
    for name, documents in compiled.items():
        inputs = documents[0]["root"]["inputDefinitions"]["parameters"]
        exposed = {key for key in inputs if key.endswith(("oci_insecure", "oci_ca_bundle"))}
        fed = documents[0]["root"]["dag"]["tasks"]["train-model"]["inputs"]["parameters"]
        if name.endswith("minimal"):
            assert exposed == set(), name
            # Not passed: the component's default (verify) applies.
            assert "training_oci_insecure" not in fed and "training_oci_ca_bundle" not in fed, name
            declared = documents[0]["components"]["comp-train-model"]["inputDefinitions"]["parameters"]
            assert declared["training_oci_insecure"]["defaultValue"] is False, name
            assert declared["training_oci_ca_bundle"]["defaultValue"] == "", name
        else:
            assert len(exposed) == 2, name
            assert all(inputs[key].get("isOptional") for key in exposed), name


def test_the_pull_secret_is_read_under_the_guides_key_and_as_dockerconfigjson(compiled):
    for name, documents in compiled.items():
        executors = documents[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
        mounts = [s for s in executors["exec-train-model"]["secretAsEnv"] if s["secretName"].startswith("oci-pull")]
        assert len(mounts) == 1 and mounts[0]["optional"] is True, name
        key_to_env = {item["secretKey"]: item["envVar"] for item in mounts[0]["keyToEnv"]}
        assert key_to_env == {
            "OCI_PULL_SECRET_MODEL_DOWNLOAD": "OCI_PULL_SECRET_MODEL_DOWNLOAD",
            ".dockerconfigjson": "OCI_PULL_SECRET_DOCKERCONFIGJSON",
        }, name
