"""lm-eval tasks: the held-out split as tasks (README: *The held-out tasks*), user task directories, names checked."""

from __future__ import annotations

import difflib
import itertools
import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from components._common.artifacts import ArtifactFileError, find_artifact_file
from components._common.chat_errors import ChatFormatError
from components._common.chat_format import iter_chat_file
from components._common.files import write_text_atomically

#: The held-out tasks, in the order they are reported: generations scored against the reference assistant turns,
#: and the per-token log-likelihood of those turns.
HELDOUT_GENERATION_TASK, HELDOUT_PERPLEXITY_TASK = HELDOUT_TASKS = ("heldout_generation", "heldout_perplexity")
#: Placeholder in user task YAMLs replaced by the absolute path of the staged task directory.
TASK_DIR_PLACEHOLDER = "${TASK_DIR}"

#: Whether higher is better, by held-out metric (EvalHub's results carry no direction).
HELDOUT_HIGHER_IS_BETTER = {"exact_match": True, "chrf": True, "token_loss": False, "token_perplexity": False}
#: The module the YAMLs' ``!function`` tags name (this one).
FUNCTIONS_MODULE = "components.evaluation.lm_eval.custom_task"
_DOCS_FILE = "heldout_docs.jsonl"


class _FunctionRef(str):
    """A dotted function name that lm-eval's YAML loader resolves (written as a ``!function`` tag)."""


class EvalDatasetError(ValueError):
    """The held-out chat dataset is missing, malformed or empty."""


@dataclass(frozen=True)
class HeldoutDoc:
    """One held-out conversation as lm-eval reads it (``plain_*``: without the chat template; tokens scored)."""

    system: str
    prompt: str
    plain_prompt: str
    reference: str
    plain_reference: str
    reference_tokens: int
    source_line: int


def find_dataset_file(path: Path) -> Path:
    """The JSONL file of the ``eval_dataset`` artifact; ``EvalDatasetError`` when there is none or several."""
    try:
        return find_artifact_file(path, "eval_dataset")
    except ArtifactFileError as error:
        raise EvalDatasetError(str(error)) from None


def read_conversations(path: Path, max_samples: int) -> Iterator[tuple[int, list[dict]]]:
    """Yields ``(line, messages)`` for the first ``max_samples`` (-1: all) conversations of a chat JSONL file.

    Raises:
        EvalDatasetError: A row breaks a rule of the chat format or the held-out rules (naming file, line, rule).
    """
    rows = iter_chat_file(path, allow_trailing_user=True, heldout=True, label="eval_dataset", require_rows=False)
    try:
        for line, row in itertools.islice(rows, None if max_samples == -1 else max_samples):
            yield line, row["messages"]
    except ChatFormatError as error:
        raise EvalDatasetError(str(error)) from None
    finally:
        rows.close()


def _labelled(messages: Sequence[dict]) -> list[str]:
    return [f"{m['role'].capitalize()}: {m['content']}" for m in messages]


def build_doc(messages: Sequence[dict], source_line: int, reference_tokens: int = 0) -> HeldoutDoc:
    """Splits a validated conversation (the last turn the assistant's) into the prompt parts and the reference."""
    *prompt_turns, answer = messages
    system = prompt_turns[0]["content"] if prompt_turns[0]["role"] == "system" else ""
    dialogue = prompt_turns[1:] if system else prompt_turns
    if len(dialogue) == 1 and dialogue[0]["role"] == "user":
        prompt = dialogue[0]["content"]
    else:
        prompt = "\n\n".join(_labelled(dialogue))
    plain_prompt = "\n\n".join([*_labelled(prompt_turns), "Assistant:"])
    reference = answer["content"]
    return HeldoutDoc(system, prompt, plain_prompt, reference, " " + reference, reference_tokens, source_line)


def scored_pair(doc: HeldoutDoc, render_chat: Callable[[list[dict]], str] | None) -> tuple[str, str]:
    """The ``(context, continuation)`` lm-eval scores for a document (``render_chat``: the chat template, or None)."""
    if render_chat is None:
        return doc.plain_prompt, doc.plain_reference
    system = [{"role": "system", "content": doc.system}] if doc.system else []
    return render_chat([*system, {"role": "user", "content": doc.prompt}]), doc.reference


def perplexity_process_results(doc: dict, results: Sequence[tuple[float, bool]]) -> dict[str, tuple[float, int]]:
    """lm-eval ``process_results`` of :data:`HELDOUT_PERPLEXITY_TASK`: ``(loglikelihood, tokens)`` for both metrics."""
    loglikelihood = float(results[0][0])
    tokens = int(doc["reference_tokens"])
    return {"token_loss": (loglikelihood, tokens), "token_perplexity": (loglikelihood, tokens)}


