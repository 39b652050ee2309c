"""The GRPO pipelines: their wiring (the registry gated on ``reward_gate_passed``), and a short run on ``kfp.local``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.compile import pipeline_function
from pipelines.demo.demo_data import GRPO_DATASET_PATH
from pipelines.demo.demo_summary import output_types, summarize_run
from pipelines.training.finetuning.interface import parameter_feeding, spec_of, task_wiring


@pytest.mark.parametrize(("name", "algorithm"), [("grpo", "grpo"), ("lora-grpo", "lora_grpo")])
def test_grpo_pipelines_train_with_their_algorithm_and_gate_the_registry_on_the_reward(name, algorithm):
    spec = spec_of(pipeline_function(name))
    wiring = task_wiring(spec)
    assert set(wiring) == {"dataset-download", "train-model", "model-registry"}
    assert wiring["train-model"]["training_algorithm"] == ("constant", algorithm)
    parameters = spec["root"]["inputDefinitions"]["parameters"]
    gate = wiring["model-registry"]["min_metric_name"][1], wiring["model-registry"]["min_metric_value"][1]
    assert (parameters[gate[0]]["defaultValue"], parameters[gate[1]]["defaultValue"]) == ("reward_gate_passed", 1.0)
    registry_inputs = spec["root"]["dag"]["tasks"]["model-registry"]["inputs"]["artifacts"]
    assert registry_inputs["train_metrics"]["taskOutputArtifact"] == {
        "outputArtifactKey": "output_metrics",
        "producerTask": "train-model",
    }
    assert ("phase_02_train_opt_lora_alpha" in parameters) == (algorithm == "lora_grpo")


@pytest.mark.slow
def test_lora_grpo_pipeline_runs_on_kfp_local(tiny_model_dir, tmp_path):
    from kfp import local

    from pipelines.demo.run_demo import demo_environment
    from pipelines.local_pipeline import local_pipeline

    pipeline = pipeline_function("lora-grpo")
    values = {
        ("dataset", "dataset_uri"): str(GRPO_DATASET_PATH),
        ("dataset", "subset_count"): 40,
        ("train", "training_base_model"): str(tiny_model_dir),
        ("train", "training_launcher"): "local",
        ("train", "training_grpo_iterations"): 6,
        ("train", "training_grpo_group_size"): 2,
        ("train", "training_grpo_max_new_tokens"): 4,
        ("train", "training_effective_batch_size"): 4,
        ("train", "training_learning_rate"): 1e-2,
        ("train", "training_max_seq_len"): 256,
        ("train", "training_lora_r"): 4,
        ("train", "training_lora_alpha"): 8,
    }
    arguments = {parameter_feeding(pipeline, step, argument): value for (step, argument), value in values.items()}
    assert None not in arguments
    root = tmp_path / "outputs"
    with demo_environment(tmp_path / "scratch"):
        local.init(
            runner=local.SubprocessRunner(use_venv=False),
            pipeline_root=str(root),
            workspace_root=str(tmp_path / "scratch" / "workspace"),
        )
        local_pipeline(pipeline)(**arguments)
    (run_dir,) = [path for path in root.iterdir() if path.is_dir()]
    summary = summarize_run(run_dir, output_types(pipeline.pipeline_spec))
    assert list(summary) == ["dataset-download", "train-model", "model-registry"]
    data = summary["dataset-download"]["metrics"]
    assert (data["rows_valid"], data["train_rows"]) == (200, 36)  # 200 checked, a subset of 40 kept
    train = summary["train-model"]["metrics"]
    assert train["steps"] == 6 and train["reward_iterations"] == 6 and train["reward_gate_window"] == 2
    assert train["reward_gate_passed"] in (0.0, 1.0) and "reward_gain" in train and "reward_gate_p_value" in train
    metadata = summary["train-model"]["metadata"]["output_model"]
    assert metadata["algorithm"] == "lora_grpo" and len(metadata["reward_history"]) == 6
    model_dir = Path(summary["train-model"]["models"]["output_model"].removeprefix("file://"))
    assert json.loads((model_dir / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    assert summary["model-registry"]["parameters"]["status"] == "skipped"  # no registry address
