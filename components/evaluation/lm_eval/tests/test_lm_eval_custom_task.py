"""The held-out split as lm-eval tasks: reading and checking rows, prompt parts, the YAML lm-eval loads."""

import json
import math
import shutil
from pathlib import Path

import pytest

from components.evaluation.lm_eval import custom_task
from components.evaluation.lm_eval.custom_task import (
    HELDOUT_GENERATION_TASK,
    HELDOUT_PERPLEXITY_TASK,
    HELDOUT_TASKS,
    TASK_DIR_PLACEHOLDER,
    EvalDatasetError,
    build_doc,
    find_dataset_file,
    is_empty_dataset,
    perplexity_process_results,
    read_conversations,
    scored_pair,
    stage_custom_tasks,
    token_loss,
    write_heldout_tasks,
)

FIXTURES = Path(__file__).parent / "fixtures"


def _words(context: str, continuation: str) -> int:
    """A stand-in token count: the words of the continuation."""
    return len(continuation.split())


def _render(messages: list) -> str:
    """A stand-in chat template."""
    return "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages) + "<assistant>\n"


def _write_rows(path: Path, rows: list) -> Path:
    def line(row: object) -> bytes:
        return row if isinstance(row, bytes) else (row if isinstance(row, str) else json.dumps(row)).encode()

    path.write_bytes(b"".join(line(r) + b"\n" for r in rows))
    return path


def _chat(*turns: tuple[str, str]) -> dict:
    return {"messages": [{"role": role, "content": content} for role, content in turns]}


def test_find_dataset_file_accepts_a_file_or_a_directory_with_one_jsonl(tmp_path, demo_dataset_path):
    assert find_dataset_file(demo_dataset_path) == demo_dataset_path
    (tmp_path / "eval.jsonl").write_text("")
    assert find_dataset_file(tmp_path) == tmp_path / "eval.jsonl"
    (tmp_path / "other.jsonl").write_text("")
    with pytest.raises(EvalDatasetError, match=r"exactly one \*\.jsonl file, found 2"):
        find_dataset_file(tmp_path)
    with pytest.raises(EvalDatasetError, match="does not exist"):
        find_dataset_file(tmp_path / "missing.jsonl")


def test_read_conversations_reads_the_first_rows_and_skips_blank_lines(tmp_path, demo_dataset_path):
    expected = [json.loads(line)["messages"] for line in demo_dataset_path.read_text().splitlines()[:3]]
    assert [m for _, m in read_conversations(demo_dataset_path, max_samples=3)] == expected
    path = _write_rows(tmp_path / "d.jsonl", [_chat(("user", "a"), ("assistant", "b")), "", "  "])
    path.write_text(path.read_text() + json.dumps(_chat(("user", "c"), ("assistant", "d"))) + "\n")
    assert [line for line, _ in read_conversations(path, max_samples=-1)] == [1, 4]


@pytest.mark.parametrize(
    ("row", "rule"),
    [
        ("{not json", r"\[invalid_json\]"),
        ('{"messages": [{"role": "user", "content": "\xff"}]}'.encode("latin-1"), r"\[invalid_utf8\]"),
        ('{"messages": ' + "[" * 10_000 + "]" * 10_000 + "}", r"\[nesting_too_deep\]"),
        ({"text": "hello"}, r"\[missing_field\] messages field not found \(no `messages` key\)"),
        (_chat(("user", "hi")), r"\[no_assistant_turn\]"),
        (_chat(("user", "hi"), ("assistant", "  ")), r"\[content_empty\]"),
        (_chat(("robot", "hi"), ("assistant", "yo")), r"\[role_invalid\] messages\[0\].role='robot'"),
        (_chat(("user", "hi"), ("assistant", "yo"), ("user", "again")), r"\[last_not_assistant\]"),
        (_chat(("system", "be kind"), ("assistant", "yo")), r"\[no_user_turn\]"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, r"\[content_part_invalid\]"),
    ],
)
def test_read_conversations_names_the_rule_the_file_and_the_line(tmp_path, row, rule):
    path = _write_rows(tmp_path / "eval.jsonl", [_chat(("user", "ok"), ("assistant", "fine")), row])
    with pytest.raises(EvalDatasetError, match=rule) as error:
        list(read_conversations(path, max_samples=-1))
    assert f"eval_dataset {path}:2 [" in str(error.value) and "\n" not in str(error.value)


