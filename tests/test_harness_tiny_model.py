"""The offline tiny chat model and the shipped demo dataset: real transformers behaviour, no downloads."""

import json

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from pipelines.demo.demo_data import DEMO_DATASET_PATH, demo_conversations, write_demo_dataset


def test_tiny_model_loads_offline_and_is_tiny(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert 50_000 < sum(p.numel() for p in model.parameters()) < 200_000
    assert model.config.model_type == "llama"


def test_chat_template_marks_exactly_the_assistant_answer(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2 plus 3?"},
        {"role": "assistant", "content": "2 + 3 = 5"},
    ]
    encoded = tokenizer.apply_chat_template(
        messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    marked = [token for token, flag in zip(encoded["input_ids"], encoded["assistant_masks"]) if flag]
    assert tokenizer.decode(marked) == "2 + 3 = 5<|im_end|>"
    prompt = tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")


def test_tiny_model_generates_and_stops_at_end_of_turn(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Compute 1 + 1."}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.no_grad():
        output = model.generate(**prompt, max_new_tokens=5, do_sample=False)
    assert output.shape[1] > prompt["input_ids"].shape[1]
    assert model.generation_config.eos_token_id == tokenizer.convert_tokens_to_ids("<|im_end|>")


def test_shipped_demo_dataset_is_current_and_well_formed(tmp_path):
    assert write_demo_dataset(tmp_path / "demo.jsonl").read_bytes() == DEMO_DATASET_PATH.read_bytes()
    rows = [json.loads(line) for line in DEMO_DATASET_PATH.read_text().splitlines()]
    assert len(rows) == 400
    assert all(row["messages"][-1]["role"] == "assistant" for row in rows)
    assert list(demo_conversations(3, seed=1)) == list(demo_conversations(3, seed=1))
    assert list(demo_conversations(3, seed=1)) != list(demo_conversations(3, seed=2))


def test_shipped_grpo_dataset_is_current_and_every_answer_is_right(tmp_path):
    from pipelines.demo.demo_data import GRPO_DATASET_PATH, write_grpo_dataset

    assert write_grpo_dataset(tmp_path / "grpo.jsonl").read_bytes() == GRPO_DATASET_PATH.read_bytes()
    rows = [json.loads(line) for line in GRPO_DATASET_PATH.read_text().splitlines()]
    assert len(rows) == 200
    for row in rows:  # "Compute a op b. Answer with the number only." carries a op b as its ground truth
        left, symbol, right = row["question"].removeprefix("Compute ").split(".")[0].split()
        assert int(row["ground_truth"]) == eval(f"{int(left)} {symbol} {int(right)}")  # noqa: S307 - digits and +-*
