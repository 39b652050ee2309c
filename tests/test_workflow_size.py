"""The Argo Workflow of every pipeline, through a full run with every optional step on, fits half of Argo's limit.

The model (``benchmarks/argo_workflow.py``) follows the KFP Argo backend RHOAI ships; ``benchmarks/workflow_size.py``
prints the table the docs quote.
"""

import json

import pytest

from benchmarks.argo_workflow import RELEASES, go_json, workflow
from benchmarks.workflow_size import LIMIT_BYTES, MAX_WORKFLOW_SIZE, breakdown, model_compiled
from pipelines.training.finetuning import PIPELINES
from tests.harness.compiled import pipeline_documents


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("name", list(PIPELINES))
def test_every_pipelines_workflow_stays_under_half_of_argos_limit(name, release, shipped_pipeline_yamls):
    sizes = breakdown(model_compiled(shipped_pipeline_yamls[name], release))
    assert LIMIT_BYTES == MAX_WORKFLOW_SIZE // 2 == 512 * 1024
    assert sizes["total"] < LIMIT_BYTES, f"{name} on KFP {release}: {sizes}"
    assert sizes["compressed"] < sizes["total"]  # what Argo falls back to past MAX_WORKFLOW_SIZE is smaller still


def test_the_model_holds_each_tasks_specs_where_the_backend_keeps_them(shipped_pipeline_yamls):
    """Per task: the component spec in the arguments, the driver's inputs and three pod-spec-patches (as the sources
    say); a pipeline whose component specs grow grows the model by at least five times that."""
    spec, platform = pipeline_documents(shipped_pipeline_yamls["sft"])[:2]
    document = workflow(spec, platform)
    nodes = document["status"]["nodes"]
    component = go_json(spec["components"]["comp-train-model"])
    driver = next(n for n in nodes.values() if n["displayName"] == "train-model-driver")
    inputs = {p["name"]: p["value"] for p in driver["inputs"]["parameters"]}
    assert inputs["component"] == component
    assert json.loads(inputs["task"]) == spec["root"]["dag"]["tasks"]["train-model"]
    patch = next(p["value"] for p in driver["outputs"]["parameters"] if p["name"] == "pod-spec-patch")
    command = json.loads(patch)["containers"][0]["command"]
    assert command[command.index("--component_spec") + 1] == component
    carrying = [n["displayName"] for n in nodes.values() if patch in [p["value"] for p in n["inputs"]["parameters"]]]
    assert sorted(carrying) == ["executor", "train-model"]
    arguments = [p["value"] for p in document["spec"]["arguments"]["parameters"]]
    assert component in arguments and go_json(spec["root"]) in arguments
    grown = json.loads(json.dumps(spec))
    grown["components"]["comp-train-model"]["description"] = "x" * 10_000
    added = breakdown(workflow(grown, platform))["total"] - breakdown(document)["total"]
    assert added >= 5 * 10_000, added
