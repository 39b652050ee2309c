"""The local launcher and OSFT, for real: the tiny model is trained on CPU, reloaded and asked to generate."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from components.training.finetuning.config import TrainingConfig
from components.training.finetuning.hf_trainer import data as local_data
from components.training.finetuning.hf_trainer import osft, preemption, training
from components.training.finetuning.local import trainer as local_trainer
from tests.harness.requests import training_config

pytestmark = pytest.mark.slow

FAST = {
    "effective_batch_size": 16,
    "learning_rate": 3e-3,
    "max_seq_len": 256,
    "max_tokens_per_gpu": 1024,
    "lr_scheduler": "constant",
    "max_steps": 12,
    "num_epochs": 1,
}


def _config(model_dir: Path, **overrides) -> TrainingConfig:
    return training_config(base_model=str(model_dir), **{**FAST, **overrides})


def _quiet(_line: str) -> None:
    pass


def _generate(model_dir: Path) -> str:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 plus 3?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    output = model.generate(**prompt, max_new_tokens=6, do_sample=False)
    new_tokens = output[0, prompt["input_ids"].shape[1] :]
    assert len(new_tokens) > 0
    return tokenizer.decode(new_tokens)


@pytest.mark.parametrize(
    ("algorithm", "overrides"),
    [("sft", {}), ("lora", {"lora_r": 8, "lora_alpha": 16, "learning_rate": 1e-2}), ("osft", {})],
)
def test_algorithm_trains_reloads_and_generates(algorithm, overrides, tiny_model_dir, demo_dataset_path, tmp_path):
    config = _config(tiny_model_dir, algorithm=algorithm, **overrides)
    result = local_trainer.train_locally(config, demo_dataset_path, tmp_path / "out", log=_quiet)
    losses = [record["loss"] for record in result.records]
    assert len(losses) == 12 and [r["step"] for r in result.records] == list(range(1, 13))
    # Loss goes down (LoRA less: on a random-init base it cannot move the tied embeddings).
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.1, losses
    assert min(losses) < losses[0]
    assert result.records[-1]["tokens_per_second"] > 0 and result.records[-1]["total_steps"] == 12
    lines = (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["loss"] for line in lines] == losses
    # The saved model is a plain HF checkpoint (LoRA merged, OSFT folded back) that reloads and generates.
    assert (result.final_model_dir / "model.safetensors").is_file()
    assert (result.final_model_dir / "tokenizer_config.json").is_file()
    assert isinstance(_generate(result.final_model_dir), str)
    assert (result.adapter_dir is not None) == (algorithm == "lora")


def test_seeded_runs_repeat_exactly_and_seed_matters(tiny_model_dir, demo_dataset_path, tmp_path):
    config = _config(tiny_model_dir, max_steps=4)
    first = local_trainer.train_locally(config, demo_dataset_path, tmp_path / "a", log=_quiet)
    again = local_trainer.train_locally(config, demo_dataset_path, tmp_path / "b", log=_quiet)
    other = local_trainer.train_locally(
        _config(tiny_model_dir, max_steps=4, seed=7), demo_dataset_path, tmp_path / "c", log=_quiet
    )
    assert [r["loss"] for r in first.records] == [r["loss"] for r in again.records]
    assert [r["loss"] for r in first.records] != [r["loss"] for r in other.records]


def _first_64_rows(demo_dataset_path, tmp_path):
    """The demo's first 64 rows: 4 steps of 16 per epoch."""
    data = tmp_path / "train.jsonl"
    data.write_text("\n".join(demo_dataset_path.read_text().splitlines()[:64]) + "\n")
    return data


def test_resume_continues_from_the_newest_complete_epoch_checkpoint(tiny_model_dir, demo_dataset_path, tmp_path):
    data = _first_64_rows(demo_dataset_path, tmp_path)
    settings = {"num_epochs": 2, "checkpoint_at_epoch": True, "max_steps": 0}
    straight = local_trainer.train_locally(_config(tiny_model_dir, **settings), data, tmp_path / "straight", log=_quiet)
    # A run interrupted in epoch 2: epoch 0's checkpoint is complete, epoch 1's was never finished.
    out = tmp_path / "resumed"
    local_trainer.train_locally(
        _config(tiny_model_dir, num_epochs=1, checkpoint_at_epoch=True, max_steps=0), data, out, log=_quiet
    )
    (out / "checkpoints" / "epoch_1").mkdir()  # half-written: no done.json
    with (out / "metrics.jsonl").open("a") as handle:
        handle.write(json.dumps({"step": 5, "loss": 123.0}) + "\n")  # a step logged after the checkpoint
    lines = []
    resumed = local_trainer.train_locally(_config(tiny_model_dir, **settings), data, out, log=lines.append)
    assert resumed.resumed_from == out / "checkpoints" / "step_000000004"  # the end of epoch 0
    assert any(line.startswith("resuming from") for line in lines)
    assert [r["step"] for r in resumed.records] == list(range(1, 9))
    assert [r["loss"] for r in resumed.records] == pytest.approx([r["loss"] for r in straight.records], rel=1e-5)
    assert 123.0 not in [r["loss"] for r in training.metrics_module.read_metrics(out)]