def test_build_doc_splits_system_prompt_and_reference():
    doc = build_doc(
        _chat(("system", "Be exact."), ("user", "What is 2 plus 2?"), ("assistant", "2 + 2 = 4"))["messages"], 7
    )
    assert (doc.system, doc.prompt, doc.reference, doc.source_line) == (
        "Be exact.",
        "What is 2 plus 2?",
        "2 + 2 = 4",
        7,
    )
    assert doc.plain_prompt == "System: Be exact.\n\nUser: What is 2 plus 2?\n\nAssistant:"
    assert scored_pair(doc, None) == (doc.plain_prompt, " 2 + 2 = 4")
    assert scored_pair(doc, _render) == (
        "<system>Be exact.</system><user>What is 2 plus 2?</user><assistant>\n",
        "2 + 2 = 4",
    )
    no_system = build_doc(_chat(("user", "Hi"), ("assistant", "Hello"))["messages"], 1)
    assert (no_system.system, no_system.prompt, no_system.plain_prompt) == ("", "Hi", "User: Hi\n\nAssistant:")
    assert scored_pair(no_system, _render) == ("<user>Hi</user><assistant>\n", "Hello")


def test_build_doc_folds_earlier_turns_into_the_user_message():
    messages = _chat(("user", "Hi"), ("assistant", "Hello"), ("user", "2+2?"), ("assistant", "4"))["messages"]
    doc = build_doc(messages, 1)
    assert doc.system == ""
    assert doc.prompt == "User: Hi\n\nAssistant: Hello\n\nUser: 2+2?"
    assert doc.reference == "4"


def test_perplexity_aggregations_are_per_token():
    items = [perplexity_process_results({"reference_tokens": 2}, [(-4.0, False)])["token_loss"], (-2.0, 3)]
    assert items[0] == (-4.0, 2)
    assert token_loss(items) == pytest.approx(6.0 / 5.0)
    from lm_eval.api.metrics import weighted_perplexity

    assert weighted_perplexity(items) == pytest.approx(math.exp(6.0 / 5.0))


@pytest.mark.parametrize("apply_chat_template", [True, False])
def test_written_tasks_load_in_lm_eval(tmp_path, demo_dataset_path, apply_chat_template):
    from lm_eval.tasks import TaskManager
    from lm_eval.tasks._yaml_loader import load_yaml

    task_dir = tmp_path / "tasks"
    render = _render if apply_chat_template else None
    count = write_heldout_tasks(demo_dataset_path, task_dir, _words, render, max_samples=5, max_new_tokens=9)
    assert count == 5
    assert sorted(p.name for p in task_dir.iterdir()) == sorted(
        [f"{HELDOUT_GENERATION_TASK}.yaml", f"{HELDOUT_PERPLEXITY_TASK}.yaml", "heldout_docs.jsonl"]
    )
    docs = [json.loads(line) for line in (task_dir / "heldout_docs.jsonl").read_text().splitlines()]
    first = json.loads(demo_dataset_path.read_text().splitlines()[0])["messages"]
    assert docs[0]["reference"] == first[-1]["content"]
    assert docs[0]["reference_tokens"] == len(first[-1]["content"].split())

    generation = load_yaml(task_dir / f"{HELDOUT_GENERATION_TASK}.yaml", resolve_func=True)
    perplexity = load_yaml(task_dir / f"{HELDOUT_PERPLEXITY_TASK}.yaml", resolve_func=True)
    assert generation["generation_kwargs"]["max_gen_toks"] == 9
    assert generation["fewshot_split"] == generation["test_split"] == perplexity["fewshot_split"] == "test"
    assert generation["dataset_kwargs"]["data_files"]["test"] == str(task_dir / "heldout_docs.jsonl")
    assert perplexity["process_results"] is custom_task.perplexity_process_results
    assert perplexity["metric_list"][0]["aggregation"] is custom_task.token_loss
    if apply_chat_template:
        assert (generation["description"], generation["doc_to_text"], generation["target_delimiter"]) == (
            "system",
            "prompt",
            "",
        )
    else:
        assert "description" not in generation
        assert (generation["doc_to_text"], generation["target_delimiter"]) == ("plain_prompt", " ")
        assert (perplexity["doc_to_target"], perplexity["target_delimiter"]) == ("plain_reference", "")
        assert docs[0]["plain_reference"] == " " + docs[0]["reference"]
    assert sorted(TaskManager(include_path=str(task_dir), include_defaults=False).all_tasks) == sorted(HELDOUT_TASKS)


