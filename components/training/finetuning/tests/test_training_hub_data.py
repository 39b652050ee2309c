"""The real Training Hub on CPU, up to the GPU boundary: each backend's data processing, then the pod command itself.

On the dataset step's split as the training step stages it: SFT and OSFT (instructlab-training's processor) keep the
template's token ids, train on the assistant tokens only and drop rows of ``max_seq_len`` tokens or more (and under
20); LoRA (Unsloth) renders every row through the template to one ``text`` column, tokenised later by TRL (CUDA only).
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from components.training.finetuning.pod import entrypoint
from components.training.finetuning.run import write_run_config
from tests.harness.requests import pod_settings, training_config
from tests.harness.training_hub_envs import MAIN_VERSION

MIN_SEQ_LEN = 20  # instructlab-training's filter_samples_by_length default


@pytest.fixture(scope="module")
def staged(tmp_path_factory, hub_train_file):
    """The session's train split (the dataset step's) and a run directory: ``(run dir, train file, rows)``."""
    run_dir = tmp_path_factory.mktemp("staged") / "ws" / "train_model" / "train-model-0123456789"
    run_dir.mkdir(parents=True)
    return run_dir, *hub_train_file


def _stage(staged: tuple, algorithm: str, tiny_model_dir: Path, **hyperparameters) -> dict:
    """Stages the train split as the training step does; returns the run config."""
    run_dir, train, _ = staged
    config = training_config(
        base_model=str(tiny_model_dir), algorithm=algorithm, effective_batch_size=8, num_epochs=1, **hyperparameters
    )
    return json.loads(write_run_config(config, run_dir, train, None, None, 1, pod_settings()).read_text())


def _expected(data_path: str, tokenizer) -> list[tuple[list[int], list[int]]]:
    """(input_ids, labels) per row from the chat template: assistant tokens trained, the rest -100."""
    expected = []
    for line in Path(data_path).read_text().splitlines():
        encoded = tokenizer.apply_chat_template(
            json.loads(line)["messages"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
        ids = list(encoded["input_ids"])
        expected.append((ids, [t if m else -100 for t, m in zip(ids, encoded["assistant_masks"], strict=True)]))
    return expected


def _processed(path: Path) -> list[tuple[list[int], list[int]]]:
    return [(row["input_ids"], row["labels"]) for row in map(json.loads, path.read_text().splitlines())]


def _check_masks_and_lengths(data_path: str, processed: list, tokenizer, max_seq_len: int) -> None:
    expected = _expected(data_path, tokenizer)
    kept = [row for row in expected if MIN_SEQ_LEN <= len(row[0]) < max_seq_len]
    assert processed == kept
    for ids, labels in processed:
        assert any(label != -100 for label in labels) and labels[0] == -100  # prompt masked, answer trained


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sft", "osft"])
def test_every_row_is_tokenised_with_assistant_only_labels(backend, staged, tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer

    rows = staged[2]
    run_config = _stage(staged, backend, tiny_model_dir, max_seq_len=512, max_tokens_per_gpu=1024)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    lengths = sorted(len(ids) for ids, _ in _expected(run_config["data_path"], tokenizer))
    assert min(lengths) >= MIN_SEQ_LEN and max(lengths) < 512  # so every row must survive
    out = tmp_path / "data"
    if backend == "sft":
        from instructlab.training import data_process

        data_process.process_data(
            data_path=run_config["data_path"], data_output_path=str(out), max_seq_len=512,
            model_path=str(tiny_model_dir), num_cpu_procs=1,
        )  # fmt: skip
        processed = out / "data.jsonl"
    else:
        from training_hub import MiniTrainerOSFTBackend

        processed = Path(
            MiniTrainerOSFTBackend()._process_data(
                model_name_or_path=str(tiny_model_dir), data_path=run_config["data_path"], output_dir=str(out),
                max_seq_len=512, num_cpu_procs=1, unmask_messages=False, use_processed_dataset=False,
            )
        )  # fmt: skip
    result = _processed(processed)
    assert len(result) == rows
    _check_masks_and_lengths(run_config["data_path"], result, tokenizer, 512)


def test_max_seq_len_drops_rows_of_that_many_tokens_or_more(staged, tiny_model_dir, tmp_path):
    from training_hub import MiniTrainerOSFTBackend
    from transformers import AutoTokenizer

    rows = staged[2]
    run_config = _stage(staged, "osft", tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    lengths = sorted(len(ids) for ids, _ in _expected(run_config["data_path"], tokenizer))
    max_seq_len = lengths[len(lengths) // 2]  # about half the rows are that long or longer
    processed = MiniTrainerOSFTBackend()._process_data(
        model_name_or_path=str(tiny_model_dir), data_path=run_config["data_path"], output_dir=str(tmp_path),
        max_seq_len=max_seq_len, num_cpu_procs=1, unmask_messages=False, use_processed_dataset=False,
    )  # fmt: skip
    result = _processed(Path(processed))
    assert 0 < len(result) < rows and len(result) == sum(1 for n in lengths if n < max_seq_len)
    _check_masks_and_lengths(run_config["data_path"], result, tokenizer, max_seq_len)


def test_lora_renders_every_row_through_the_chat_template(staged, tiny_model_dir):
    from training_hub.algorithms.lora import UnslothLoRABackend
    from transformers import AutoTokenizer

    rows = staged[2]
    run_config = _stage(staged, "lora", tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    dataset = UnslothLoRABackend()._prepare_dataset({"data_path": run_config["data_path"]}, tokenizer)
    lines = Path(run_config["data_path"]).read_text().splitlines()
    assert len(dataset) == rows == len(lines)
    for text, line in zip(dataset["text"], lines, strict=True):
        assert text == tokenizer.apply_chat_template(json.loads(line)["messages"], tokenize=False)
    # Loss masking is TRL's, after this point; Training Hub 0.11.2 turns assistant-only loss off for LoRA.
    assert "assistant_only_loss=False" in inspect.getsource(UnslothLoRABackend._build_training_args)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["sft", "osft", "lora"])
def test_the_pod_command_runs_the_real_training_hub_and_ends_in_one_clear_line_without_a_gpu(
    algorithm, hub_train_file, hub_runs
):
    """The session's run (``hub_runs.py``) of the pod command on the same train split, staged as above."""
    rows = hub_train_file[1]
    run_config, process = hub_runs.pod(MAIN_VERSION, algorithm)
    assert process.returncode == 1, process.stdout[-2000:] + process.stderr[-4000:]
    # The first line names the installed Training Hub stack; 0.11.2 takes every keyword, so nothing is left out.
    assert process.stdout.splitlines()[0].startswith("training-hub 0.11.2 (instructlab-training 0.16.2, ")
    assert not [line for line in process.stdout.splitlines() if line.startswith("note: training-hub")]
    last = [line for line in process.stderr.splitlines() if line.strip()][-1]
    assert last == entrypoint.no_gpu_message(algorithm)
    assert last.startswith(f"Training Hub {algorithm.upper()} needs an NVIDIA GPU; this pod sees none")
    assert f"training-hub {entrypoint.TRAINING_HUB_FUNCTIONS[algorithm]}(" in process.stdout
    if algorithm == "sft":  # no flash-attn here: SDPA, else instructlab-training would refuse before processing data
        assert "disable_flash_attn=True" in process.stdout
    if algorithm == "osft":  # and mini-trainer would stop at its model set-up (test_flash_attn_fallback.py)
        assert "OSFT runs with PyTorch SDPA attention (TESTING=true)" in process.stdout
    if algorithm != "lora":  # every row was processed in the pod before torchrun met the missing GPU
        processed = Path(run_config["ckpt_output_dir"]) / "_data" / "data.jsonl"
        assert len(processed.read_text().splitlines()) == rows
