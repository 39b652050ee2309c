"""One chat format: the dataset step, train_model and lm-eval's held-out task accept and refuse the same rows."""

from __future__ import annotations

import json
import random

import pytest

from components._common.chat_errors import RULES
from components._common.chat_format import check_row, decode_json, fast_valid_lines
from components.evaluation.lm_eval.custom_task import EvalDatasetError, read_conversations
from components.training.finetuning.pod.inputs import EntrypointError, count_chat_rows
from tests.harness.requests import validate_local_files

U, A, S = ({"role": r, "content": f"{r} says hi"} for r in ("user", "assistant", "system"))
GOOD = {"messages": [S, U, A]}
CASES = {
    "not_an_object": [U, A],
    "missing_field": {"conversation": [U, A]},
    "messages_not_list": {"messages": "hi"},
    "messages_empty": {"messages": []},
    "message_not_object": {"messages": ["hi", A]},
    "role_invalid": {"messages": [{"role": "bot", "content": "x"}, A]},
    "content_not_string": {"messages": [{"role": "user", "content": None}, A]},
    "content_part_invalid": {"messages": [{"role": "user", "content": [{"type": "image_url"}]}, A]},
    "content_empty": {"messages": [U, {"role": "assistant", "content": [{"type": "text", "text": " "}]}]},
    "system_not_first": {"messages": [U, S, A]},
    "no_assistant_turn": {"messages": [S, {"role": "tool", "content": "42"}]},
}


@pytest.mark.parametrize("rule", list(CASES))
def test_the_three_consumers_refuse_a_row_under_the_same_rule(tmp_path, rule):
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(CASES[rule]) + "\n")
    report = validate_local_files([path], "x", input_format="messages")
    assert report.rejects_by_rule == {rule: 1}
    with pytest.raises(EntrypointError, match=rf"data.jsonl:2 \[{rule}\]"):
        count_chat_rows(path)
    with pytest.raises(EvalDatasetError, match=rf"data.jsonl:2 \[{rule}\]"):
        list(read_conversations(path, max_samples=-1))
    assert RULES[rule] and all(RULES.values())  # a known rule; every rule is described


def test_list_of_parts_is_accepted_everywhere(tmp_path):
    row = {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}, A]}
    path = tmp_path / "parts.jsonl"
    path.write_text(json.dumps(row) + "\n")
    assert validate_local_files([path], "x").rows_valid == 1
    assert count_chat_rows(path) == 1
    assert [m[0]["content"] for _, m in read_conversations(path, max_samples=-1)] == ["a\nb"]


def test_the_fast_path_never_disagrees_with_the_rules():
    rng = random.Random(7)
    roles = ["system", "user", "assistant", "tool", "bot"]
    contents = ["hi", "", "  ", 3, None]
    checked = 0
    for _ in range(3000):
        messages = [{"role": rng.choice(roles), "content": rng.choice(contents)} for _ in range(rng.randint(0, 4))]
        for allow_trailing_user in (False, True):
            line = json.dumps({"messages": messages, "id": 1}).encode()
            slow = check_row(decode_json(line), allow_trailing_user) is None
            assert fast_valid_lines([line], allow_trailing_user) == [slow], (messages, allow_trailing_user)
            checked += slow
    assert checked > 50  # the sample holds valid rows too


@pytest.mark.parametrize(
    "line,rule",
    [
        (b"{", "invalid_json"),
        (b'{"messages": "caf\xe9"}', "invalid_utf8"),
        (b"\xff\xfe{}", "invalid_utf8"),
        (b'{"a": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", "nesting_too_deep"),
    ],
)
def test_undecodable_lines_name_their_rule(line, rule):
    value = decode_json(line)
    assert value.rule == rule and fast_valid_lines([line]) == [False]
