"""The explicit pipelines agree with each other and with the components, unless a difference is declared here.

A run-time parameter has the type and description of the component argument it feeds and one name everywhere; every
other argument gets the component's default unless :data:`DECLARED` says why not (add a changed default there).
"""

from __future__ import annotations

import copy
import re

import pytest

from pipelines.compile import pipeline_function
from pipelines.training.finetuning import PIPELINES
from pipelines.training.finetuning.interface import pipeline_parameters, spec_of, step_of_task, task_wiring
from pipelines.training.finetuning.tasks import STEP_COMPONENTS

_NCCL = {"INSTRUCTLAB_NCCL_TIMEOUT_MS": "600000"}
#: Why a pipeline gives a component argument another value than the component's default, per algorithm
#: (``(step, argument)``: value). The hardware rows are the RHOAI guide's table; nothing else may differ.
_EVERY_PIPELINE = {
    # The component stays neutral (no benchmark unless asked; an empty held-out split is an error), while a pipeline
    # evaluates the guide's one small benchmark and accepts train_split_ratio 1.0 (no held-out split).
    ("eval", "task_names"): ["arc_easy"],
    ("eval", "allow_empty_eval_dataset"): True,
    # The dataset step drops samples longer than what training accepts: training_max_seq_len's default.
    ("dataset", "max_seq_len"): 8192,
}
DECLARED: dict[str, dict[tuple[str, str], object]] = {
    "sft": {
        **_EVERY_PIPELINE,
        ("train", "training_num_nodes"): 4,  # the guide: SFT 4 nodes x 1 GPU, 4 CPU and 64Gi per pod
        ("train", "training_cpu_per_node"): "4",
        ("train", "training_memory_per_node"): "64Gi",
        ("train", "training_learning_rate"): 2e-05,  # Training Hub's SFT examples
        ("train", "training_env_vars"): _NCCL,  # the guide: set by default in SFT pipelines, shown and raisable
    },
    "osft": {
        **_EVERY_PIPELINE,
        ("train", "training_num_epochs"): 1,  # the guide's osft_minimal_pipeline: phase_02_train_man_train_epochs = 1
        ("train", "training_cpu_per_node"): "8",  # the guide: OSFT 1 node x 1 GPU, 8 CPU and 32Gi per pod
        ("train", "training_memory_per_node"): "32Gi",
    },
    "lora": {
        **_EVERY_PIPELINE,
        ("train", "training_cpu_per_node"): "8",  # as OSFT: one GPU node
        ("train", "training_memory_per_node"): "32Gi",
        ("train", "training_learning_rate"): 0.0002,  # adapters train at a higher rate (Training Hub's LoRA examples)
    },
}
#: GRPO: no lm-eval step (the reward gate decides); the registry registers only a model whose reward rose beyond noise
#: (train_model's reward_gate_passed, components/training/finetuning/reward_gate.py). Training Hub's GRPO rate.
_GRPO = {
    ("dataset", "max_seq_len"): 8192,
    ("train", "training_learning_rate"): 1e-05,  # training_hub.grpo / lora_grpo's default learning_rate
    ("train", "training_cpu_per_node"): "8",  # as LoRA and OSFT: one GPU node
    ("train", "training_memory_per_node"): "32Gi",
    ("registry", "min_metric_name"): "reward_gate_passed",
    ("registry", "min_metric_value"): 1.0,
}
DECLARED["grpo"] = _GRPO
DECLARED["lora-grpo"] = _GRPO
#: Component arguments the pipelines fill themselves (the workspace, upstream outputs, secrets' names, run ids).
WIRED = {
    # Every task mounts the run's workspace (issue 44): dsl.WORKSPACE_PATH_PLACEHOLDER, never a run-time parameter.
    ("dataset", "pvc_path"),
    ("eval", "pvc_path"),
    ("registry", "pvc_path"),
    ("train", "pvc_path"),
    ("train", "dataset_path"),
    ("train", "training_algorithm"),
    ("train", "hf_token_secret_name"),
    ("train", "s3_secret_name"),
    ("train", "run_id"),
    ("train", "task_name"),
    ("registry", "pipeline_run_id"),
    ("registry", "pipeline_run_name"),
    # The base model's evaluation (lm-eval, before training) evaluates the training base model, and skips rather than
    # fails on an oci://, s3:// or pvc:// one; the fine-tuned evaluation (lm-eval-2) leaves both at their defaults.
    ("eval", "model_source"),
    ("eval", "skip_unusable_model_source"),
}
#: Run-time parameters whose dashboard description is the pipeline's own, not the component argument's, and why.
OWN_DESCRIPTIONS = {
    # lm_eval's `enabled` turns any evaluation off; the pipelines use it for one thing: the base model's evaluation.
    "phase_03_eval_opt_evaluate_base_model": ("eval", "enabled"),
}
_NAME = re.compile(r"^phase_(\d\d)_(dataset|train|eval|registry)_(man|opt)_[a-z0-9_]+$")
_PHASES = {"dataset": 1, "train": 2, "eval": 3, "registry": 4}
_COLLAPSE = re.compile(r"\s+")


