"""How code reaches each pod: one delivery, the project's image; the compiled YAML names it and holds the wrapper."""

from pathlib import Path

import yaml
from kfp import compiler, dsl

from components._common.images import STEP_IMAGE
from components._common.runtime import runtime_component, with_parameter_docs

REPO_ROOT = Path(__file__).resolve().parents[1]


@runtime_component()
def where_is_runtime_code(marker: str) -> str:
    """Imports a project module, as every component's wrapper does, and reports where it was loaded from."""
    import components._common.images as images

    return f"{marker}|{images.__file__}|{images.STEP_IMAGE}"


def test_a_compiled_component_names_the_step_image_and_carries_only_its_wrapper(tmp_path):
    path = tmp_path / "component.yaml"
    compiler.Compiler().compile(where_is_runtime_code, str(path))
    container = next(iter(yaml.safe_load(path.read_text())["deploymentSpec"]["executors"].values()))["container"]
    assert container["image"] == STEP_IMAGE
    source = container["command"][-1]
    assert "def where_is_runtime_code(marker: str) -> str:" in source
    assert "__KFP_EMBEDDED_ARCHIVE_B64" not in source and "pip install" not in "\n".join(container["command"])
    assert len(path.read_text().encode()) < 8 * 1024


def test_the_wrapper_imports_the_projects_modules_through_kfp_local(kfp_local):
    """kfp.local runs the compiled command here: the modules come from the checkout (in a pod: the image)."""
    task = where_is_runtime_code(marker="hello")
    marker, loaded_from, image = task.output.split("|")
    assert (marker, image) == ("hello", STEP_IMAGE)
    assert Path(loaded_from).resolve() == REPO_ROOT / "components" / "_common" / "images.py"


def test_a_pipeline_of_runtime_components_runs_locally(kfp_local):
    @dsl.pipeline
    def two_steps() -> str:
        first = where_is_runtime_code(marker="a")
        return where_is_runtime_code(marker=first.output).output

    assert two_steps().output.startswith("a|")


def test_with_image_builds_for_another_image_without_the_parameters_descriptions(tmp_path):
    documented = runtime_component(parameter_docs={"marker": "What to echo."})(_echo)
    variant = documented.with_image("mirror.local/kfp-finetune:1")
    assert variant is documented.with_image("mirror.local/kfp-finetune:1")
    own = documented.component_spec.inputs["marker"].description
    assert own == "What to echo." and variant.component_spec.inputs["marker"].description in (None, "")
    assert variant.component_spec.implementation.container.image == "mirror.local/kfp-finetune:1"
    assert documented.component_spec.implementation.container.image == STEP_IMAGE
    assert variant.component_spec.description == documented.component_spec.description == "Echoes."


def _echo(marker: str) -> str:
    """Echoes."""
    return marker


def test_parameter_docs_become_the_docstring_and_the_dashboard_descriptions(tmp_path):
    import pytest

    def step(name: str, count: int = 1) -> str:
        """Does a step."""
        return name * count

    documented = runtime_component(parameter_docs={"name": "Who to greet.", "count": "How many   times."})(step)
    assert (
        documented.python_func.__doc__ == "Does a step.\n\nArgs:\n    name: Who to greet.\n    count: How many times.\n"
    )
    assert documented.component_spec.inputs["name"].description == "Who to greet."
    undescribed = documented.with_image("quay.io/example/step:1").component_spec
    assert undescribed.inputs["name"].description is None and undescribed.outputs["Output"].description is None
    path = tmp_path / "c.yaml"
    compiler.Compiler().compile(documented, str(path))
    parameters = yaml.safe_load(path.read_text())["root"]["inputDefinitions"]["parameters"]
    assert parameters["count"]["description"] == "How many times."
    with pytest.raises(ValueError, match=r"unknown parameters \['typo'\]"):
        with_parameter_docs(step, {"typo": "x"})


def test_compiled_pipelines_import_the_real_modules_in_each_step(shipped_pipeline_yamls, tmp_path):
    """Each step's command imports its component's package; each imports in a fresh interpreter."""
    import subprocess
    import sys

    pipeline = next(iter(yaml.safe_load_all(shipped_pipeline_yamls["sft"].read_text())))
    steps = {
        "exec-dataset-download": "components.data_processing.dataset_download",
        "exec-train-model": "components.training.finetuning",
        "exec-lm-eval": "components.evaluation.lm_eval",
        "exec-model-registry": "components.deployment.kubeflow_model_registry",
    }
    for executor, package in steps.items():
        source = pipeline["deploymentSpec"]["executors"][executor]["container"]["command"][-1]
        assert f"from {package}." in source, (executor, source[-1500:])
    probe = "import importlib, sys; [importlib.import_module(m + '.run') for m in sys.argv[1:]]"
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", probe, *steps.values()], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_each_components_command_holds_its_wrapper_compacted_with_the_same_signature():
    """The embedded program is the wrapper without docstring and comments, with the same signature and body."""
    import ast
    import inspect
    import re
    import textwrap

    from kfp.dsl import component_factory

    from components.data_processing.dataset_download.component import dataset_download
    from components.deployment.kubeflow_model_registry.component import model_registry
    from components.evaluation.lm_eval.component import lm_eval
    from components.training.finetuning.component import train_model

    for component in (dataset_download, train_model, lm_eval, model_registry, where_is_runtime_code):
        func = component.python_func
        for built in (component, component.with_image("mirror.local/kfp-finetune:1")):
            *shell, script, program = built.component_spec.implementation.container.command
            kfp_command = component_factory._get_command_and_args_for_lightweight_component(func)[0]
            assert shell == kfp_command[:2] and script == re.sub(r" {2,}", " ", kfp_command[2])
            assert '"""' not in program and "#" not in program and "\n    " + func.__name__ not in program
            namespace: dict = {}
            exec(compile(program, "ephemeral_component.py", "exec"), namespace)  # what kfp.dsl.executor_main loads
            assert _signature(namespace[func.__name__]) == _signature(func), func.__name__
            original = ast.parse(textwrap.dedent(inspect.getsource(func))).body[0]
            original.body, original.decorator_list = original.body[1:], []  # less its docstring
            assert ast.dump(ast.parse(program).body[-1]) == ast.dump(original), func.__name__


def _signature(func) -> list[tuple]:
    """Each parameter's name, kind, default and annotation (as text: ``dsl.Output[...]`` is new each time)."""
    import inspect

    parameters = inspect.signature(func).parameters.values()
    return [(p.name, p.kind, p.default, repr(p.annotation)) for p in parameters]