def token_loss(items: Sequence[tuple[float, int]]) -> float:
    """lm-eval aggregation of ``(loglikelihood, tokens)`` pairs: mean negative log-likelihood per token, in nats."""
    return -sum(ll for ll, _ in items) / sum(tokens for _, tokens in items)


def _task_configs(docs_file: Path, apply_chat_template: bool, max_new_tokens: int) -> dict[str, dict]:
    """The lm-eval configs of both held-out tasks, by name (the functions are resolved by lm-eval's loader)."""
    dataset = {
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(docs_file)}},
        "test_split": "test",
        "fewshot_split": "test",
        "metadata": {"version": 1.0},
    }
    if apply_chat_template:
        prompt = {"description": "system", "doc_to_text": "prompt", "doc_to_target": "reference"}
        generation_prompt = scored_prompt = {**prompt, "target_delimiter": ""}
    else:
        plain = {"doc_to_text": "plain_prompt", "target_delimiter": ""}
        scored_prompt = {**plain, "doc_to_target": "plain_reference"}
        generation_prompt = {**plain, "doc_to_target": "reference", "target_delimiter": " "}
    generation = {
        "output_type": "generate_until",
        "generation_kwargs": {
            "until": [] if apply_chat_template else ["\n\n"],
            "max_gen_toks": max_new_tokens,
            "do_sample": False,
        },
        "metric_list": [
            {"metric": "exact_match", "aggregation": "mean", "regexes_to_ignore": [r"^\s+", r"\s+$"]},
            {"metric": "chrf", "aggregation": "chrf"},
        ],
    }
    perplexity = {
        "output_type": "loglikelihood",
        "process_results": _FunctionRef(f"{FUNCTIONS_MODULE}.perplexity_process_results"),
        "metric_list": [
            {"metric": "token_loss", "aggregation": _FunctionRef(f"{FUNCTIONS_MODULE}.token_loss")},
            {"metric": "token_perplexity", "aggregation": "weighted_perplexity"},
        ],
    }
    configs = {
        HELDOUT_GENERATION_TASK: {**dataset, **generation_prompt, **generation},
        HELDOUT_PERPLEXITY_TASK: {**dataset, **scored_prompt, **perplexity},
    }
    for name, config in configs.items():
        config["task"] = name
        for entry in config["metric_list"]:
            entry["higher_is_better"] = HELDOUT_HIGHER_IS_BETTER[entry["metric"]]
    return configs


def _to_yaml(config: dict) -> str:
    """Serialises a task config as YAML, writing :class:`_FunctionRef` values as ``!function`` tags."""
    import yaml

    class TaskDumper(yaml.SafeDumper):
        pass

    TaskDumper.add_representer(_FunctionRef, lambda dumper, ref: dumper.represent_scalar("!function", str(ref)))
    return yaml.dump(config, Dumper=TaskDumper, sort_keys=False, allow_unicode=True)


def write_heldout_tasks(
    dataset_path: Path,
    task_dir: Path,
    count_tokens: Callable[[str, str], int],
    render_chat: Callable[[list[dict]], str] | None,
    max_samples: int,
    max_new_tokens: int,
) -> int:
    """Writes the first ``max_samples`` (-1: all) conversations and the two task YAMLs; returns how many were written.

    Raises:
        EvalDatasetError: The dataset is missing, has a bad row, or holds no conversation.
    """
    source = find_dataset_file(dataset_path)
    docs = []
    for line, messages in read_conversations(source, max_samples):
        doc = build_doc(messages, line)
        docs.append(replace(doc, reference_tokens=max(1, count_tokens(*scored_pair(doc, render_chat)))))
    if not docs:
        raise EvalDatasetError(
            f"eval_dataset {source}: no conversations (the file is empty); pass a held-out split with rows, "
            "or set allow_empty_eval_dataset to skip the held-out tasks"
        )
    task_dir.mkdir(parents=True, exist_ok=True)
    docs_file = task_dir / _DOCS_FILE
    write_text_atomically(docs_file, "".join(json.dumps(asdict(doc), ensure_ascii=False) + "\n" for doc in docs))
    for name, config in _task_configs(docs_file, render_chat is not None, max_new_tokens).items():
        write_text_atomically(task_dir / f"{name}.yaml", _to_yaml(config))
    return len(docs)


def count_conversations(dataset_path: Path) -> int:
    """How many conversations (non-blank lines) a dataset artifact holds."""
    with find_dataset_file(dataset_path).open("rb") as handle:
        return sum(1 for line in handle if line.strip())


