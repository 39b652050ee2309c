"""GRPO's pieces: the reward rows' rules, the verifiable reward, the reward gate's statistics, and local GRPO training.

The gate's p-value is checked against SciPy's Welch test; the local trainer runs TRL's ``GRPOTrainer`` on the tiny
model (a few iterations, one thread) and must leave a merged model, the adapter (LoRA-GRPO) and a reward per step.
"""

from __future__ import annotations

import json
import random

import pytest
import torch

from components._common.reward_rows import (
    REWARD_ANSWER,
    REWARD_TOOL_CALL,
    RewardRowError,
    check_reward_row,
    load_reward_rows,
    prompt_messages,
    reward_row_format,
)
from components.training.finetuning.contract import TrainingConfigError
from components.training.finetuning.pod.rewards import compute_score
from components.training.finetuning.reward_gate import reward_gate
from tests.harness.requests import training_config

TOOL_ROW = {
    "question": "Weather in Paris?",
    "tools": [{"type": "function", "function": {"name": "weather"}}],
    "target_tool_name": "weather",
    "target_arguments": {"city": "Paris"},
    "system_prompt": "You call tools.",
}


def test_reward_rows_follow_training_hubs_two_formats():
    answer = {"question": "Compute 2 + 3.", "ground_truth": "5"}
    assert reward_row_format(answer) == REWARD_ANSWER and reward_row_format(TOOL_ROW) == REWARD_TOOL_CALL
    assert check_reward_row(answer, REWARD_ANSWER) is None and check_reward_row(TOOL_ROW, REWARD_TOOL_CALL) is None
    assert check_reward_row({"question": "q", "ground_truth": 5}, REWARD_ANSWER) is None  # a number is its text
    chat = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}], "ground_truth": "a"}
    assert check_reward_row(chat, REWARD_ANSWER) is None and prompt_messages(chat) == chat["messages"]
    assert prompt_messages(TOOL_ROW) == [
        {"role": "system", "content": "You call tools."},
        {"role": "user", "content": "Weather in Paris?"},
    ]
    broken = {
        "no truth": ({"question": "q"}, "missing_field"),
        "empty truth": ({"question": "q", "ground_truth": " "}, "ground_truth_invalid"),
        "boolean truth": ({"question": "q", "ground_truth": True}, "ground_truth_invalid"),
        "empty question": ({"question": "", "ground_truth": "1"}, "prompt_missing"),
        "prompt ends on the answer": (
            {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "ground_truth": 1},
            "prompt_missing",
        ),
    }
    for name, (row, rule) in broken.items():
        assert check_reward_row(row, REWARD_ANSWER)[0] == rule, name
    assert check_reward_row({**TOOL_ROW, "target_arguments": "city=Paris"}, REWARD_TOOL_CALL)[0] == "tool_call_invalid"
    assert check_reward_row({**TOOL_ROW, "tools": "weather"}, REWARD_TOOL_CALL)[0] == "tool_call_invalid"


def test_a_broken_reward_row_is_one_line_naming_the_file_line_and_rule(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"question": "q", "ground_truth": "1"}\n{"question": "q2"}\n')
    with pytest.raises(RewardRowError) as raised:
        load_reward_rows(path, "train_dataset")
    assert str(raised.value) == (
        f"train_dataset {path}:2 [missing_field] no `ground_truth` key (a reward_answer row has `question` and "
        "`ground_truth`) (the fields of the input format must be present)"
    )


def test_the_reward_scores_the_answer_and_gives_format_credit():
    assert compute_score("x", "3 + 4 = 7", "7") == 1.0
    assert compute_score("x", "The answer is 7.0", 7) == 1.0
    assert compute_score("x", "7 8", "7") == 0.5  # the last number is the answer: wrong, but all numeric
    assert compute_score("x", "7 and then 8", "7") == pytest.approx(0.5 * 2 / 9)  # 2 of 9 characters numeric
    assert compute_score("x", "8", "7") == 0.5
    assert compute_score("x", "no idea", "7") == 0.0 and compute_score("x", "", "7") == 0.0
    assert 0 < compute_score("x", "maybe 8", "7") < 0.5
    assert compute_score("x", "Thinking...\nParis.", "paris") == 1.0  # a text answer: the last line
    assert compute_score("x", "London", "Paris") == 0.0


