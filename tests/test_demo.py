"""``kfp-finetune demo``, the README's main job: the whole pipeline locally on the tiny model."""

import json

import pytest

from pipelines.cli import main


@pytest.mark.slow
def test_demo_runs_the_whole_pipeline_end_to_end(tmp_path, capsys):
    assert main(["demo", "--output-dir", str(tmp_path / "demo")]) == 0
    printed = capsys.readouterr().out
    assert "[demo 3/3] done" in printed
    outputs = list((tmp_path / "demo" / "outputs").rglob("*"))
    names = {p.name for p in outputs if p.is_file()}
    # Every step left its artifacts: datasets, model weights, metrics of training and evaluation, reports.
    assert {"train_dataset", "eval_dataset", "report"} <= names or any("train_dataset" in str(p) for p in outputs)
    assert any(p.name == "model.safetensors" or p.name == "adapter_model.safetensors" for p in outputs)
    metrics_files = [p for p in outputs if p.is_file() and p.parent.name.endswith("metrics") or p.name == "metrics"]
    assert metrics_files
    for path in outputs:
        if path.is_file():
            assert str(path) in printed or path.parent.as_posix() in printed


def test_demo_arguments_are_valid_pipeline_parameters(tmp_path):
    from pipelines.demo.run_demo import demo_arguments
    from pipelines.training.finetuning.parameters import parameters_for

    for algorithm in ("sft", "osft", "lora"):
        arguments = demo_arguments(algorithm, tmp_path / "model", "data.jsonl", "")
        names = {p.dashboard_name for p in parameters_for(algorithm, "expert")}
        assert set(arguments) <= names
        assert arguments["phase_02_train_opt_backend"] == "local"
        assert json.dumps(arguments)