REPO_ROOT = Path(__file__).resolve().parents[4]
CHILD = textwrap.dedent(
    """
    import json, sys
    import torch
    from pathlib import Path
    from components.training.finetuning.local import trainer as local_trainer
    from tests.harness.requests import training_config

    torch.set_num_threads(1)
    config = training_config(**json.loads(sys.argv[1]))
    local_trainer.train_locally(config, Path(sys.argv[2]), Path(sys.argv[3]), log=lambda line: print(line, flush=True))
    print("finished", flush=True)
    """
)


def test_sigterm_mid_run_saves_and_the_rerun_ends_like_an_uninterrupted_run(
    tiny_model_dir, demo_dataset_path, tmp_path
):
    data = _first_64_rows(demo_dataset_path, tmp_path)
    settings = {**FAST, "num_epochs": 2, "max_steps": 0, "checkpoint_interval_steps": 3}
    seen = []
    straight = local_trainer.train_locally(
        _config(tiny_model_dir, **settings), data, tmp_path / "straight", log=_quiet, on_step=seen.append
    )
    assert seen == straight.records and [r["step"] for r in seen] == list(range(1, 9))

    out = tmp_path / "preempted"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps({"base_model": str(tiny_model_dir), **settings}), str(data), str(out)],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    for line in child.stdout:  # SIGTERM once step 5 (mid epoch 1, after the step-3 checkpoint) is reported
        lines.append(line.strip())
        if line.startswith("step 5/"):
            child.send_signal(signal.SIGTERM)
            break
    rest, _ = child.communicate(timeout=120)
    lines += rest.splitlines()
    assert child.returncode == preemption.SIGTERM_EXIT_CODE, lines
    assert "finished" not in lines and any(line.startswith("SIGTERM: checkpoint saved") for line in lines)
    checkpoint = preemption.newest_complete_checkpoint(out / training.CHECKPOINTS_DIR)
    marker = preemption.read_marker(checkpoint)
    # Saved at the end of the step the signal interrupted (5, or 6 if it landed during step 6), mid epoch 1.
    assert marker["step"] in (5, 6) and marker["epoch"] == 1 and marker["offset"] == 16 * (marker["step"] - 4)
    assert not (out / training.FINAL_DIR).exists()

    log = []
    resumed = local_trainer.train_locally(_config(tiny_model_dir, **settings), data, out, log=log.append)
    assert resumed.resumed_from == checkpoint and log[0].startswith(f"resuming from {checkpoint}")
    assert [r["step"] for r in resumed.records] == list(range(1, 9))
    assert [r["loss"] for r in resumed.records] == pytest.approx([r["loss"] for r in straight.records], rel=1e-5)
    assert resumed.records[-1]["loss"] == pytest.approx(straight.records[-1]["loss"], rel=1e-5)


def test_accumulating_micro_batches_makes_the_same_steps_as_one_pass(tiny_model_dir, demo_dataset_path, tmp_path):
    """16 micro-batches of one sample (the demo's longest has 39 tokens) vs the whole step at once: the same losses."""
    one_pass = _config(tiny_model_dir, max_steps=3)
    accumulated = _config(tiny_model_dir, max_steps=3, max_seq_len=40, max_tokens_per_gpu=40)
    assert training.batch_shape(accumulated, 1, 39) == (1, 16) and training.batch_shape(one_pass, 1, 39) == (16, 1)
    runs = [
        local_trainer.train_locally(config, demo_dataset_path, tmp_path / str(index), log=_quiet)
        for index, config in enumerate((one_pass, accumulated))
    ]
    assert [r["loss"] for r in runs[1].records] == pytest.approx([r["loss"] for r in runs[0].records], rel=1e-5)


def test_a_step_splits_into_micro_batches_within_the_token_budget_and_over_the_ranks():
    def shape(batch, budget, world, longest=256):
        config = training_config(base_model="m", effective_batch_size=batch, max_seq_len=256, max_tokens_per_gpu=budget)
        return training.batch_shape(config, world, longest)

    assert shape(16, 1024, 1) == (4, 4)  # 4 samples of up to 256 tokens per micro-batch, 4 accumulated
    assert shape(16, 1024, 1, longest=60) == (16, 1)  # short samples: the whole step in one pass
    assert shape(12, 1280, 2) == (3, 2)  # 6 per rank: the largest divisor within 5
    assert shape(4, 256, 2) == (1, 2)
    with pytest.raises(local_data.LocalTrainingError, match="effective_batch_size=3 does not split over 2 process"):
        shape(3, 1024, 2)


