"""The peak number of GPUs a run of a compiled pipeline holds at once, from its DAG and its tasks' GPU requests.

Two tasks can run at the same time unless one waits for the other (directly or through others: KFP's
``dependentTasks``, data and ``.after()`` alike). Each task's GPUs: the training step's are its job's
(``training_num_nodes`` x ``training_gpus_per_node`` of the run, none with the ``local`` launcher: the launcher pod
itself asks for none), every other task's the accelerator compiled onto it (the evaluations' ``EVAL_GPUS``). The peak
is the largest total of tasks no two of which wait for each other.
"""

from __future__ import annotations

import dataclasses
import graphlib
import itertools
from collections.abc import Mapping

from pipelines.doctor import facts as keys
from pipelines.doctor.facts import RunValues


@dataclasses.dataclass(frozen=True)
class GpuDemand:
    """The peak concurrent GPU demand of one run.

    Attributes:
        peak: The most GPUs held at once.
        tasks: The tasks holding them then (``{task: GPUs}``).
        per_task: Every task's GPUs (0 for tasks without any).
    """

    peak: int
    tasks: dict[str, int]
    per_task: dict[str, int]

    def describe(self) -> str:
        """``4 GPU(s) at once (train-model 4)``."""
        holders = ", ".join(f"{task} {gpus}" for task, gpus in self.tasks.items()) or "no task"
        return f"{self.peak} GPU(s) at once ({holders})"


def ancestors(upstreams: Mapping[str, tuple[str, ...]]) -> dict[str, set[str]]:
    """``{task: every task it waits for, directly or not}``."""
    try:
        order = list(graphlib.TopologicalSorter(upstreams).static_order())
    except graphlib.CycleError as error:
        raise ValueError(f"the pipeline's tasks wait for each other in a cycle: {' -> '.join(error.args[1])}") from None
    found: dict[str, set[str]] = {}
    for task in order:  # upstream tasks first
        found[task] = set().union(*({upstream, *found[upstream]} for upstream in upstreams.get(task, ())))
    return found


def peak_of(per_task: Mapping[str, int], upstreams: Mapping[str, tuple[str, ...]]) -> GpuDemand:
    """The largest total GPU demand of tasks that may run together.

    Args:
        per_task: Each task's GPUs.
        upstreams: Each task's direct upstream tasks.

    Returns:
        The peak, the tasks reaching it (in the pipeline's order) and ``per_task``.
    """
    waits = ancestors(upstreams)
    holders = [task for task, gpus in per_task.items() if gpus > 0]
    best: tuple[int, tuple[str, ...]] = (0, ())
    for size in range(1, len(holders) + 1):  # a handful of GPU tasks: every subset is cheap
        for group in itertools.combinations(holders, size):
            pairs = itertools.combinations(group, 2)
            together = all(a not in waits.get(b, set()) and b not in waits.get(a, set()) for a, b in pairs)
            total = sum(per_task[task] for task in group)
            if together and total > best[0]:
                best = (total, group)
    return GpuDemand(best[0], {task: per_task[task] for task in best[1]}, dict(per_task))


def gpu_demand(values: RunValues, launcher: str) -> GpuDemand:
    """The peak concurrent GPU demand of a run of ``values.facts`` with ``values``' arguments.

    Args:
        values: The compiled pipeline and the run's arguments.
        launcher: The resolved ``training_launcher`` (``local``: the training step holds no GPU).

    Returns:
        The demand.
    """
    facts = values.facts
    per_task: dict[str, int] = {}
    for task, step in facts.task_steps.items():
        gpus = facts.task_accelerators.get(task, ("", 0))[1]
        if step == "train" and launcher != "local":
            gpus += max(values.integer(keys.NUM_NODES), 1) * max(values.integer(keys.GPUS_PER_NODE), 0)
        per_task[task] = gpus
    return peak_of(per_task, facts.task_upstreams)
