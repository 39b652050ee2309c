"""The compiled lm_eval component: its interface, and the CUDA step image it runs on with nothing installed."""

import yaml
from kfp import compiler

from components._common.images import STEP_IMAGE, STEP_IMAGE_CUDA
from components.evaluation.lm_eval import lm_eval


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
        "pvc_path": "",
        "eval_backend": "lm-eval",
        "hardware_profile": "",
        "evalhub_url": "",
        "eval_timeout_seconds": 14400.0,
        "eval_cleanup_policy": "delete",
    }
    outputs = spec["root"]["outputDefinitions"]["artifacts"]
    assert {name: o["artifactType"]["schemaTitle"] for name, o in outputs.items()} == {
        "metrics": "system.Metrics",
        "results": "system.Artifact",
        "report": "system.HTML",
    }


def test_runs_on_the_cuda_step_image_and_installs_nothing(tmp_path):
    """By default on the CUDA build of the step image (the pipelines pick the CPU one for a CPU evaluation)."""
    spec = _compile(tmp_path, lm_eval)
    container = next(iter(spec["deploymentSpec"]["executors"].values()))["container"]
    assert container["image"] == STEP_IMAGE_CUDA and STEP_IMAGE_CUDA.startswith(STEP_IMAGE)
    command = "\n".join(container["command"])
    assert "pip install" not in command and "__KFP_EMBEDDED_ARCHIVE_B64" not in command
    assert "from components.evaluation.lm_eval." in command and len(command.encode()) < 8 * 1024


def test_the_step_image_installs_lm_eval_and_its_hugging_face_stack():
    """What the image installs (pyproject's ``steps`` and ``local`` extras, the Containerfile's ``.[local]``)."""
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).resolve().parents[4] / "pyproject.toml").read_text())
    extras = extras["project"]["optional-dependencies"]
    assert "lm-eval[hf]==0.4.13" in extras["steps"] and "kfp-finetune[steps]" in extras["local"]
    assert {"transformers", "peft", "accelerate"} <= {r.split(">")[0].split("=")[0] for r in extras["local"]}