def is_empty_dataset(dataset_path: Path) -> bool:
    """Whether a dataset artifact's file holds no conversation (False when there is no file: that error comes later)."""
    try:
        return count_conversations(dataset_path) == 0
    except EvalDatasetError:
        return False


def stage_custom_tasks(source: Path, target: Path) -> Path:
    """Copies user task YAMLs (and their data) with :data:`TASK_DIR_PLACEHOLDER` made the copy's path."""
    if not source.is_dir():
        raise ValueError(f"custom_tasks: {source} must be a directory of lm-eval task YAML files")
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    yamls = sorted([*target.rglob("*.yaml"), *target.rglob("*.yml")])
    if not yamls:
        raise ValueError(f"custom_tasks: {source} holds no *.yaml task file")
    for path in yamls:
        text = path.read_text(encoding="utf-8")
        if TASK_DIR_PLACEHOLDER in text:
            path.write_text(text.replace(TASK_DIR_PLACEHOLDER, str(target.resolve())), encoding="utf-8")
    return target


#: Close matches named for an unknown task.
_CLOSE_MATCHES = 5


class UnknownTaskError(ValueError):
    """A task name is neither a built-in lm-eval task nor a custom or held-out one."""


def check_task_names(task_names: Sequence[str], heldout: bool) -> list[str]:
    """``task_names`` in order, without duplicates; ``heldout``: an ``eval_dataset`` is given.

    Raises:
        ValueError: A bad entry, or a held-out task without ``eval_dataset``.
    """
    if isinstance(task_names, str) or not isinstance(task_names, Sequence):
        raise ValueError(f"task_names must be a list of lm-eval task names, got {task_names!r}")
    names = []
    for index, name in enumerate(task_names):
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"task_names[{index}] must be a non-empty string, got {name!r}")
        if name in HELDOUT_TASKS and not heldout:
            raise ValueError(f"task_names[{index}] = {name!r} is built from eval_dataset, which was not given")
        names.append(name.strip())
    return list(dict.fromkeys(names))


def unknown_task_message(unknown: Sequence[str], known: Sequence[str]) -> str:
    """The error text for unknown task names: one sentence per name, with the closest ``known`` names."""
    lines = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=_CLOSE_MATCHES, cutoff=0.6)
        hint = f"close matches: {', '.join(close)}" if close else "no close match"
        lines.append(f"task_names: unknown lm-eval task {name!r} ({hint})")
    return "; ".join(lines)


def build_task_manager(task_names: Sequence[str], include_paths: Sequence[Path]) -> Any:
    """The lm-eval ``TaskManager`` that knows every name; the built-ins (~15 s to index) only when needed.

    Raises:
        UnknownTaskError: A name is in no index (the message lists close matches).
    """
    from lm_eval.tasks import TaskManager

    include = [str(p) for p in include_paths] or None
    if include:
        local = TaskManager(include_path=include, include_defaults=False)
        if all(name in local.all_tasks for name in task_names):
            return local
    print("[lm_eval] indexing lm-eval's built-in tasks (about 15 s)", flush=True)
    manager = TaskManager(include_path=include, include_defaults=True)
    known = set(manager.all_tasks)
    unknown = [name for name in task_names if name not in known]
    if unknown:
        raise UnknownTaskError(unknown_task_message(unknown, manager.all_tasks))
    return manager


def is_task_dir(name: str) -> bool:
    """Whether a ``task_names`` entry names a local directory (an absolute or ``./`` path that exists)."""
    return name.startswith(("/", "./", "../", "~")) and Path(name).expanduser().is_dir()


def declared_tasks(directory: Path) -> list[str]:
    """The groups and tasks the YAMLs of a directory declare, as lm-eval's task index reads them (at least one)."""
    from lm_eval.tasks import TaskManager

    index = TaskManager(include_path=[str(directory)], include_defaults=False)
    names = [*index.all_groups, *index.all_subtasks]
    if not names:
        raise ValueError(f"task_names: {directory} holds no task YAML declaring a `task:` name")
    return names


def stage_task_dirs(task_names: Sequence[str], staging: Path) -> tuple[list[str], list[Path]]:
    """The task names with each directory replaced by the tasks it declares, and those directories staged."""
    names: list[str] = []
    include: list[Path] = []
    for index, name in enumerate(task_names):
        if is_task_dir(name):
            include.append(stage_custom_tasks(Path(name).expanduser(), Path(staging) / f"task-dir-{index}"))
            names.extend(declared_tasks(include[-1]))
        else:
            names.append(name)
    return list(dict.fromkeys(names)), include
