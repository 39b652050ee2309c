"""Step images and resources of the compiled pipelines: every step on the project's images, chosen per compile."""

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from components._common.images import PROJECT_VERSION, STEP_IMAGE, STEP_IMAGE_CUDA, STEP_IMAGE_REPOSITORY
from pipelines.cli import main
from pipelines.compile import compile_named
from pipelines.training.finetuning import PIPELINES
from pipelines.training.finetuning.settings import STEPS, CompileSettings
from tests.harness.compiled import GRPO_PIPELINES, pipeline_documents

REPO_ROOT = Path(__file__).resolve().parents[1]
MIRROR = "image-registry.openshift-image-registry.svc:5000/team/kfp-finetune:latest"
EXECUTOR_OF_STEP = {
    "dataset": "exec-dataset-download",
    "launcher": "exec-train-model",
    "eval": "exec-lm-eval",
    "registry": "exec-model-registry",
}


def _images(path) -> dict[str, str]:
    executors = pipeline_documents(path)[0]["deploymentSpec"]["executors"]
    return {name: executor["container"]["image"] for name, executor in executors.items()}


def _platform_executors(documents: list[dict]) -> dict:
    return documents[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


@pytest.mark.parametrize("name", list(PIPELINES))
def test_shipped_pipelines_run_every_step_on_the_project_images_and_size_every_task(name, shipped_pipeline_yamls):
    documents = pipeline_documents(shipped_pipeline_yamls[name])
    images = _images(shipped_pipeline_yamls[name])
    # exec-lm-eval-2: the second evaluation (the fine-tuned model; exec-lm-eval evaluates the base model)
    expected = {
        "exec-dataset-download": STEP_IMAGE,
        "exec-train-model": STEP_IMAGE,
        "exec-lm-eval": STEP_IMAGE_CUDA,  # the evaluation requests a GPU by default
        "exec-lm-eval-2": STEP_IMAGE_CUDA,
        "exec-model-registry": STEP_IMAGE,
    }
    if name in GRPO_PIPELINES:  # the GRPO pipelines have no evaluation step (a reward gate instead)
        expected = {executor: image for executor, image in expected.items() if "lm-eval" not in executor}
    assert images == expected
    for executor_name, executor in documents[0]["deploymentSpec"]["executors"].items():
        container = executor["container"]
        assert container["command"][:3] == ["sh", "-ec", container["command"][2]]  # KFP's shim, then the source
        for key in ("resourceCpuRequest", "resourceCpuLimit", "resourceMemoryRequest", "resourceMemoryLimit"):
            assert container["resources"].get(key), f"{name}: {executor_name} has no {key}"
    platform = _platform_executors(documents)
    assert {e: platform[e].get("imagePullPolicy") for e in images} == dict.fromkeys(images, "IfNotPresent")


def test_each_steps_image_follows_image_eval_image_and_the_evaluations_gpus():
    """``image`` runs every step; ``eval_image`` the evaluation; unset, a CPU evaluation runs on the CPU image."""
    assert {step: CompileSettings().image_of(step) for step in STEPS} == {
        "dataset": STEP_IMAGE,
        "launcher": STEP_IMAGE,
        "eval": STEP_IMAGE_CUDA,
        "registry": STEP_IMAGE,
    }
    assert CompileSettings(eval_gpus=0).image_of("eval") == STEP_IMAGE
    assert {CompileSettings(image=MIRROR).image_of(step) for step in STEPS} == {MIRROR}
    both = CompileSettings(image=MIRROR, eval_image=f"{MIRROR}-cuda")
    assert [both.image_of(step) for step in STEPS] == [MIRROR, MIRROR, f"{MIRROR}-cuda", MIRROR]
    assert CompileSettings(eval_image="mirror.local/x:1", eval_gpus=0).image_of("eval") == "mirror.local/x:1"
    with pytest.raises(ValueError, match="unknown step 'train'"):
        CompileSettings().image_of("train")


def test_a_cpu_evaluation_runs_on_the_cpu_image(tmp_path):
    images = _images(compile_named("sft-minimal", tmp_path / "cpu.yaml", CompileSettings(eval_gpus=0)))
    assert set(images.values()) == {STEP_IMAGE}
    # The same process compiles the default again afterwards: images are chosen per compile, not per import.
    assert _images(compile_named("sft-minimal", tmp_path / "gpu.yaml", CompileSettings()))["exec-lm-eval"] == (
        STEP_IMAGE_CUDA
    )


def test_step_images_and_resources_come_from_settings_env_and_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("KFP_FINETUNE_EVAL_IMAGE", "mirror.local/kfp-finetune/kfp-finetune:0.1.0-cuda")
    monkeypatch.setenv("KFP_FINETUNE_DATASET_MEMORY_LIMIT", "24Gi")
    output = tmp_path / "lora.yaml"
    assert main(["compile", "lora", "-o", str(output), "--image", MIRROR, "--launcher-cpu-limit", "2"]) == 0
    executors = pipeline_documents(output)[0]["deploymentSpec"]["executors"]
    images = {step: executors[e]["container"]["image"] for step, e in EXECUTOR_OF_STEP.items()}
    assert images == {
        "dataset": MIRROR,
        "launcher": MIRROR,
        "eval": "mirror.local/kfp-finetune/kfp-finetune:0.1.0-cuda",
        "registry": MIRROR,
    }
    assert executors["exec-lm-eval-2"]["container"]["image"] == images["eval"]  # both evaluations
    assert executors["exec-dataset-download"]["container"]["resources"]["resourceMemoryLimit"] == "24Gi"
    assert executors["exec-train-model"]["container"]["resources"]["resourceCpuLimit"] == "2"
    gpu = executors["exec-lm-eval"]["container"]["resources"]["accelerator"]
    assert (gpu["resourceType"], gpu["resourceCount"]) == ("nvidia.com/gpu", "1")  # the GPU settings are kept
    flag = ["--eval-image", f"{MIRROR}-cuda"]  # the flag wins over the environment
    assert main(["compile", "lora", "-o", str(output), "--image", MIRROR, *flag, "--no-image-check"]) == 0
    executors = pipeline_documents(output)[0]["deploymentSpec"]["executors"]
    assert {executors[e]["container"]["image"] for e in ("exec-lm-eval", "exec-lm-eval-2")} == {f"{MIRROR}-cuda"}


def test_the_guides_compile_takes_the_image_from_the_environment(tmp_path):
    """``KFP_FINETUNE_IMAGE=<ref> python pipelines/training/<name>/pipeline.py``, as the guide runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KFP_FINETUNE_")}
    env.update(KFP_FINETUNE_IMAGE=MIRROR, PYTHONPATH=str(REPO_ROOT))
    copy = tmp_path / "pipelines" / "training" / "sft_minimal" / "pipeline.py"
    copy.parent.mkdir(parents=True)
    copy.write_text((REPO_ROOT / "pipelines" / "training" / "sft_minimal" / "pipeline.py").read_text())
    run = subprocess.run(
        [sys.executable, str(copy)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert set(_images(copy.with_name("pipeline.yaml")).values()) == {MIRROR}


@pytest.mark.parametrize("name", list(PIPELINES))
def test_pipeline_modules_declare_the_default_images(name):
    """The image constants at the top of each pipeline.py are the settings' defaults."""
    module = importlib.import_module(PIPELINES[name])
    assert (module.IMAGE, module.EVAL_IMAGE) == (CompileSettings().image, CompileSettings().eval_image)
    assert not {"DATASET_IMAGE", "LAUNCHER_IMAGE", "REGISTRY_IMAGE", "RUNTIME_IMAGE"} & set(vars(module))


def test_resource_settings_are_checked_with_the_setting_named(capsys, tmp_path):
    with pytest.raises(ValueError, match=r"eval_memory_limit must be a Kubernetes quantity .* got '3\.5Gi'"):
        CompileSettings(eval_memory_limit="3.5Gi")
    with pytest.raises(ValueError, match=r"launcher_cpu_limit \(100m\) must not be below launcher_cpu_request"):
        CompileSettings(launcher_cpu_request="250m", launcher_cpu_limit="100m")
    with pytest.raises(ValueError, match="dataset_memory_limit .* must not be below dataset_memory_request"):
        CompileSettings.from_env({"KFP_FINETUNE_DATASET_MEMORY_REQUEST": "64Gi"})
    with pytest.raises(ValueError, match="image must be a container image reference without spaces"):
        CompileSettings(image="quay.io/x/y:1 --privileged")
    assert main(["compile", "sft", "-o", str(tmp_path / "x.yaml"), "--eval-cpu-limit", "1"]) == 2
    assert "eval_cpu_limit (1) must not be below eval_cpu_request (2)" in capsys.readouterr().err
    assert not (tmp_path / "x.yaml").exists()


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
    task = pipeline_documents(output)[0]["root"]["dag"]["tasks"]["train-model"]
    assert "dataset_path" in task["inputs"]["parameters"] and "dataset" not in task["inputs"].get("artifacts", {})
    image = pipeline_documents(output)[0]["deploymentSpec"]["executors"]["exec-train-model"]["container"]["image"]
    assert image == "mirror.local/kfp-finetune/kfp-finetune:0.1.0"
    assert "__KFP_EMBEDDED_ARCHIVE_B64" not in output.read_text() and "pip install" not in output.read_text()
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
    """A clone compiles pipelines that reference the step image of its own release; the CUDA build is a tag suffix."""
    import tomllib

    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    # The distribution's version is read from PROJECT_VERSION (the built wheel's: tests/test_wheel.py).
    assert "version" in pyproject["project"]["dynamic"] and "version" not in pyproject["project"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "components._common.images.PROJECT_VERSION"
    }
    assert STEP_IMAGE == f"{STEP_IMAGE_REPOSITORY}:{PROJECT_VERSION}" and STEP_IMAGE_CUDA == f"{STEP_IMAGE}-cuda"
    script = (REPO_ROOT / "scripts" / "build_step_image.sh").read_text()
    assert "STEP_IMAGE" in script and "-f Containerfile" in script


def test_a_pipeline_passes_its_settings_by_name():
    """``pipeline_settings`` takes the module's constants explicitly (no ``globals()``): a misspelt keyword fails."""
    from pipelines.training.finetuning.settings import pipeline_settings

    with pytest.raises(ValueError, match=r"pipeline_settings\(pvc_sise=\.\.\.\): no such compile-time setting"):
        pipeline_settings(pvc_sise="1Gi")
    settings = pipeline_settings(pvc_size="7Gi", pipeline_name="p")
    assert (settings.pvc_size, settings.pipeline_name) == ("7Gi", "p")
