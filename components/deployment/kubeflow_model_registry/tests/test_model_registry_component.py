"""The ``model_registry`` component: compiled spec, in-process ``python_func`` and runs through ``kfp.local``."""

import json

import pytest
import yaml
from kfp import compiler, dsl

from components.deployment.kubeflow_model_registry import model_registry
from pipelines.local_pipeline import local_pipeline

TOKEN = "component-token-9f8e7d"


@pytest.fixture
def model_artifact(tmp_path):
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps({"model_type": "llama"}))
    model = dsl.Model(uri=str(directory), metadata={"base_model": "tiny", "algorithm": "sft"})
    return model


def _metrics(tmp_path, name, **values):
    return dsl.Metrics(uri=str(tmp_path / name), metadata=values)


def _python_func(stub, tmp_path, model, **arguments):
    """``python_func`` in process against ``stub`` over plain HTTP, named ``tiny-chat`` unless ``arguments`` say."""
    defaults = dict(registry_address=stub.address, registry_port=stub.port, model_name="tiny-chat", is_secure=False)
    summary = dsl.Markdown(uri=str(tmp_path / "summary.md"))
    return model_registry.python_func(model=model, summary=summary, **{**defaults, **arguments})


def test_compiled_spec_has_the_contract_and_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("MODEL_REGISTRY_TOKEN", TOKEN)
    path = tmp_path / "component.yaml"
    compiler.Compiler().compile(model_registry, str(path))
    text = path.read_text()
    spec = yaml.safe_load(text)
    inputs = spec["root"]["inputDefinitions"]
    assert set(inputs["artifacts"]) == {"model", "eval_metrics", "train_metrics", "dataset", "eval_results"}
    optional = ("eval_metrics", "train_metrics", "dataset", "eval_results")
    assert all(inputs["artifacts"][name]["isOptional"] for name in optional)
    params = inputs["parameters"]
    assert params["registry_address"]["defaultValue"] == "" and params["registry_port"]["defaultValue"] == 443
    assert params["is_secure"]["defaultValue"] is True and params["model_format_name"]["defaultValue"] == "pytorch"
    assert params["pipeline_run_id"]["defaultValue"] == dsl.PIPELINE_JOB_ID_PLACEHOLDER
    gates = ("min_improvement_metric", "min_improvement", "max_regression", "max_regression_relative")
    assert [params[name]["defaultValue"] for name in gates] == ["", 0.0, -1.0, False]  # no gate by default
    outputs = {"status", "model_id", "version_id", "model_uri", "endpoint_url"}
    assert set(spec["root"]["outputDefinitions"]["parameters"]) == outputs
    assert set(spec["root"]["outputDefinitions"]["artifacts"]) == {"summary"}
    assert "token" not in {name.lower() for name in params}
    assert TOKEN not in text


def test_python_func_registers_in_process(registry_stub, tmp_path, model_artifact, monkeypatch):
    monkeypatch.setenv("MODEL_REGISTRY_TOKEN", TOKEN)
    registry_stub.require_token(TOKEN)
    outputs = _python_func(
        registry_stub,
        tmp_path,
        model_artifact,
        model_version="0.1.0",
        allow_token_over_http=True,
        model_uri="pvc://models/tiny-chat/0.1.0",
        eval_metrics=_metrics(tmp_path, "eval", acc=0.8),
        min_metric_name="acc",
        min_metric_value=0.5,
        pipeline_run_id="run-abc",
    )
    [version] = registry_stub.model_versions.values()
    assert (outputs.status, outputs.version_id) == ("registered", version["id"])
    assert version["name"] == "0.1.0" and version["customProperties"]["eval.acc"]["double_value"] == 0.8
    assert "pvc://models/tiny-chat/0.1.0" in (tmp_path / "summary.md").read_text()


def test_an_address_without_a_name_registers_under_the_default_name_and_run_version(
    registry_stub, tmp_path, model_artifact, capsys
):
    """As the peer does: the name from the algorithm and the base model, the version from the run."""
    outputs = _python_func(
        registry_stub,
        tmp_path,
        model_artifact,
        model_name="",
        model_uri="pvc://models/tiny/1",
        pipeline_run_id="3f2a9c1e-77aa-4b1c",
    )
    [model] = registry_stub.registered_models.values()
    [version] = registry_stub.model_versions.values()
    assert outputs.status == "registered" and model["name"] == "sft-tiny"
    assert version["name"].endswith("-3f2a9c1e"), version["name"]
    assert "model_name is empty: registering as 'sft-tiny'" in capsys.readouterr().out


def test_kfp_local_registers_for_real(kfp_local, registry_stub, tmp_path, monkeypatch):
    monkeypatch.setenv("MODEL_REGISTRY_TOKEN", TOKEN)  # the task subprocess inherits it, as from a secret env
    registry_stub.require_token(TOKEN)
    model_dir = tmp_path / "local-model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")

    @dsl.pipeline
    def register_pipeline(address: str, port: int) -> str:
        model = dsl.importer(
            artifact_uri=str(model_dir), artifact_class=dsl.Model, metadata={"base_model": "tiny", "algorithm": "lora"}
        )
        task = model_registry(
            model=model.output,
            registry_address=address,
            registry_port=port,
            model_name="tiny-chat",
            is_secure=False,
            allow_token_over_http=True,
            model_uri="pvc://models/tiny-chat/local",
        )
        return task.outputs["version_id"]

    result = local_pipeline(register_pipeline)(address=registry_stub.address, port=registry_stub.port)
    [version] = registry_stub.model_versions.values()
    assert result.output == version["id"]
    props = version["customProperties"]
    # The run id came from the component's default placeholder, resolved by kfp.local.
    run_id = props["pipeline_run_id"]["string_value"]
    assert run_id and not run_id.startswith("{{") and version["name"].endswith(run_id[:8])
    assert props["algorithm"]["string_value"] == "lora"
    assert [a["uri"] for a in registry_stub.artifacts.values()] == ["pvc://models/tiny-chat/local"]
    summaries = list(kfp_local.rglob("summary.md"))
    assert summaries and "`registered`" in summaries[0].read_text() and TOKEN not in summaries[0].read_text()
