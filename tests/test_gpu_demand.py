"""The default run of every pipeline fits its row of the guide's hardware table, the base-model evaluation included.

The peak concurrent GPU demand is derived from the compiled pipeline alone, as ``kfp-finetune doctor`` counts it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipelines.doctor.facts import RunValues, read_package
from pipelines.doctor.gpu_demand import gpu_demand, peak_of
from pipelines.training.finetuning import PIPELINES
from tests.harness.compiled import GRPO_PIPELINES, pipeline_documents

REPO_ROOT = Path(__file__).resolve().parents[1]
HARDWARE = yaml.safe_load((REPO_ROOT / "tests/specs/guide/rhoai_guide_facts.yaml").read_text())["hardware"]
#: LoRA and GRPO are not in the guide's table; their pipelines run on OSFT's single-GPU shape.
TABLE = {
    name: HARDWARE["osft"] if name in GRPO_PIPELINES else HARDWARE.get(name, HARDWARE.get(name.replace("lora", "osft")))
    for name in PIPELINES
}


@pytest.fixture(scope="module")
def packages(environment_settings_yamls):
    """Every pipeline compiled with the suite's settings (the session's compile): name -> YAML path."""
    return environment_settings_yamls


def _quantity(value: str) -> float:
    from kubernetes.utils import parse_quantity

    return float(parse_quantity(value))


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_default_run_peak_gpu_demand_fits_the_guides_table(packages, name):
    row = TABLE[name]
    cluster_gpus = row["nodes"] * row["gpus_per_node"]
    demand = gpu_demand(RunValues(read_package(packages[name]), {}), launcher="trainjob")
    assert demand.peak <= cluster_gpus, f"{name}: {demand.describe()} > the table's {cluster_gpus}"
    # Every GPU step runs at some point: the training job takes the whole row, each evaluation one GPU of it.
    assert demand.per_task["train-model"] == cluster_gpus, name
    if name not in GRPO_PIPELINES:  # the GRPO pipelines have no evaluation step
        assert demand.per_task["lm-eval"] == demand.per_task["lm-eval-2"] == 1, name
    assert all(gpus <= row["gpus_per_node"] * row["nodes"] for gpus in demand.per_task.values()), name


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_every_step_pod_fits_the_tables_cpu_and_memory_per_pod(packages, name):
    """Each step pod's requests fit a node of the row (the training pods' own figures are the row's: test_guide)."""
    row = TABLE[name]
    documents = pipeline_documents(packages[name])
    for executor, spec in documents[0]["deploymentSpec"]["executors"].items():
        resources = spec["container"].get("resources", {})
        assert _quantity(resources["resourceCpuRequest"]) <= _quantity(row["cpu"]), (name, executor)
        assert _quantity(resources["resourceMemoryRequest"]) <= _quantity(row["memory"]), (name, executor)


def test_overlapping_gpu_steps_add_up(packages):
    """Without the base evaluation's ``.after()``, OSFT's default run would want 2 GPUs on the table's 1."""
    facts = read_package(packages["osft-minimal"])
    upstreams = dict(facts.task_upstreams)
    assert "lm-eval" in upstreams["train-model"]  # training waits for the base model's evaluation
    upstreams["train-model"] = tuple(t for t in upstreams["train-model"] if t != "lm-eval")
    demand = gpu_demand(RunValues(facts, {}), launcher="trainjob")
    overlapping = peak_of(demand.per_task, upstreams)
    assert (demand.peak, overlapping.peak) == (1, 2)
    assert overlapping.tasks == {"lm-eval": 1, "train-model": 1}


def test_peak_of_a_diamond_and_the_local_launcher(packages):
    upstreams = {"a": (), "b": ("a",), "c": ("a",), "d": ("b", "c")}
    assert peak_of({"a": 3, "b": 2, "c": 2, "d": 1}, upstreams).peak == 4  # b and c together
    assert peak_of({"a": 1, "b": 0, "c": 0, "d": 1}, upstreams).peak == 1
    with pytest.raises(ValueError, match="cycle: a -> b -> a"):
        peak_of({"a": 1}, {"a": ("b",), "b": ("a",)})
    values = RunValues(read_package(packages["sft"]), {})
    assert gpu_demand(values, launcher="local").per_task["train-model"] == 0
    parameter = values.parameter(("train", "training_num_nodes"))
    assert gpu_demand(RunValues(values.facts, {parameter: 2}), launcher="trainjob").peak == 2
