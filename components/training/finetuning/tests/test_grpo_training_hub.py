"""GRPO through the pod command with the real Training Hub wheels, up to the GPU boundary (no verl, ART or GPU here).

0.11.2 and 0.9.8 get keywords they take, turn every row into verl's Parquet prompt and write the project's reward
into a file verl would import (it must work on its own); then the pod ends in one line. 0.6.0 has no GRPO.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

import pytest

from components.data_processing.dataset_download.run import run_dataset_download
from components.training.finetuning.pod import entrypoint, hub_compat
from components.training.finetuning.run import write_run_config
from components.training.finetuning.tests.hub_runs import run_pod
from tests.harness.requests import dataset_download_request, pod_settings, training_config
from tests.harness.training_hub_envs import MAIN_VERSION, hub_env

_CALL = re.compile(r"^training-hub (grpo|lora_grpo)\((.*)\)$")


@pytest.fixture(scope="module")
def grpo_split(tmp_path_factory):
    """The dataset step's train split of 40 GRPO demo rows: ``(path, rows)``."""
    from pipelines.demo.demo_data import GRPO_DATASET_PATH

    root = tmp_path_factory.mktemp("grpo-split")
    request = dataset_download_request(str(GRPO_DATASET_PATH), train_split_ratio=0.9, subset_count=40)
    result = run_dataset_download(request, root / "train.jsonl", root / "eval.jsonl")
    assert result.validation.input_format == "reward_answer"
    return root / "train.jsonl", result.train.rows


def _run_pod(version: str, algorithm: str, run_dir: Path, split: Path, model: Path, **fields) -> tuple:
    """Stages a GRPO run as ``train_model`` does and runs its pod command with ``version``'s Python."""
    env = hub_env(version)
    run_dir.mkdir(parents=True)
    config = training_config(
        base_model=str(model), algorithm=algorithm, effective_batch_size=8, grpo_iterations=2, grpo_group_size=4,
        **fields,
    )  # fmt: skip
    write_run_config(config, run_dir, split, None, None, 1, pod_settings())
    return run_pod(env, run_dir), run_dir / "checkpoints"


def _called(stdout: str) -> tuple[str, set[str]]:
    """The function and keyword names of the ``training-hub <function>(k=v, ...)`` line the pod printed."""
    (match,) = [m for m in map(_CALL.match, stdout.splitlines()) if m]
    return match.group(1), set(re.findall(r"(?:^|, )([a-z_0-9]+)=", match.group(2)))


@pytest.mark.slow
@pytest.mark.parametrize("version", [MAIN_VERSION, "0.9.8"])
@pytest.mark.parametrize("algorithm", ["grpo", "lora_grpo"])
def test_grpo_reaches_verl_with_every_row_and_the_reward_and_ends_in_one_line(
    version, algorithm, grpo_split, tiny_model_dir, tmp_path
):
    split, rows = grpo_split
    process, ckpt_dir = _run_pod(version, algorithm, tmp_path / "run", split, tiny_model_dir)
    assert process.returncode == 1, process.stdout[-2000:] + process.stderr[-4000:]
    assert process.stdout.splitlines()[0].startswith(f"training-hub {version} (")
    function, keywords = _called(process.stdout)
    assert function == entrypoint.TRAINING_HUB_FUNCTIONS[algorithm]
    expected = {"model_path", "ckpt_output_dir", "data_path", "n_train", "n_val", "num_iterations", "group_size"}
    expected |= {"prompt_batch_size", "learning_rate", "temperature", "max_tokens", "max_prompt_length", "n_gpus"}
    expected |= {"nnodes", "reward_fn"} | ({"lora_r", "lora_alpha"} if algorithm == "lora_grpo" else set())
    assert keywords == expected
    if version == MAIN_VERSION:  # each keyword is named by the real function or read by its backends
        import training_hub

        taken = hub_compat.keywords_taken(function, getattr(training_hub, function))
        assert keywords <= taken and not keywords - set(inspect.signature(getattr(training_hub, function)).parameters)
    assert f"n_train={rows}," in process.stdout and "num_iterations=2," in process.stdout
    # verl's input: every row a chat prompt with its ground truth for the reward
    import pandas

    table = pandas.read_parquet(ckpt_dir / "verl_data" / "train.parquet")
    assert len(table) == rows
    first = table.iloc[0]
    assert first["prompt"][-1]["role"] == "user" and "Answer with the number only" in first["prompt"][-1]["content"]
    truth = first["reward_model"]["ground_truth"]
    # The reward file verl would import works on its own: the right number scores 1, a wrong one less than 0.5.
    spec = importlib.util.spec_from_file_location("verl_reward", ckpt_dir / "verl_custom_reward.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.compute_score("custom", f"The answer is {truth}", truth) == 1.0
    assert module.compute_score("custom", "no idea", truth) == 0.0
    last = [line for line in process.stderr.splitlines() if line.strip()][-1]
    assert last == entrypoint.no_gpu_message(algorithm)


@pytest.mark.slow
def test_lora_grpo_art_backend_is_asked_for_by_name(grpo_split, tiny_model_dir, tmp_path):
    """``training_backend='art'`` reaches ``lora_grpo(backend='art')``; without ART (or a GPU) the pod says so."""
    split, _ = grpo_split
    process, _ = _run_pod(MAIN_VERSION, "lora_grpo", tmp_path / "run", split, tiny_model_dir, backend="art")
    assert process.returncode == 1, process.stdout[-2000:] + process.stderr[-4000:]
    function, keywords = _called(process.stdout)
    assert (function, "backend" in keywords) == ("lora_grpo", True) and "backend='art'" in process.stdout
    assert [line for line in process.stderr.splitlines() if line.strip()][-1] == entrypoint.no_gpu_message("lora_grpo")


@pytest.mark.slow
def test_a_release_without_grpo_ends_the_pod_in_one_line(grpo_split, tiny_model_dir, tmp_path):
    split, _ = grpo_split
    process, _ = _run_pod("0.6.0", "grpo", tmp_path / "run", split, tiny_model_dir)
    assert process.returncode == 1
    assert process.stderr.strip().splitlines()[-1] == (
        "entrypoint: " + hub_compat.missing_function_message("0.6.0", "grpo")
    )
    assert "grpo arrived in training-hub 0.9.2" in process.stderr


def test_tool_call_rows_leave_the_reward_to_training_hub(tmp_path):
    """``reward_tool_call`` rows: no reward_fn, so Training Hub scores them with its own ``tool_call_reward``."""
    import json

    from components.training.finetuning.contract import load_run_config

    split = tmp_path / "tools.jsonl"
    row = {"question": "Weather in Paris?", "tools": [{"type": "function", "function": {"name": "weather"}}]}
    row.update(target_tool_name="weather", target_arguments={"city": "Paris"})
    split.write_text(json.dumps(row) + "\n")
    config = training_config(base_model="m", algorithm="grpo")
    (tmp_path / "run").mkdir()
    path = write_run_config(config, tmp_path / "run", split, None, None, 2, pod_settings(jit_checkpoint=False))
    function, kwargs = entrypoint.training_hub_call(load_run_config(path), {"PET_NNODES": "3"})
    assert function == "grpo" and "reward_fn" not in kwargs
    assert (kwargs["n_train"], kwargs["n_gpus"], kwargs["nnodes"], kwargs["n_val"]) == (1, 2, 3, 0)
