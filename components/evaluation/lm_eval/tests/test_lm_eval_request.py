"""``run.lm_eval_request``: every ``lm_eval`` argument reaches the request (artifacts as path, metadata)."""

import dataclasses
import inspect
from types import SimpleNamespace

import pytest

from components.evaluation.lm_eval import lm_eval
from components.evaluation.lm_eval.run import ARTIFACT_FIELDS, OUTPUTS, lm_eval_request

PARAMETERS = inspect.signature(lm_eval.python_func).parameters


def _arguments() -> dict[str, object]:
    """A distinct value per argument; input artifacts as artifact-like objects with their own path and metadata."""
    artifact = {name: SimpleNamespace(path=f"/in/{name}", metadata={"of": name}) for name in ARTIFACT_FIELDS}
    return {name: artifact.get(name, object()) for name in PARAMETERS}


def test_the_artifact_and_output_names_are_the_components():
    inputs = {name for name, p in PARAMETERS.items() if "InputAnnotation" in str(p.annotation)}
    outputs = {name for name, p in PARAMETERS.items() if "Output" in str(p.annotation)}
    assert (inputs, outputs) == (set(ARTIFACT_FIELDS), set(OUTPUTS))


def test_every_argument_lands_in_the_request():
    arguments = _arguments()
    request = lm_eval_request(arguments)
    fields = {field.name for field in dataclasses.fields(request)}
    for name in set(PARAMETERS) - set(ARTIFACT_FIELDS) - set(OUTPUTS):
        assert getattr(request, name) is arguments[name], name
    for name, (path_field, metadata_field) in ARTIFACT_FIELDS.items():
        assert getattr(request, path_field) == f"/in/{name}"
        if metadata_field:
            assert getattr(request, metadata_field) == {"of": name}
    derived = {field for pair in ARTIFACT_FIELDS.values() for field in pair if field}
    assert fields == (set(PARAMETERS) - set(ARTIFACT_FIELDS) - set(OUTPUTS)) | derived


def test_absent_artifacts_are_empty_paths_and_metadata():
    request = lm_eval_request({**_arguments(), **dict.fromkeys(ARTIFACT_FIELDS)})
    assert (request.model_path, request.model_metadata, request.custom_tasks_path) == ("", {}, "")
    assert (request.eval_dataset_path, request.eval_dataset_metadata, request.baseline_results_path) == ("", {}, "")


def test_an_argument_that_is_no_artifact_is_one_line():
    with pytest.raises(TypeError, match=r"^lm_eval argument model='/models/x': expected a KFP input artifact"):
        lm_eval_request({**_arguments(), "model": "/models/x"})


def test_a_missing_argument_is_one_line_naming_it():
    arguments = _arguments()
    del arguments["max_new_tokens"]
    with pytest.raises(TypeError, match=r"^lm_eval: .*\['max_new_tokens'\] are missing") as raised:
        lm_eval_request(arguments)
    assert "\n" not in str(raised.value)
