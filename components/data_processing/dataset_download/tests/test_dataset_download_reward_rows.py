"""GRPO's prompt rows through the dataset step: detected, checked row by row with their own rules, kept as they are."""

from __future__ import annotations

import json

import pytest

from components.data_processing.dataset_download.formats import detect_format
from components.data_processing.dataset_download.run import run_dataset_download
from components.data_processing.dataset_download.validation_report import DatasetValidationError
from tests.harness.requests import dataset_download_request, run_dataset_step

ANSWER = {"question": "Compute 2 + 3. Answer with the number only.", "ground_truth": "5"}
TOOL = {
    "question": "Weather in Paris?",
    "tools": [{"type": "function", "function": {"name": "weather"}}],
    "target_tool_name": "weather",
    "target_arguments": {"city": "Paris"},
}


def _write(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_reward_rows_are_detected_before_their_messages():
    assert detect_format([ANSWER] * 3)[0] == "reward_answer"
    assert detect_format([TOOL] * 3)[0] == "reward_tool_call"
    chat_prompt = {"messages": [{"role": "user", "content": "q"}], "ground_truth": "a"}
    assert detect_format([chat_prompt])[0] == "reward_answer"


@pytest.mark.parametrize("rows", [[ANSWER], [TOOL]])
def test_valid_reward_rows_pass_unchanged_into_the_split(rows, tmp_path):
    data = _write(tmp_path / "prompts.jsonl", rows * 10)
    result = run_dataset_step(str(data), tmp_path, train_split_ratio=0.8)
    assert (result.train.rows, result.eval.rows) == (8, 2)
    written = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert written == rows * 8  # nothing converted to chat messages
    assert result.validation.input_format == ("reward_tool_call" if "tools" in rows[0] else "reward_answer")


def test_a_broken_reward_row_fails_the_step_naming_its_line_and_rule(tmp_path):
    rows = [ANSWER] * 4 + [{"question": "Compute 1 + 1."}] + [ANSWER] * 3
    data = _write(tmp_path / "prompts.jsonl", rows)
    request = dataset_download_request(str(data), input_format="reward_answer")
    with pytest.raises(DatasetValidationError) as raised:
        run_dataset_download(request, tmp_path / "train.jsonl", tmp_path / "eval.jsonl")
    assert "prompts.jsonl:5 [missing_field] no `ground_truth` key" in str(raised.value)
    assert not (tmp_path / "train.jsonl").exists()


def test_on_invalid_drop_counts_the_rejected_reward_rows(tmp_path):
    rows = [ANSWER] * 9 + [{"question": "q", "ground_truth": ""}]
    data = _write(tmp_path / "prompts.jsonl", rows)
    result = run_dataset_step(str(data), tmp_path, on_invalid="drop", max_invalid_fraction=0.2, train_split_ratio=1.0)
    assert (result.validation.rows_valid, result.train.rows) == (9, 9)
    assert result.validation.rejects_by_rule == {"ground_truth_invalid": 1}
