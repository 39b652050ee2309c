"""Every row rule and converter, with rows that must fail and rows that must pass."""

import pytest

from components._common.chat_errors import RULES, RowError
from components._common.chat_format import check_messages, check_row
from components.data_processing.dataset_download.formats import (
    detect_format,
    from_alpaca,
    from_prompt_completion,
    from_sharegpt,
)

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
