"""``request.model_registry_request``: every argument lands in its group; a mismatch is one line."""

import dataclasses
import inspect
from types import SimpleNamespace

import pytest

from components._common.arguments import parameter_fields
from components.deployment.kubeflow_model_registry import model_registry
from components.deployment.kubeflow_model_registry.lineage import ArtifactInfo
from components.deployment.kubeflow_model_registry.registration import ModelRegistryResult
from components.deployment.kubeflow_model_registry.request import (
    GROUPS,
    OUTPUTS,
    ModelRegistryRequest,
    model_registry_request,
)
from components.deployment.kubeflow_model_registry.run import Outputs, component_outputs

SIGNATURE = inspect.signature(model_registry.python_func)
PARAMETERS = SIGNATURE.parameters

#: The component's input artifacts: the request's own fields.
ARTIFACTS = ("model", "eval_metrics", "train_metrics", "dataset", "eval_results")


def _arguments() -> dict[str, object]:
    artifact = {
        name: SimpleNamespace(uri=f"s3://b/{name}", path=f"/in/{name}", metadata={"of": name}) for name in ARTIFACTS
    }
    return {name: artifact.get(name, object()) for name in PARAMETERS}


def test_the_artifact_and_output_names_are_the_components():
    inputs = {name for name, p in PARAMETERS.items() if "InputAnnotation" in str(p.annotation)}
    outputs = {name for name, p in PARAMETERS.items() if "Output" in str(p.annotation)}
    assert (inputs, outputs) == (set(ARTIFACTS), set(OUTPUTS))
    assert list(Outputs._fields) == list(SIGNATURE.return_annotation._fields)


def test_every_argument_lands_in_its_group_under_its_name_less_the_prefix():
    arguments = _arguments()
    request = model_registry_request(arguments)
    assert set(parameter_fields(ModelRegistryRequest, GROUPS)) == set(PARAMETERS) - set(OUTPUTS)
    for name, (group, field) in parameter_fields(ModelRegistryRequest, GROUPS).items():
        landed = getattr(request if group is None else getattr(request, group), field)
        if name in ARTIFACTS:
            assert landed == ArtifactInfo(f"s3://b/{name}", f"/in/{name}", {"of": name})
        else:
            assert landed is arguments[name] and name == GROUPS[group][1] + field, name
    assert request.deploy.gpus is arguments["deploy_gpus"] and request.run.run_id is arguments["pipeline_run_id"]
    assert all(dataclasses.fields(group_type) for group_type, _ in GROUPS.values())


def test_absent_artifacts_are_none():
    request = model_registry_request({**_arguments(), **dict.fromkeys(ARTIFACTS[1:])})
    assert (request.eval_metrics, request.train_metrics, request.dataset, request.eval_results) == (None,) * 4


def test_an_argument_that_is_no_artifact_is_one_line():
    with pytest.raises(TypeError, match=r"^model_registry argument dataset='x': expected a KFP input artifact"):
        model_registry_request({**_arguments(), "dataset": "x"})


def test_an_unknown_argument_is_one_line_naming_it():
    with pytest.raises(TypeError, match=r"^model_registry: arguments \['deploy_gpu'\] have no field") as raised:
        model_registry_request({**_arguments(), "deploy_gpu": 2})
    assert "\n" not in str(raised.value)


def test_the_outputs_come_from_the_result_in_order():
    result = ModelRegistryResult(**{f.name: f"<{f.name}>" for f in dataclasses.fields(ModelRegistryResult)})
    outputs = component_outputs(result)
    assert tuple(outputs) == ("<status>", "<model_id>", "<version_id>", "<uri>", "<endpoint_url>")
