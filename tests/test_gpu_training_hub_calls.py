"""``benchmarks/gpu_training_hub.py`` and ``gpu_transformers.py`` call the project's current API (GPU machines only).

What they do before the GPU runs here for real; the calls that need a GPU or a trained checkpoint are checked by
binding the arguments the scripts pass to the current signatures.
"""

import inspect
import json
import sys
from pathlib import Path

import pytest

from benchmarks import gpu_training_hub, gpu_transformers


@pytest.fixture
def work(tmp_path: Path, tiny_model_dir: Path) -> Path:
    """A benchmark work directory: the tiny model as its ``model`` and 40 demo conversations as its data."""
    (tmp_path / "model").symlink_to(tiny_model_dir)
    tokens = gpu_training_hub._dataset(tmp_path / "train.jsonl", 40)
    assert tokens > 40 * 10  # every conversation has a user and an assistant turn
    assert len((tmp_path / "train.jsonl").read_text().splitlines()) == 40
    return tmp_path


@pytest.mark.parametrize("algorithm", ["sft", "osft", "lora"])
def test_training_hub_runs_the_trainjobs_entrypoint_with_the_bench_settings(algorithm: str, work: Path) -> None:
    run_config, command = gpu_training_hub.stage(algorithm, work, 3)
    run_dir = work / algorithm / "train-model-benchmark"
    assert command == [sys.executable, str(run_dir / "entrypoint.py"), "--config", str(run_dir / "run_config.json")]
    assert (run_dir / "entrypoint.py").is_file() and (run_dir / "data" / "train.jsonl").is_file()
    hp = run_config.hyperparameters
    assert (hp.algorithm, hp.num_epochs, hp.effective_batch_size, hp.warmup_steps) == (algorithm, 3, 16, 10)
    assert hp.learning_rate == gpu_training_hub.LEARNING_RATE[algorithm]
    assert hp.lr_scheduler == ("linear" if algorithm == "lora" else "cosine") and hp.backend == ""
    assert run_config.base_model == str(work / "model") and run_config.ckpt_output_dir == str(run_dir / "checkpoints")
    assert not run_config.jit_checkpoint and not run_config.progress.enabled


def test_the_transformers_backend_runs_its_launcher(work: Path) -> None:
    run_config, command = gpu_training_hub.stage("sft", work, 2, "transformers")
    run_dir = work / "sft-transformers" / "train-model-benchmark"
    launcher = run_dir / "transformers" / "launch.py"
    assert command == [sys.executable, str(launcher), "--config", str(run_dir / "run_config.json")]
    assert launcher.is_file() and run_config.hyperparameters.backend == "transformers"


@pytest.mark.parametrize("algorithm, function", [("sft", "sft"), ("osft", "osft")])
def test_the_direct_reference_calls_training_hub_with_the_pods_arguments(algorithm, function, work: Path) -> None:
    run_config, _ = gpu_training_hub.stage(algorithm, work, 2)
    script = gpu_training_hub.direct_script(run_config, work, algorithm).read_text()
    # The pod's image switches too: mini-trainer's TESTING for OSFT where flash-attn is missing (as here).
    environment = {"TESTING": "true"} if algorithm == "osft" else {}
    assert script.startswith(
        f"import json, os, training_hub\nos.environ.update({environment!r})\ntraining_hub.{function}(**json.loads("
    )
    kwargs = json.loads(json.loads(script[script.index("json.loads(") + len("json.loads(") : script.rindex("))")]))
    assert kwargs["ckpt_output_dir"] == str(work / f"{algorithm}-direct")
    assert kwargs["data_path"] == run_config.data_path and kwargs["num_epochs"] == 2
    assert kwargs["model_path"] == str(work / "model") and kwargs["nproc_per_node"] == 1


def test_the_loss_check_reads_training_hubs_metrics_file(tmp_path: Path) -> None:
    from components.training.finetuning.pod.metrics import TRAINING_HUB_METRICS_FILES

    def write(losses: list[float]) -> Path:
        ckpt = tmp_path / f"ckpt-{len(list(tmp_path.iterdir()))}"
        ckpt.mkdir()
        lines = (json.dumps({"step": i + 1, "epoch": 0, "loss": loss}) for i, loss in enumerate(losses))
        (ckpt / TRAINING_HUB_METRICS_FILES["sft"]).write_text("\n".join(lines) + "\n")
        return ckpt

    falls, losses = gpu_training_hub._loss_falls(write([3.0 - 0.1 * i for i in range(25)]), 1)
    assert falls and len(losses) == 25
    assert gpu_training_hub._loss_falls(write([2.0] * 25), 1)[0] is False


def test_the_evaluation_step_resolves_the_checkpoint(tiny_model_dir: Path) -> None:
    spec = gpu_training_hub.evaluation_spec(tiny_model_dir, tiny_model_dir)
    assert spec.lm_eval_model == "hf" and spec.model_args["pretrained"] == str(tiny_model_dir)


def test_the_gpu_only_calls_match_the_current_signatures(tmp_path: Path) -> None:
    from components.training.finetuning.pod import metrics as metrics_module
    from components.training.finetuning.publish import find_final_checkpoint
    from components.training.finetuning.transformers_backend import read_result
    from pipelines.demo.tiny_model import build_tiny_model

    inspect.signature(build_tiny_model).bind(tmp_path / "model", **gpu_training_hub.MODEL_DIMENSIONS)
    inspect.signature(build_tiny_model).bind(tmp_path / "tiny")
    inspect.signature(find_final_checkpoint).bind(tmp_path / "checkpoints")
    inspect.signature(gpu_training_hub._timed).bind([sys.executable], tmp_path / "pod.log")
    inspect.signature(metrics_module.read_metrics).bind(tmp_path / "metrics.jsonl")
    inspect.signature(read_result).bind(tmp_path)
    assert read_result(tmp_path) == {}  # gpu_transformers' figures() reads .get("peak_gpu_memory_bytes", 0) from it


@pytest.mark.parametrize("algorithm", ["sft", "lora", "osft"])
def test_the_transformers_bench_stages_the_pod_command_as_train_model_does(algorithm, tmp_path):
    run_dir = tmp_path / algorithm
    command = gpu_transformers.stage(run_dir, tmp_path / "model", algorithm, 7)
    config_path, launcher = run_dir / "run_config.json", run_dir / "transformers" / "launch.py"
    assert command == [sys.executable, str(launcher), "--config", str(config_path)]
    assert launcher.is_file() and (run_dir / "transformers" / "worker.py").is_file()
    hyperparameters = json.dumps(json.loads(config_path.read_text()))
    assert algorithm in hyperparameters and str(tmp_path / "model") in hyperparameters
    assert '"max_steps": 7' in hyperparameters and '"effective_batch_size": 16' in hyperparameters


def test_the_transformers_bench_request_is_the_components_defaults_and_the_bench_arguments(tmp_path):
    request = gpu_transformers.bench_request(tmp_path / "m", "lora", 3)
    assert request.training.backend == "transformers" and request.training.max_steps == 3
    assert request.training.num_epochs == 3  # the component's default, read from its signature
    assert request.training.lora_r == 16