def test_the_gate_is_welchs_one_sided_test_of_the_last_against_the_first_quarter():
    from scipy import stats

    rng = random.Random(3)
    for _ in range(20):
        history = [rng.random() * 0.3 + 0.02 * step for step in range(rng.randint(8, 40))]
        gate = reward_gate(history)
        window = max(2, len(history) // 4)
        expected = stats.ttest_ind(history[-window:], history[:window], equal_var=False, alternative="greater")
        assert gate.window == window and gate.p_value == pytest.approx(expected.pvalue, rel=1e-9, abs=1e-12)
        assert gate.passed == (gate.gain > 0 and expected.pvalue < 0.05)


def test_local_tool_call_rows_are_scored_by_training_hubs_tool_call_reward():
    from components.training.finetuning.hf_trainer.grpo import tool_call_reward

    completions = [
        'Calling: {"name": "weather", "arguments": {"city": "Paris"}}',
        '{"name": "weather", "arguments": {"city": "Rome"}}',
        '{"name": "news", "arguments": {}}',
        "It is sunny.",
    ]
    rewards = tool_call_reward(completions, ["weather"] * 4, ['{"city": "Paris"}'] * 4)
    assert rewards == [1.0, 0.5, 0.0, 0.0]


def test_one_noisy_iteration_does_not_pass_the_gate():
    """The peer's rule ("final > first") passes this flat, noisy history; the gate does not."""
    flat = [0.31, 0.28, 0.35, 0.22, 0.30, 0.27, 0.33, 0.25, 0.29, 0.36]
    assert flat[-1] > flat[0]
    gate = reward_gate(flat)
    assert not gate.passed and gate.p_value > 0.05 and "within the noise" in gate.reason
    rising = [0.1, 0.12, 0.11, 0.2, 0.28, 0.35, 0.41, 0.44, 0.47, 0.5]
    assert reward_gate(rising).passed
    short = reward_gate([0.1, 0.9, 0.95])
    assert not short.passed and "cannot tell" in short.reason and short.metrics()["reward_gate_passed"] == 0.0
    falling = reward_gate(list(reversed(rising)))
    assert not falling.passed and falling.reason == "the reward did not rise"
    line = reward_gate(rising).line()
    assert line.startswith("reward gate PASSED: mean reward of the last 2 iterations 0.485 vs the first 2 0.110")


def test_grpo_settings_are_checked_like_every_training_setting():
    with pytest.raises(TrainingConfigError, match=r"training_grpo_group_size=1: must be >= 2"):
        training_config(algorithm="grpo", grpo_group_size=1)
    with pytest.raises(TrainingConfigError, match=r"training_backend='transformers': grpo trains through Training Hub"):
        training_config(algorithm="grpo", backend="transformers")
    with pytest.raises(TrainingConfigError, match=r"training_backend='unsloth': must be Training Hub's grpo backend"):
        training_config(algorithm="grpo", backend="unsloth")
    assert training_config(algorithm="lora_grpo", backend="art").backend == "art"


@pytest.mark.slow
def test_local_lora_grpo_trains_with_trl_and_keeps_a_reward_per_step(tiny_model_dir, tmp_path):
    from components.training.finetuning.hf_trainer import grpo
    from pipelines.demo.demo_data import grpo_rows

    torch.set_num_threads(1)
    config = training_config(
        base_model=str(tiny_model_dir), algorithm="lora_grpo", grpo_iterations=3, grpo_group_size=2,
        grpo_max_new_tokens=4, effective_batch_size=2, learning_rate=1e-2, lr_scheduler="constant", lora_r=4,
        lora_alpha=8,
    )  # fmt: skip
    result, rewards = grpo.train_grpo(config, tmp_path / "out", str(tiny_model_dir), list(grpo_rows(rows=8)), log=print)
    assert len(rewards) == 3 and all(0.0 <= value <= 1.0 for value in rewards)
    assert json.loads((tmp_path / "out" / grpo.REWARDS_FILE).read_text()) == rewards
    assert [record["step"] for record in result.records] == [1, 2, 3]
    assert (result.final_model_dir / "model.safetensors").is_file()  # the adapter merged: a plain model
    assert json.loads((result.adapter_dir / "adapter_config.json").read_text())["r"] == 4
    from transformers import AutoModelForCausalLM

    assert type(AutoModelForCausalLM.from_pretrained(result.final_model_dir)).__name__ == "LlamaForCausalLM"
