"""Every row rule and converter, with rows that must fail and rows that must pass; GRPO's prompt rows as they are."""

from __future__ import annotations

import json

import pytest

from components._common.chat_errors import RULES, RowError
from components._common.chat_format import check_messages, check_row
from components.data_processing.dataset_download.formats import (
    detect_format,
    from_alpaca,
    from_prompt_completion,
    from_sharegpt,
)
from components.data_processing.dataset_download.run import run_dataset_download
from components.data_processing.dataset_download.validation_report import DatasetValidationError
from tests.harness.requests import dataset_download_request, run_dataset_step

U = {"role": "user", "content": "What is 2+2?"}
A = {"role": "assistant", "content": "4"}
S = {"role": "system", "content": "Be brief."}
T = {"role": "tool", "content": '{"result": 4}'}


@pytest.mark.parametrize(
    "messages,rule",
    [
        ({"role": "user"}, "messages_not_list"),
        ("hello", "messages_not_list"),
        ([], "messages_empty"),
        ([U, "assistant: 4"], "message_not_object"),
        ([U, {"role": "bot", "content": "4"}], "role_invalid"),
        ([U, {"content": "4"}], "role_invalid"),
        ([U, {"role": ["assistant"], "content": "4"}], "role_invalid"),
        ([U, {"role": "assistant", "content": 4}], "content_not_string"),
        ([U, {"role": "assistant", "content": None}], "content_not_string"),
        ([U, {"role": "assistant"}], "content_not_string"),
        ([U, {"role": "assistant", "content": ""}], "content_empty"),
        ([U, {"role": "assistant", "content": " \n\t"}], "content_empty"),
        ([U, S, A], "system_not_first"),
        ([S, U, A, S, U, A], "system_not_first"),
        ([U], "no_assistant_turn"),
        ([S, U, T], "no_assistant_turn"),
        ([U, A, U], "trailing_user"),
    ],
)
def test_each_rule_rejects_its_rows(messages, rule):
    problem = check_messages(messages)
    assert problem is not None and problem[0] == rule
    assert rule in RULES


@pytest.mark.parametrize(
    "messages",
    [
        [U, A],
        [S, U, A],
        [A],
        [U, A, U, A],
        [S, U, {"role": "assistant", "content": "calling", "tool_calls": [{"name": "add"}]}, T, A],
        [U, {"role": "assistant", "content": "4", "weight": 0, "extra": {"k": 1}}],
        [{"role": "user", "content": "ünïcödé ✓"}, {"role": "assistant", "content": "  padded  "}],
    ],
)
def test_usable_conversations_pass(messages):
    assert check_messages(messages) is None


def test_trailing_user_is_allowed_on_request():
    assert check_messages([S, A, U], allow_trailing_user=True) is None
    assert check_messages([S, A, U])[0] == "trailing_user"


def test_row_level_rules():
    assert check_row([U, A])[0] == "not_an_object"
    assert check_row({"conversation": [U, A]})[0] == "missing_field"
    assert check_row({"messages": [U, A], "id": 7}) is None


def test_detail_names_the_message_index():
    rule, detail = check_messages([U, A, {"role": "critic", "content": "x"}])
    assert (rule, detail) == ("role_invalid", "messages[2].role='critic'")


def test_alpaca_with_and_without_input_and_system():
    row = {"instruction": "Add.", "input": "2 and 2", "output": "4", "id": 3}
    assert from_alpaca(row) == {
        "messages": [{"role": "user", "content": "Add.\n\n2 and 2"}, {"role": "assistant", "content": "4"}],
        "id": 3,
    }
    converted = from_alpaca({"instruction": "Add 2 and 2.", "input": "", "output": "4", "system": "Be brief."})
    assert converted["messages"] == [S, {"role": "user", "content": "Add 2 and 2."}, A]
    assert check_messages(converted["messages"]) is None


@pytest.mark.parametrize(
    "convert,row,rule",
    [
        (from_alpaca, {"instruction": "Add.", "input": "2 and 2"}, "missing_field"),
        (from_alpaca, {"input": "x", "output": "4"}, "missing_field"),
        (from_alpaca, {"instruction": ["Add."], "output": "4"}, "field_not_string"),
        (from_sharegpt, {"conversation": []}, "missing_field"),
        (from_sharegpt, {"conversations": "hi"}, "messages_not_list"),
        (from_sharegpt, {"conversations": [["human", "hi"]]}, "message_not_object"),
        (from_prompt_completion, {"prompt": "x"}, "missing_field"),
        (from_prompt_completion, {"prompt": 3, "completion": "4"}, "field_not_string"),
    ],
)
def test_converters_refuse_bad_rows_naming_the_rule(convert, row, rule):
    with pytest.raises(RowError) as error:
        convert(row)
    assert error.value.rule == rule


def test_sharegpt_maps_speakers_and_keeps_extra_keys():
    row = {
        "conversations": [
            {"from": "system", "value": "Be brief."},
            {"from": "human", "value": "What is 2+2?"},
            {"from": "gpt", "value": "4", "weight": 1},
        ],
        "source": "x",
    }
    assert from_sharegpt(row) == {"messages": [S, U, {"role": "assistant", "content": "4", "weight": 1}], "source": "x"}


def test_sharegpt_unknown_speaker_fails_the_role_rule():
    converted = from_sharegpt({"conversations": [{"from": "narrator", "value": "x"}, {"from": "gpt", "value": "y"}]})
    assert check_messages(converted["messages"]) == ("role_invalid", "messages[0].role='narrator'")


def test_prompt_completion_strings_and_conversational_lists():
    assert from_prompt_completion({"prompt": "What is 2+2?", "completion": "4", "k": 1}) == {"messages": [U, A], "k": 1}
    assert from_prompt_completion({"prompt": [S, U], "completion": [A]}) == {"messages": [S, U, A]}


@pytest.mark.parametrize(
    "row,expected",
    [
        ({"messages": [U, A]}, "messages"),
        ({"conversations": []}, "sharegpt"),
        ({"instruction": "a", "output": "b"}, "alpaca"),
        ({"prompt": "a", "completion": "b"}, "prompt_completion"),
    ],
)
def test_detection_of_each_format(row, expected):
    chosen, reason = detect_format([7, row, row])
    assert chosen == expected
    assert f"`{expected}`" in reason and "2 of the first 3 rows" in reason


def test_detection_refuses_mixed_or_unknown_rows():
    with pytest.raises(ValueError, match="mix formats"):
        detect_format([{"messages": []}, {"prompt": "a", "completion": "b"}])
    with pytest.raises(
        ValueError, match=r"^Expected chat format: messages field not found in the first 2 rows of data.jsonl"
    ):
        detect_format([{"text": "a"}, {"text": "b"}], "data.jsonl")


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