def _text(text: str) -> str:
    return _COLLAPSE.sub(" ", text or "").strip()


def _component_inputs(spec: dict, task: str) -> dict[str, dict]:
    """The parameters of ``task``'s component as the pipeline embeds it, with the component's own descriptions."""
    import importlib

    component = spec["root"]["dag"]["tasks"][task]["componentRef"]["name"]
    embedded = spec["components"][component]["inputDefinitions"].get("parameters", {})
    module, name = STEP_COMPONENTS[step_of_task(task)]  # its own spec has the descriptions (with_image drops them)
    own = getattr(importlib.import_module(module), name).component_spec.inputs
    return {
        argument: dict(definition, description=own[argument].description) for argument, definition in embedded.items()
    }


def drift(name: str, spec: dict) -> list[str]:
    """Every way pipeline ``name`` (its spec as a dict) departs from its components and :data:`DECLARED`."""
    declared = DECLARED[name.removesuffix("-minimal")]
    root = spec["root"]["inputDefinitions"]["parameters"]
    found, fed = [], {}
    for task, inputs in task_wiring(spec).items():
        step = step_of_task(task)
        component = _component_inputs(spec, task)
        for argument, definition in component.items():
            if (step, argument) in WIRED:
                continue
            kind, value = inputs.get(argument, ("default", definition.get("defaultValue")))
            if kind == "parameter":
                if (step, argument) not in fed.setdefault(value, []):  # two evaluations: one concept
                    fed[value].append((step, argument))
                parameter = root[value]
                if parameter["parameterType"] != definition["parameterType"]:
                    found.append(
                        f"{name}: {value} is {parameter['parameterType']}, {step}.{argument} is "
                        f"{definition['parameterType']}"
                    )
                own = value.split("_")[2:3] == [step]  # the step its name says (max_seq_len also feeds dataset's)
                described = _text(parameter.get("description")) == _text(definition.get("description"))
                if own and not described and OWN_DESCRIPTIONS.get(value) != (step, argument):
                    found.append(f"{name}: {value}'s description is not {step}.{argument}'s")
                value = parameter.get("defaultValue")
            expected = declared.get((step, argument), definition.get("defaultValue"))
            if value != expected:
                found.append(f"{name}: {step}.{argument} gets {value!r} ({kind}), expected {expected!r}")
    for parameter, targets in fed.items():
        match = _NAME.match(parameter)
        if not match:
            found.append(f"{name}: {parameter} breaks the phase_NN_<step>_<man|opt>_<name> convention")
            continue
        step = match.group(2)
        own = [target for target in targets if target[0] == step]
        others = [target for target in targets if target[0] != step]
        if int(match.group(1)) != _PHASES[step] or len(own) != 1:
            found.append(f"{name}: {parameter} feeds {targets}, not one argument of the {step} step its name says")
        elif others and (own, others) != ([("train", "training_max_seq_len")], [("dataset", "max_seq_len")]):
            found.append(f"{name}: {parameter} also feeds {others}")
    unused = sorted(set(root) - set(fed))
    if unused:
        found.append(f"{name}: parameters feeding no component argument: {unused}")
    return found


@pytest.fixture(scope="module")
def specs() -> dict[str, dict]:
    """Each pipeline's spec, as built from its pipeline.py."""
    return {name: spec_of(pipeline_function(name)) for name in PIPELINES}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_every_pipeline_agrees_with_its_components_unless_declared(specs, name):
    assert drift(name, specs[name]) == []


