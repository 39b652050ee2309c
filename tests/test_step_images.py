"""Step images and resources of the compiled pipelines: what each pod runs on, installs at start, and may use."""

import importlib
import re
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from components._common import runtime
from components._common.images import PYTHON_IMAGE, STEP_IMAGE, TORCH_CUDA_IMAGE, python_version_of, torch_version_of
from components.evaluation.lm_eval import component as lm_eval_component
from pipelines.cli import main
from pipelines.compile import compile_named
from pipelines.training.finetuning import GRPO_PIPELINES, PIPELINES
from pipelines.training.finetuning.settings import STEPS, CompileSettings, constants_of
from tests.harness.compiled import pipeline_documents
from tests.harness.executors import HEAVY, executor_installs, requirement_name

RUNTIME = "quay.io/example/kfp-finetune-runtime:0.1.0"
EXECUTOR_OF_STEP = {
    "dataset": "exec-dataset-download",
    "launcher": "exec-train-model",
    "eval": "exec-lm-eval",
    "registry": "exec-model-registry",
}


@pytest.fixture
def installing(monkeypatch):
    """Compile as for a cluster: components pip-install their packages (the test-suite turns that off)."""
    monkeypatch.setattr(runtime, "INSTALL_PACKAGES", True)


def _documents(path) -> list[dict]:
    return pipeline_documents(path)


