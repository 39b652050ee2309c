"""The compiled lm_eval component: its interface, its pinned packages and the runtime code it embeds."""

import yaml
from kfp import compiler

from components._common import runtime
from components.evaluation.lm_eval import component, lm_eval
from tests.harness.compiled import open_embedded_archive


def _compile(tmp_path, comp) -> dict:
    path = tmp_path / "lm_eval.yaml"
    compiler.Compiler().compile(comp, str(path))
    return yaml.safe_load(path.read_text())


def test_interface_optional_inputs_and_defaults(tmp_path):
    spec = _compile(tmp_path, lm_eval)
    inputs = spec["root"]["inputDefinitions"]
    artifacts = inputs["artifacts"]
    # model is optional: the base-model evaluation names the model in model_source instead.
    assert {name for name, a in artifacts.items() if a.get("isOptional")} == {
        "model",
        "eval_dataset",
        "baseline_results",
        "custom_tasks",
    }
    assert artifacts["model"]["artifactType"]["schemaTitle"] == "system.Model"
    defaults = {name: p.get("defaultValue") for name, p in inputs["parameters"].items()}
    assert defaults == {
        "task_names": [],
        "model_source": "",
        "batch_size": "auto",
        "limit": -1.0,
        "num_fewshot": -1.0,
        "gen_kwargs": {},
        "model_args": {},
        "apply_chat_template": True,
        "backend": "hf",
        "seed": 42.0,
        "log_samples": False,
        "max_samples": 200.0,
        "max_new_tokens": 64.0,
        "device": "",
        "bootstrap_iters": 100000.0,
        "allow_empty_eval_dataset": False,
        "enabled": True,
        "skip_unusable_model_source": False,
        "eval_backend": "lm-eval",
        "hardware_profile": "",
        "evalhub_url": "",
        "workspace_path": "",
        "eval_timeout_seconds": 14400.0,
        "eval_cleanup_policy": "delete",
    }
    outputs = spec["root"]["outputDefinitions"]["artifacts"]
    assert {name: o["artifactType"]["schemaTitle"] for name, o in outputs.items()} == {
        "metrics": "system.Metrics",
        "results": "system.Artifact",
        "report": "system.HTML",
    }


def test_embeds_the_pure_modules_only(tmp_path):
    spec = _compile(tmp_path, lm_eval)
    command = next(iter(spec["deploymentSpec"]["executors"].values()))["container"]["command"][-1]
    encoded = command.split("__KFP_EMBEDDED_ARCHIVE_B64 = '", 1)[1].split("'", 1)[0]
    with open_embedded_archive(encoded) as tar:
        names = {n.removeprefix("./") for n in tar.getnames() if n.endswith(".py")}
    package = "components/evaluation/lm_eval/"
    assert {n for n in names if n.startswith(package)} == {
        package + name
        for name in (
            "__init__.py",
            "custom_task.py",
            "run.py",
            "options.py",
            "task_index.py",
            "model_spec.py",
            "report.py",
            "comparison.py",
            "results.py",
            "task_dirs.py",
            "devices.py",
            # the evaluation backends (issue 46); the cluster layer they use comes with the project's step image
            "backend_dispatch.py",
            "remote_evaluation.py",
            "lmevaljob_manifest.py",
            "lmevaljob_backend.py",
            "evalhub_backend.py",
            "model_identity.py",
        )
    }
    assert len(command) < 128 * 1024


def test_packages_are_pinned_and_installed_on_the_torch_image_when_compiled_for_a_cluster(tmp_path, monkeypatch):
    assert all("==" in p for p in component.PACKAGES)
    assert "lm-eval[hf]==0.4.13" in component.PACKAGES
    monkeypatch.setattr(runtime, "INSTALL_PACKAGES", True)
    for_cluster = runtime.runtime_component(component.__file__, packages=component.PACKAGES, image=component.IMAGE)(
        lm_eval.python_func
    )
    spec = _compile(tmp_path, for_cluster)
    container = next(iter(spec["deploymentSpec"]["executors"].values()))["container"]
    command = " ".join(container["command"])
    for package in component.PACKAGES:
        assert package in command
    assert "torch" not in " ".join(component.PACKAGES)  # torch and its CUDA wheels come with the image
    assert container["image"] == component.IMAGE
    assert lm_eval.component_spec.implementation.container.image == component.IMAGE  # the module-level default