def test_an_undeclared_difference_is_drift(specs):
    """The comparison can fail: a changed default, a constant, a wrong type or description are each reported."""
    spec = copy.deepcopy(specs["osft-minimal"])
    spec["root"]["inputDefinitions"]["parameters"]["phase_02_train_man_train_epochs"]["defaultValue"] = 7
    spec["root"]["inputDefinitions"]["parameters"]["phase_02_train_man_train_batch"]["parameterType"] = "STRING"
    spec["root"]["inputDefinitions"]["parameters"]["phase_02_train_man_train_gpu"]["description"] = "GPUs."
    train = spec["root"]["dag"]["tasks"]["train-model"]["inputs"]["parameters"]
    train["training_seed"] = {"runtimeValue": {"constant": 7}}
    found = "\n".join(drift("osft-minimal", spec))
    assert "training_num_epochs gets 7 (parameter), expected 1" in found
    assert "phase_02_train_man_train_batch is STRING" in found
    assert "phase_02_train_man_train_gpu's description" in found
    assert "training_seed gets 7 (constant), expected 42" in found


def test_one_concept_has_one_name_in_every_pipeline(specs):
    """A dashboard name feeds the same component argument everywhere, and an argument has one dashboard name."""
    names: dict[str, set] = {}
    arguments: dict[tuple[str, str], set] = {}
    for spec in specs.values():
        for task, inputs in task_wiring(spec).items():
            for argument, (kind, parameter) in inputs.items():
                if kind == "parameter":
                    names.setdefault(parameter, set()).add((step_of_task(task), argument))
                    arguments.setdefault((step_of_task(task), argument), set()).add(parameter)
    assert {name: targets for name, targets in names.items() if len(targets) > 1} == {
        "phase_02_train_opt_max_seq_len": {("train", "training_max_seq_len"), ("dataset", "max_seq_len")},
        # the base model is trained, and evaluated before training (the fine-tuned evaluation's baseline)
        "phase_02_train_man_train_model": {("train", "training_base_model"), ("eval", "model_source")},
    }
    assert {argument: found for argument, found in arguments.items() if len(found) > 1} == {}


@pytest.mark.parametrize("algorithm", ["sft", "osft", "lora"])
def test_minimal_is_a_subset_of_expert_with_the_same_types_and_defaults(algorithm):
    expert = {p.name: p for p in pipeline_parameters(pipeline_function(algorithm))}
    minimal = pipeline_parameters(pipeline_function(f"{algorithm}-minimal"))
    assert minimal and len(minimal) < len(expert)
    for parameter in minimal:
        assert parameter == expert.get(parameter.name), f"{algorithm}-minimal: {parameter.name}"


def test_every_parameter_is_documented_in_its_pipelines_docstring():
    for name in PIPELINES:
        for parameter in pipeline_parameters(pipeline_function(name)):
            assert parameter.description, f"{name}: {parameter.name} has no description in the docstring"
            assert parameter.annotation in (str, int, float, bool, list, dict), f"{name}: {parameter.name}"


def test_the_declared_differences_do_differ(specs):
    """A declared difference that equals the component's default is stale: remove it."""
    for algorithm, declared in DECLARED.items():
        tasks = {step_of_task(task): task for task in specs[algorithm]["root"]["dag"]["tasks"]}
        for (step, argument), value in declared.items():
            component = _component_inputs(specs[algorithm], tasks[step])
            assert argument in component, f"{algorithm}: {step} has no argument {argument}"
            assert component[argument].get("defaultValue") != value, f"{algorithm}: {step}.{argument} is declared"


@pytest.mark.parametrize(
    "folder",
    [
        "data_processing/dataset_download",
        "training/finetuning",
        "evaluation/lm_eval",
        "deployment/kubeflow_model_registry",
    ],
)
def test_each_wrapper_maps_every_argument_explicitly(folder):
    """No argument is dropped: each is read by name in the body, or the body's first statement takes them all
    (``arguments = dict(locals())``, before its imports add names) and hands them to the ``*_request`` builder beside
    its request type, which rejects a missing or unknown name (tested beside each component)."""
    import ast
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "components" / folder / "component.py"
    tree = ast.parse(path.read_text())
    wrapper = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.decorator_list)
    body = [n for n in wrapper.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    if ast.unparse(body[0]) == "arguments = dict(locals())":
        calls = [n for n in ast.walk(wrapper) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
        handed = [c.func.id for c in calls if [ast.unparse(a) for a in c.args] == ["arguments"]]
        assert len(handed) == 1 and handed[0].endswith("_request"), f"{wrapper.name} hands its arguments to {handed}"
        return
    calls = {n.func.id for n in ast.walk(wrapper) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not calls & {"locals", "vars"}, f"{wrapper.name} passes its arguments as a bag"
    read = {n.id for n in ast.walk(wrapper) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    arguments = [a.arg for a in wrapper.args.args + wrapper.args.kwonlyargs]
    assert [name for name in arguments if name not in read] == []
