"""Task directories named in ``task_names`` (a local directory of lm-eval task YAMLs), staged like ``custom_tasks``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from components.evaluation.lm_eval.custom_task import stage_custom_tasks


def is_task_dir(name: str) -> bool:
    """Whether a ``task_names`` entry names a local directory (an absolute or ``./`` path that exists)."""
    return name.startswith(("/", "./", "../", "~")) and Path(name).expanduser().is_dir()


def declared_tasks(directory: Path) -> list[str]:
    """The groups and tasks the YAMLs of a directory declare, as lm-eval's own task index reads them.

    Raises:
        ValueError: No YAML declares a task.
    """
    from lm_eval.tasks import TaskManager

    index = TaskManager(include_path=[str(directory)], include_defaults=False)
    names = [*index.all_groups, *index.all_subtasks]
    if not names:
        raise ValueError(f"task_names: {directory} holds no task YAML declaring a `task:` name")
    return names


def stage_task_dirs(task_names: Sequence[str], staging: Path) -> tuple[list[str], list[Path]]:
    """Replaces the directories in ``task_names`` by the tasks they declare, staged under ``staging``.

    Returns:
        The task names (directories replaced in place by their tasks) and the staged directories to include.
    """
    names: list[str] = []
    include: list[Path] = []
    for index, name in enumerate(task_names):
        if not is_task_dir(name):
            names.append(name)
            continue
        staged = stage_custom_tasks(Path(name).expanduser(), Path(staging) / f"task-dir-{index}")
        include.append(staged)
        names.extend(declared_tasks(staged))
    return list(dict.fromkeys(names)), include