def _platform_executors(documents: list[dict]) -> dict:
    return documents[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


def _requires_on(distribution: str, target: str, extras: set[str]) -> list[SpecifierSet]:
    """The specifiers ``distribution`` (installed) puts on ``target``, for the requested extras and ``target``'s own."""
    found = []
    for line in metadata.requires(distribution) or []:
        requirement = Requirement(line)
        if requirement_name(requirement.name) != target:
            continue
        wanted = extras | {target}  # e.g. transformers needs torch>=2.6 through its "torch" extra
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": extra}) for extra in wanted):
            found.append(requirement.specifier)
    return found


def test_eval_image_torch_and_python_satisfy_every_pinned_package():
    """The evaluation image's torch (from its tag) and Python meet what the pinned lm-eval stack requires."""
    image_torch = Version(torch_version_of(lm_eval_component.IMAGE))
    image_python = Version(python_version_of(lm_eval_component.IMAGE))
    checked = []
    for pin in lm_eval_component.PACKAGES:
        requirement = Requirement(pin)
        pinned = next(iter(requirement.specifier)).version
        installed = metadata.version(requirement.name)
        assert installed == pinned, f"{requirement.name} {installed} is installed, the component pins {pinned}"
        requires_python = metadata.metadata(requirement.name).get("Requires-Python")
        assert not requires_python or image_python in SpecifierSet(requires_python), (requirement.name, image_python)
        for specifier in _requires_on(requirement.name, "torch", set(requirement.extras)):
            assert image_torch in specifier, f"{pin} needs torch{specifier}, the image has {image_torch}"
            checked.append((requirement.name, str(specifier)))
    # lm-eval[hf], transformers (its "torch" extra), peft and accelerate all constrain torch.
    assert {name for name, _ in checked} >= {"lm-eval", "transformers", "peft", "accelerate"}, checked
    assert not [p for p in lm_eval_component.PACKAGES if HEAVY.match(requirement_name(p))]


def test_image_helpers_read_the_tags():
    assert torch_version_of(TORCH_CUDA_IMAGE) == "2.7.1"
    assert torch_version_of("registry.local:5000/pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime") == "2.9.1"
    assert torch_version_of(PYTHON_IMAGE) is None
    assert python_version_of(PYTHON_IMAGE) == "3.11"
    assert python_version_of("mirror.local/library/python:3.12.4-slim") == "3.12"


@pytest.mark.parametrize("name", list(PIPELINES))
def test_shipped_pipelines_install_no_torch_and_size_every_task(name, shipped_pipeline_yamls):
    documents = _documents(shipped_pipeline_yamls[name])
    executors = executor_installs(documents[0])
    # exec-lm-eval-2: the second evaluation (the fine-tuned model; exec-lm-eval evaluates the base model)
    evaluated = name not in GRPO_PIPELINES  # the GRPO pipelines have no evaluation step
    steps = EXECUTOR_OF_STEP if evaluated else {s: e for s, e in EXECUTOR_OF_STEP.items() if s != "eval"}
    assert set(executors) == {*steps.values(), *(["exec-lm-eval-2"] if evaluated else [])}
    # the launcher runs on the project's step image (its code is too large to embed): it installs nothing at start
    assert executors["exec-train-model"].image == STEP_IMAGE and not executors["exec-train-model"].installs
    for executor in executors.values():
        if executor.name != "exec-train-model":
            assert executor.installs, f"{executor.name} installs nothing: compiled without packages?"
        heavy = [r for r in executor.requirements if HEAVY.match(requirement_name(r))]
        assert not heavy, f"{name}: {executor.name} pip-installs {heavy} at start"
    if evaluated:
        assert executors["exec-lm-eval"].image == executors["exec-lm-eval-2"].image == TORCH_CUDA_IMAGE
    assert {executors[EXECUTOR_OF_STEP[s]].image for s in ("dataset", "registry")} == {PYTHON_IMAGE}
    for executor_name, executor in documents[0]["deploymentSpec"]["executors"].items():
        resources = executor["container"]["resources"]
        for key in ("resourceCpuRequest", "resourceCpuLimit", "resourceMemoryRequest", "resourceMemoryLimit"):
            assert resources.get(key), f"{name}: {executor_name} has no {key}"
    platform = _platform_executors(documents)
    assert {e: platform[e].get("imagePullPolicy") for e in executors} == dict.fromkeys(executors, "IfNotPresent")


def _closure(requirements: list[str]) -> set[str]:
    """Distributions ``requirements`` pull in, resolved with the installed metadata (linux, this Python)."""
    seen: set[str] = set()
    pending = [Requirement(r) for r in requirements]
    while pending:
        requirement = pending.pop()
        name = requirement_name(requirement.name)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if name in seen:
            continue
        seen.add(name)
        try:
            lines = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in lines:
            dependency = Requirement(line)
            marker = dependency.marker
            if marker is None or any(marker.evaluate({"extra": e}) for e in requirement.extras | {""}):
                dependency.marker = None
                pending.append(dependency)
    return seen


def test_no_install_list_pulls_torch_beyond_what_its_image_carries(tmp_path, installing):
    """The full dependency closure of each step's installs (not just its direct list) leaves torch to the image."""
    executors = executor_installs(compile_named("osft", tmp_path / "osft.yaml", CompileSettings()))
    for executor in executors.values():
        requirements = [r for install in executor.installs if not install.no_deps for r in install.requirements]
        pulled = _closure(requirements)
        provided = _closure(["torch"]) if torch_version_of(executor.image) else set()
        heavy = sorted(name for name in pulled - provided if HEAVY.match(name))
        assert not heavy, f"{executor.name} on {executor.image} would pip-install {heavy}"
    assert "torch" in _closure(executors["exec-lm-eval"].requirements)  # the image's torch is what lm-eval uses


def test_runtime_image_replaces_every_image_and_nothing_is_installed(tmp_path, installing):
    path = compile_named("sft", tmp_path / "sft.yaml", CompileSettings(runtime_image=RUNTIME))
    text = path.read_text()
    assert "pip install" not in text and "ensurepip" not in text
    assert "__KFP_EMBEDDED_ARCHIVE_B64" not in text
    executors = executor_installs(path)
    assert {e.image for e in executors.values()} == {RUNTIME}
    assert not [e.name for e in executors.values() if e.installs]
    platform = _platform_executors(_documents(path))
    assert {name: platform[name]["imagePullPolicy"] for name in executors} == dict.fromkeys(executors, "IfNotPresent")
    # The same process compiles the default again afterwards: images are chosen per compile, not per import.
    again = executor_installs(compile_named("sft", tmp_path / "again.yaml", CompileSettings()))
    assert again["exec-lm-eval"].image == TORCH_CUDA_IMAGE and again["exec-lm-eval"].installs


def test_step_images_and_resources_come_from_settings_env_and_flags(tmp_path, monkeypatch, installing):
    monkeypatch.setenv("KFP_FINETUNE_EVAL_IMAGE", "mirror.local/pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime")
    monkeypatch.setenv("KFP_FINETUNE_DATASET_MEMORY_LIMIT", "24Gi")
    output = tmp_path / "lora.yaml"
    flags = ["--registry-image", "mirror.local/library/python:3.11.11-slim-bookworm", "--launcher-cpu-limit", "2"]
    assert main(["compile", "lora", "-o", str(output), *flags]) == 0
    documents = _documents(output)
    executors = documents[0]["deploymentSpec"]["executors"]
    images = {step: executors[e]["container"]["image"] for step, e in EXECUTOR_OF_STEP.items()}
    assert images == {
        "dataset": PYTHON_IMAGE,
        "launcher": STEP_IMAGE,
        "eval": "mirror.local/pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
        "registry": "mirror.local/library/python:3.11.11-slim-bookworm",
    }
    assert executors["exec-dataset-download"]["container"]["resources"]["resourceMemoryLimit"] == "24Gi"
    assert executors["exec-train-model"]["container"]["resources"]["resourceCpuLimit"] == "2"
    gpu = executors["exec-lm-eval"]["container"]["resources"]["accelerator"]
    assert (gpu["resourceType"], gpu["resourceCount"]) == ("nvidia.com/gpu", "1")  # the GPU settings are kept


def test_resource_settings_are_checked_with_the_setting_named(capsys, tmp_path):
    with pytest.raises(ValueError, match=r"eval_memory_limit must be a Kubernetes quantity .* got '3\.5Gi'"):
        CompileSettings(eval_memory_limit="3.5Gi")
    with pytest.raises(ValueError, match=r"launcher_cpu_limit \(100m\) must not be below launcher_cpu_request"):
        CompileSettings(launcher_cpu_request="250m", launcher_cpu_limit="100m")
    with pytest.raises(ValueError, match="dataset_memory_limit .* must not be below dataset_memory_request"):
        CompileSettings.from_env({"KFP_FINETUNE_DATASET_MEMORY_REQUEST": "64Gi"})
    with pytest.raises(ValueError, match="registry_image must name a container image"):
        CompileSettings(registry_image="")
    assert main(["compile", "sft", "-o", str(tmp_path / "x.yaml"), "--eval-cpu-limit", "1"]) == 2
    assert "eval_cpu_limit (1) must not be below eval_cpu_request (2)" in capsys.readouterr().err
    assert not (tmp_path / "x.yaml").exists()


@pytest.mark.parametrize("name", list(PIPELINES))
def test_pipeline_modules_declare_the_default_images(name):
    """The constants at the top of each pipeline.py are the settings' defaults (edit them to change one pipeline)."""
    module = importlib.import_module(PIPELINES[name])
    constants = constants_of(vars(module))
    defaults = CompileSettings()
    for step in STEPS:
        assert constants[f"{step}_image"] == getattr(defaults, f"{step}_image"), (name, step)
    assert constants["runtime_image"] == ""


def test_every_step_resource_has_a_sane_default():
    from kubernetes.utils import parse_quantity

    settings = CompileSettings()
    memory = {step: parse_quantity(settings.resources_of(step)["memory_request"]) for step in STEPS}
    assert memory["launcher"] < memory["dataset"] < memory["eval"]  # tiny launcher, tokenizer, model
    assert parse_quantity(settings.eval_memory_request) >= parse_quantity("8Gi")  # a 1.5B model loads in bf16
    for step in STEPS:
        resources = settings.resources_of(step)
        assert parse_quantity(resources["cpu_limit"]) >= parse_quantity(resources["cpu_request"]) > 0


def test_a_routed_component_keeps_its_routing_when_built_for_another_image(tmp_path):
    """train_model(dataset="path") routes the string to dataset_path also on a per-compile image variant."""
    from kfp import compiler, dsl

    from components.training.finetuning import train_model

    variant = train_model.with_image("mirror.local/kfp-finetune/kfp-finetune:0.1.0")
    assert variant is train_model.with_image("mirror.local/kfp-finetune/kfp-finetune:0.1.0")  # cached

    @dsl.pipeline(name="routed")
    def routed(path: str = "/data/train.jsonl"):
        variant(dataset=path, training_launcher="local")

    output = tmp_path / "routed.yaml"
    compiler.Compiler().compile(routed, str(output))
    task = _documents(output)[0]["root"]["dag"]["tasks"]["train-model"]
    assert "dataset_path" in task["inputs"]["parameters"] and "dataset" not in task["inputs"].get("artifacts", {})
    image = _documents(output)[0]["deploymentSpec"]["executors"]["exec-train-model"]["container"]["image"]
    assert image == "mirror.local/kfp-finetune/kfp-finetune:0.1.0"
    assert "__KFP_EMBEDDED_ARCHIVE_B64" not in output.read_text()  # always a Containerfile image: nothing embedded
    with pytest.raises(ValueError, match="must name a container image"):
        train_model.with_image("")


def test_launcher_resources_are_not_handed_to_the_training_pods(tmp_path, shipped_pipeline_yamls):
    """The launcher's CPU/memory reach its TaskConfig (RESOURCES passthrough) but never the TrainJob's pods."""
    from kfp import dsl

    from components.training.finetuning.job_from_request import build_job_spec
    from tests.harness.requests import train_model_request

    config = tmp_path / "run" / "config.json"
    config.parent.mkdir()
    config.write_text("{}")
    launcher = {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "2Gi"}}
    task_config = dsl.TaskConfig(resources=launcher, env=[{"name": "A", "value": "1"}])
    request = train_model_request(
        training_namespace="team", training_image="img", training_gpus_per_node=1, training_memory_per_node="32Gi"
    )
    spec = build_job_spec(config, task_config, "run-1", "train-model", request, owner=None)
    assert (spec.cpu_per_node, spec.memory_per_node) == ("", "32Gi")
    assert spec.env["A"] == "1"  # the rest of the task config still passes through
    assert re.search("RESOURCES", shipped_pipeline_yamls["sft"].read_text())


def test_the_step_image_is_tagged_with_the_project_version():
    """A clone compiles pipelines that reference the step image of its own release (scripts/build_step_image.sh)."""
    import tomllib
    from pathlib import Path

    from components._common.images import PROJECT_VERSION, STEP_IMAGE_REPOSITORY

    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    # The distribution's version is read from PROJECT_VERSION (the built wheel's: tests/test_wheel.py).
    assert "version" in pyproject["project"]["dynamic"] and "version" not in pyproject["project"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "components._common.images.PROJECT_VERSION"
    }
    assert STEP_IMAGE == f"{STEP_IMAGE_REPOSITORY}:{PROJECT_VERSION}"
    script = (Path(__file__).resolve().parents[1] / "scripts" / "build_step_image.sh").read_text()
    assert "STEP_IMAGE" in script and "-f Containerfile" in script
