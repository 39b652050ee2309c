"""All six pipelines take an ``oci://`` base model: the parameter, the TLS options, the pull secret's two keys."""

from __future__ import annotations

import pytest
import yaml

from pipelines.compile import compile_named
from pipelines.training.finetuning import PIPELINES
from pipelines.training.finetuning.parameters import PARAMETERS
from pipelines.training.finetuning.settings import CompileSettings

OCI_MODEL = "oci://quay.io/org/granite-modelcar:1.0"


def _base_model_parameter():
    """The dashboard parameter feeding ``train_model``'s base model (found by meaning, not by name)."""
    found = [p for p in PARAMETERS if p.step == "train" and p.must_look and "oci://" in p.description]
    assert len(found) == 1, [p.dashboard_name for p in found]
    return found[0]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[str, list[dict]]:
    out = tmp_path_factory.mktemp("compiled-oci")
    return {
        name: list(yaml.safe_load_all(compile_named(name, out / f"{name}.yaml", CompileSettings()).read_text()))
        for name in PIPELINES
    }


def test_every_pipeline_passes_an_oci_base_model_to_train_model_and_it_validates(compiled):
    from components.training.finetuning.run import validate_request
    from tests.harness.requests import train_model_request

    parameter = _base_model_parameter()
    assert len(compiled) == 6
    for name, documents in compiled.items():
        inputs = documents[0]["root"]["inputDefinitions"]["parameters"]
        assert inputs[parameter.dashboard_name]["parameterType"] == "STRING", name
        assert "oci://" in inputs[parameter.dashboard_name]["description"], name
        task = documents[0]["root"]["dag"]["tasks"]["train-model"]
        fed = task["inputs"]["parameters"]
        wired = [arg for arg, value in fed.items() if value.get("componentInputParameter") == parameter.dashboard_name]
        assert wired, f"{name}: {parameter.dashboard_name} does not reach train-model"
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
            insecure = next(v for k, v in fed.items() if k.endswith("oci_insecure"))
            assert insecure["runtimeValue"]["constant"] is False, name
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
