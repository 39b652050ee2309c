"""The task names of an lm_eval run: checked, local task directories staged, and lm-eval's task index built."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from components.evaluation.lm_eval.custom_task import HELDOUT_TASKS, stage_custom_tasks

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
