"""``kfp-finetune demo``, the README's main job: the whole pipeline locally on the tiny model."""

import json
import math
from pathlib import Path

import pytest

from pipelines.cli import main
from pipelines.demo.run_demo import demo_arguments, summarize_run


@pytest.mark.slow
def test_demo_runs_the_whole_pipeline_end_to_end(tmp_path, capsys):
    assert main(["demo", "--output-dir", str(tmp_path / "demo")]) == 0
    printed = capsys.readouterr().out
    assert "[demo 3/3] done" in printed
    (run_dir,) = (tmp_path / "demo" / "outputs").iterdir()
    summary = summarize_run(run_dir)
    assert list(summary) == ["dataset-download", "train-model", "lm-eval", "model-registry"]

    data = summary["dataset-download"]["metrics"]
    assert (data["rows_valid"], data["rows_rejected"], data["train_rows"], data["eval_rows"]) == (400, 0, 360, 40)

    train = summary["train-model"]
    vocabulary = json.loads((tmp_path / "demo" / "base-model" / "config.json").read_text())["vocab_size"]
    # A randomly initialised model starts near ln(vocabulary); the demo run must have learned something.
    assert train["metrics"]["final_loss"] < math.log(vocabulary) - 1.0
    assert train["metrics"]["steps"] == 8 * math.ceil(360 / 8)  # num_epochs x ceil(train rows / batch)
    model_dir = Path(train["artifacts"]["output_model"])
    assert (model_dir / "model.safetensors").is_file() and (model_dir / "tokenizer.json").is_file()

    evaluation = summary["lm-eval"]["metrics"]
    assert evaluation["heldout_perplexity/token_perplexity"] > 1.0
    assert "heldout_generation/exact_match" in evaluation
    assert evaluation["heldout_generation/chrf"] > 0  # the learned answer format overlaps the references

    assert summary["model-registry"]["parameters"]["status"] == "skipped"
    for produced in summary.values():
        for uri in produced["artifacts"].values():
            assert uri in printed


def test_demo_arguments_are_valid_pipeline_parameters(tmp_path):
    from pipelines.training.finetuning.parameters import parameters_for

    for algorithm in ("sft", "osft", "lora"):
        arguments = demo_arguments(algorithm, tmp_path / "model", "data.jsonl", "")
        names = {p.dashboard_name for p in parameters_for(algorithm, "expert")}
        assert set(arguments) <= names
        assert arguments["phase_02_train_opt_launcher"] == "local"
        assert json.dumps(arguments)