def test_full_fine_tuning_is_sharded_with_fsdp2_as_the_strategy_says(monkeypatch):
    """The TrainingArguments of several GPUs (built here, not run: accelerate shards on GPUs only)."""

    def fsdp(strategy, world=4, algorithm="sft"):
        config = training_config(base_model="m", algorithm=algorithm, fsdp_sharding_strategy=strategy)
        return training._fsdp(config, world)

    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert fsdp("FULL_SHARD") == {"fsdp": True, "fsdp_config": {"version": 2, "reshard_after_forward": True}}
    assert fsdp("SHARD_GRAD_OP")["fsdp_config"]["reshard_after_forward"] is False
    hybrid = fsdp("HYBRID_SHARD")["parallelism_config"]
    assert (hybrid.dp_replicate_size, hybrid.dp_shard_size) == (2, 2)  # 2 nodes x 2 GPUs
    assert fsdp("NO_SHARD") == fsdp("FULL_SHARD", world=1) == fsdp("FULL_SHARD", algorithm="lora") == {}
    assert fsdp("FULL_SHARD", algorithm="osft") == {}


def test_data_without_trainable_samples_is_refused(tiny_model_dir, tmp_path):
    data = tmp_path / "train.jsonl"
    too_long = [{"role": "user", "content": "hi " * 400}, {"role": "assistant", "content": "ok"}]
    data.write_text(json.dumps({"messages": too_long}) + "\n")
    with pytest.raises(local_data.LocalTrainingError, match="none of 1 samples is trainable"):
        local_trainer.train_locally(_config(tiny_model_dir), data, tmp_path / "out", log=_quiet)
    data.write_text(json.dumps({"messages": too_long[:1]}) + "\n")  # the chat format refuses it first
    with pytest.raises(ValueError, match=r"train.jsonl:1 \[no_assistant_turn\]"):
        local_trainer.train_locally(_config(tiny_model_dir), data, tmp_path / "out", log=_quiet)


def _labels_trl_trains_on(tokenizer, model_dir, messages, tmp_path):
    """The labels of ``SFTTrainer``'s prepared sample of ``messages`` (prepared as :func:`training.train` does)."""
    from trl import SFTConfig, SFTTrainer

    dataset, longest = local_data.chat_dataset(tokenizer, [{"messages": messages}], 256)
    marked = local_data.template_marks_assistant(tokenizer)
    arguments = SFTConfig(output_dir=str(tmp_path), assistant_only_loss=marked, use_cpu=True, report_to=[])
    trainer = SFTTrainer(model=str(model_dir), args=arguments, train_dataset=dataset, processing_class=tokenizer)
    sample = trainer.train_dataset[0]
    assert len(sample["input_ids"]) == longest
    return sample["input_ids"], sample["labels"]


def test_assistant_only_labels_with_and_without_generation_markers(tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    turns = [("user", "What is 1 plus 1?"), ("assistant", "1 + 1 = 2"), ("user", "And 2 plus 2?"), ("assistant", "4")]
    messages = [{"role": role, "content": content} for role, content in turns]
    ids, labels = _labels_trl_trains_on(tokenizer, tiny_model_dir, messages, tmp_path / "marked")
    assert tokenizer.decode([t for t in labels if t != -100]) == "1 + 1 = 2<|im_end|>4<|im_end|>"
    # A template without {% generation %} markers that TRL cannot patch: the prefix fallback finds the same turns
    # (with the newline the template writes after each, as the templated prefix ends there).
    template = tokenizer.chat_template.replace("{% generation %}", "").replace("{% endgeneration %}", "")
    tokenizer.chat_template = template
    assert not local_data.template_marks_assistant(tokenizer)
    prefix_ids, prefix_labels = _labels_trl_trains_on(tokenizer, tiny_model_dir, messages, tmp_path / "prefix")
    assert prefix_ids == ids
    assert tokenizer.decode([t for t in prefix_labels if t != -100]) == "1 + 1 = 2<|im_end|>\n4<|im_end|>\n"


# -- OSFT (mini-trainer's model) ---------------------------------------------------------------------------------------


def _frozen_rank(shape, unfreeze_rank_ratio):
    """Training Hub's rule: the top floor(min(shape) * (1 - unfreeze_rank_ratio)) directions, at least one trained."""
    return min(int(min(shape) * (1 - unfreeze_rank_ratio)), min(shape) - 1)


def test_osft_decomposition_is_exact_and_saves_as_a_plain_model(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    inputs = torch.tensor([[5, 17, 42, 99]])
    before = base(input_ids=inputs).logits
    model = osft.load_osft_model(str(tiny_model_dir), unfreeze_rank_ratio=0.25)
    assert len(model.osft_config) == 2 * 7 and model.osft_config["model.layers.0.self_attn.q_proj.weight"] == 48
    assert model.osft_config["model.layers.0.self_attn.q_proj.weight"] == _frozen_rank((64, 64), 0.25)
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert "model.layers.0.self_attn.q_proj.osft_params.U_low" in trainable
    assert not any("high" in name for name in trainable)
    torch.testing.assert_close(model(input_ids=inputs).logits, before, atol=1e-4, rtol=1e-4)
    plain, _ = osft.plain_model(model, model.state_dict())
    plain.save_pretrained(tmp_path / "plain")
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "plain")
    assert type(reloaded) is type(base) and reloaded.config.architectures == [type(base).__name__]
    torch.testing.assert_close(reloaded(input_ids=inputs).logits, before, atol=1e-4, rtol=1e-4)
