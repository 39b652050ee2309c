"""``benchmarks/gpu_transformers.py`` calls the project's current API (it runs only on a GPU machine, never in CI).

Its staging runs here for real; the calls that need a GPU run or a trained model are checked by binding the arguments
the script passes to the current signatures.
"""

import inspect
import json
import sys

import pytest

from benchmarks import gpu_transformers


@pytest.mark.parametrize("algorithm", ["sft", "lora", "osft"])
def test_stage_builds_the_pod_command_as_train_model_does(algorithm, tmp_path):
    run_dir = tmp_path / algorithm
    command = gpu_transformers.stage(run_dir, tmp_path / "model", algorithm, 7)
    config_path, launcher = run_dir / "run_config.json", run_dir / "transformers" / "launch.py"
    assert command == [sys.executable, str(launcher), "--config", str(config_path)]
    assert launcher.is_file() and (run_dir / "transformers" / "worker.py").is_file()
    config = json.loads(config_path.read_text())
    hyperparameters = json.dumps(config)
    assert algorithm in hyperparameters and str(tmp_path / "model") in hyperparameters
    assert '"max_steps": 7' in hyperparameters and '"effective_batch_size": 16' in hyperparameters


def test_the_request_is_the_components_defaults_and_the_bench_arguments(tmp_path):
    request = gpu_transformers.bench_request(tmp_path / "m", "lora", 3)
    assert request.training.backend == "transformers" and request.training.max_steps == 3
    assert request.training.num_epochs == 3  # the component's default, read from its signature
    assert request.training.lora_r == 16


def test_the_gpu_only_calls_match_the_current_signatures(tmp_path):
    from components.training.finetuning.pod import metrics as metrics_module
    from components.training.finetuning.transformers_backend import read_result
    from pipelines.demo.tiny_model import build_tiny_model

    inspect.signature(build_tiny_model).bind(tmp_path / "tiny")
    inspect.signature(metrics_module.read_metrics).bind(tmp_path / "metrics.jsonl")
    inspect.signature(read_result).bind(tmp_path)
    assert read_result(tmp_path) == {}  # figures() reads .get("peak_gpu_memory_bytes", 0) from it