def test_portable_tasks_name_only_paths_of_the_remote_pod(tmp_path, demo_dataset_path):
    """The copy on the workspace names the documents by the pod's mount, not by where this step wrote them."""
    from lm_eval.tasks._yaml_loader import load_yaml

    from components.evaluation.lm_eval.remote_evaluation import make_tasks_portable

    staged, copy = tmp_path / "staging" / "heldout", tmp_path / "workspace" / "heldout"
    write_heldout_tasks(demo_dataset_path, staged, _words, None, max_samples=2, max_new_tokens=4)
    shutil.copytree(staged, copy)
    make_tasks_portable(copy, "/opt/app-root/src/my_tasks", staged)
    for name in HELDOUT_TASKS:
        assert str(tmp_path) not in (copy / f"{name}.yaml").read_text()
    config = load_yaml(copy / f"{HELDOUT_PERPLEXITY_TASK}.yaml", resolve_func=False)
    assert config["dataset_kwargs"]["data_files"]["test"] == "/opt/app-root/src/my_tasks/heldout_docs.jsonl"


def test_empty_dataset_is_an_error_and_is_detected(tmp_path):
    empty = _write_rows(tmp_path / "eval.jsonl", ["", " "])
    assert is_empty_dataset(empty)
    assert not is_empty_dataset(FIXTURES / "arith_choice" / "arith_choice.jsonl")
    with pytest.raises(EvalDatasetError, match="no conversations") as error:
        write_heldout_tasks(empty, tmp_path / "tasks", _words, _render, max_samples=-1, max_new_tokens=4)
    assert str(empty) in str(error.value)
    assert not (tmp_path / "tasks").exists()


def test_stage_custom_tasks_replaces_the_task_dir_placeholder(tmp_path):
    staged = stage_custom_tasks(FIXTURES / "arith_choice", tmp_path / "custom")
    text = (staged / "arith_choice.yaml").read_text()
    assert TASK_DIR_PLACEHOLDER not in text
    assert f"test: {staged.resolve()}/arith_choice.jsonl" in text
    assert TASK_DIR_PLACEHOLDER in (FIXTURES / "arith_choice" / "arith_choice.yaml").read_text()


def test_stage_custom_tasks_rejects_a_file_or_a_directory_without_yaml(tmp_path):
    with pytest.raises(ValueError, match="must be a directory"):
        stage_custom_tasks(FIXTURES / "arith_choice" / "arith_choice.jsonl", tmp_path / "a")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.jsonl").write_text("{}\n")
    with pytest.raises(ValueError, match=r"holds no \*\.yaml"):
        stage_custom_tasks(tmp_path / "data", tmp_path / "b")


def test_secret_values_never_reach_lm_evals_errors(tmp_path, monkeypatch):
    from components.evaluation.lm_eval.run import run_lm_eval
    from tests.harness.requests import lm_eval_request

    secret = "Zq9xLmN4pW7rT2vKc8"
    monkeypatch.setenv("HF_TOKEN", secret)
    with pytest.raises(ValueError) as error:
        run_lm_eval(
            lm_eval_request(
                model=str(tmp_path / "model"),
                model_source=str(tmp_path / f"models-{secret}"),  # missing: the error quotes the path
            ),
            results_path=str(tmp_path / "results.json"),
            report_path=str(tmp_path / "report.html"),
        )
    assert "***" in str(error.value) and secret not in str(error.value)
    assert not (tmp_path / "results.json").exists()
