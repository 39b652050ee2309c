"""GPU checks: nodes that fit the training and evaluation pods, the peak concurrent demand, the memory per GPU.

Allocatable is what a node can give; what running pods hold is not subtracted ("at most"). Two tasks run together
unless one waits for the other (``dependentTasks``).
"""

from __future__ import annotations

import dataclasses
import graphlib
import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from components.training import memory_estimate
from pipelines.doctor import facts as keys
from pipelines.doctor.cluster import ApiUnavailable, Cluster, Forbidden
from pipelines.doctor.facts import RunValues
from pipelines.doctor.report import Check, fail, ok, warn

NVIDIA = "nvidia.com/gpu"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present=true"
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
#: The training arguments of Training Hub's memory estimate, by :class:`memory_estimate.RunShape` field.
SHAPE_ARGUMENTS = {
    "max_tokens_per_gpu": "training_max_tokens_per_gpu",
    "max_seq_len": "training_max_seq_len",
    "effective_batch_size": "training_effective_batch_size",
    "lora_r": "training_lora_r",
}
_ESTIMATE_NEEDS = "the estimate needs training-hub installed and the model's config.json (a local directory or HF id)"


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Whether one of ``tolerations`` tolerates ``taint`` (Kubernetes' matching rules)."""
    for toleration in tolerations:
        if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
            continue
        operator = toleration.get("operator") or "Equal"
        if not toleration.get("key"):
            if operator == "Exists":
                return True
            continue
        if toleration.get("key") != taint.get("key"):
            continue
        if operator == "Exists" or str(toleration.get("value") or "") == str(taint.get("value") or ""):
            return True
    return False


def _blocking_taints(node: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    taints = (node.get("spec") or {}).get("taints") or []
    return [dict(t) for t in taints if t.get("effect") in BLOCKING_EFFECTS and not tolerates(tolerations, t)]


def _allocatable(node: Mapping[str, Any], resource: str) -> int:
    value = ((node.get("status") or {}).get("allocatable") or {}).get(resource, "0")
    return int(str(value)) if str(value).isdigit() else 0


def _fit(nodes: list[dict[str, Any]], demand: tuple) -> Check | None:
    """A FAIL when the demand's pods cannot be placed."""
    what, resource, per_pod, pods, tolerations, selector, tainted, other = demand
    selector = dict(selector or {})
    labels = [(n.get("metadata") or {}).get("labels") or {} for n in nodes]
    big_enough = [
        n
        for n, label in zip(nodes, labels, strict=True)
        if _allocatable(n, resource) >= per_pod and all(label.get(k) == v for k, v in selector.items())
    ]
    if not big_enough:
        largest = max((_allocatable(n, resource) for n in nodes), default=0)
        detail = f"{what} asks for {per_pod} {resource} per pod; the largest GPU node has {largest} allocatable"
        if selector:
            detail += f" among nodes matching the node selector {selector}"
        return fail("gpus", detail, "ask for fewer GPUs per pod, or add larger GPU nodes" + other)
    capacity = sum(_allocatable(n, resource) // per_pod for n in big_enough if not _blocking_taints(n, tolerations))
    if capacity >= pods:
        return None
    taints = [t for n in big_enough for t in _blocking_taints(n, tolerations)]
    if taints:
        wanted = ({k: t.get(k) for k in ("key", "effect") if t.get(k)} | {"operator": "Exists"} for t in taints)
        needed = sorted({json.dumps(toleration, sort_keys=True) for toleration in wanted})
        names = ", ".join(sorted(str((n.get("metadata") or {}).get("name", "?")) for n in big_enough))
        detail = f"{what}: the GPU nodes that fit are tainted ({names})"
        return fail("gpus", detail, f"add tolerations [{', '.join(needed)}]" + tainted)
    detail = f"{what}: the GPU nodes hold at most {capacity} such pod(s) ({resource} allocatable)"
    return fail("gpus", detail, "lower the number of nodes or GPUs per node, or add GPU nodes" + other)


def check_gpus(cluster: Cluster, values: RunValues, launcher: str) -> list[Check]:
    """GPU nodes exist and fit the training pods, the eval step's GPUs, and the peak demand."""
    resource = str(values.get(keys.GPU_RESOURCE) or NVIDIA)
    per_node = values.integer(keys.GPUS_PER_NODE) if launcher != "local" else 0
    pods = max(values.integer(keys.NUM_NODES), 1)
    eval_resource, eval_gpus = values.facts.accelerators.get("eval", (resource, 0))
    if per_node <= 0 and eval_gpus <= 0:
        return [ok("gpus", "the run asks for no GPUs (local launcher or 0 GPUs per node, no eval accelerator)")]
    selector = GPU_PRESENT_LABEL if resource == NVIDIA else ""
    try:
        nodes = cluster.nodes(selector)
    except Forbidden as error:
        what = f"cannot list nodes ({error}); GPU capacity not checked"
        return [warn("gpus", what, f"ask an admin: `oc get nodes -l {GPU_PRESENT_LABEL}`")]
    except ApiUnavailable as error:
        return [warn("gpus", f"could not list nodes: {error}", "check the API server")]
    nodes = [n for n in nodes if not (n.get("spec") or {}).get("unschedulable") and _allocatable(n, resource) > 0]
    if not nodes:
        found = f"no schedulable nodes labelled {GPU_PRESENT_LABEL}" if selector else f"no nodes with {resource}"
        remedy = "install the NVIDIA GPU Operator (it labels and advertises GPU nodes) or add GPU nodes"
        return [fail("gpus", f"{found} with allocatable {resource}", remedy)]
    facts = values.facts
    knobs = f"{values.label(keys.NUM_NODES)} / {values.label(keys.GPUS_PER_NODE)}"
    # (what, resource, GPUs per pod, pods, tolerations, node selector, remedy's end for taints, for the rest)
    demands = []
    if per_node > 0:
        training = (resource, per_node, pods, list(values.get(keys.TOLERATIONS) or []), values.get(keys.NODE_SELECTOR))
        tainted = f" with {values.label(keys.TOLERATIONS)}"
        demands.append((f"training ({pods} node(s) x {per_node} GPU)", *training, tainted, f" ({knobs})"))
    if eval_gpus > 0:
        evaluation = (eval_resource, eval_gpus, 1, facts.tolerations.get("eval", []), facts.node_selectors.get("eval"))
        tainted = " to the evaluation step (compile time), or keep a GPU node untainted"
        demands.append((f"evaluation ({eval_gpus} GPU)", *evaluation, tainted, " (compile time: --eval-gpus)"))
    problems = [problem for problem in (_fit(nodes, demand) for demand in demands) if problem]
    if problems:  # one cause (no fitting GPU node, taints) usually stops both steps: one line
        return [fail("gpus", "; ".join(p.what for p in problems), "; ".join(p.remedy for p in problems))]
    fits = [demand[0] for demand in demands]
    demand = gpu_demand(values, launcher)
    total = sum(_allocatable(n, resource) for n in nodes)
    if demand.peak > total:
        what = f"the run holds {demand.describe()}; the GPU nodes have {total} {resource} allocatable in all"
        remedy = f"lower {knobs}, add GPU nodes, or keep GPU steps from overlapping (`.after()` in pipeline.py)"
        return [fail("gpus", what, remedy)]
    peak = f"; peak {demand.describe()} of {total} allocatable"
    return [ok("gpus", f"{len(nodes)} GPU node(s) fit {' and '.join(fits)} ({resource}){peak}")]


@dataclasses.dataclass(frozen=True)
class GpuDemand:
    """The peak concurrent GPU demand of one run, the tasks holding it then, and every task's GPUs."""

    peak: int
    tasks: dict[str, int]
    per_task: dict[str, int]

    def describe(self) -> str:
        """``4 GPU(s) at once (train-model 4)``."""
        holders = ", ".join(f"{task} {gpus}" for task, gpus in self.tasks.items()) or "no task"
        return f"{self.peak} GPU(s) at once ({holders})"


def peak_of(per_task: Mapping[str, int], upstreams: Mapping[str, tuple[str, ...]]) -> GpuDemand:
    """The largest total GPU demand of tasks no two of which wait for each other (``upstreams``: direct)."""
    try:
        order = list(graphlib.TopologicalSorter(upstreams).static_order())
    except graphlib.CycleError as error:
        raise ValueError(f"the pipeline's tasks wait for each other in a cycle: {' -> '.join(error.args[1])}") from None
    waits: dict[str, set[str]] = {}
    for task in order:  # upstream tasks first
        waits[task] = set().union(*({upstream, *waits[upstream]} for upstream in upstreams.get(task, ())))
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
    """The peak concurrent GPU demand of a run with ``values`` and the resolved ``launcher``."""
    facts, per_task = values.facts, {}
    for task, step in facts.task_steps.items():
        per_task[task] = facts.task_accelerators.get(task, ("", 0))[1]
        if step == "train" and launcher != "local":
            per_task[task] += max(values.integer(keys.NUM_NODES), 1) * max(values.integer(keys.GPUS_PER_NODE), 0)
    return peak_of(per_task, facts.task_upstreams)


def run_shape(values: RunValues) -> memory_estimate.RunShape | None:
    """The run as the memory estimator needs it (None: no GPUs asked for, or no algorithm in the pipeline)."""

    def train(name: str) -> Any:
        return values.get(("train", f"training_{name}"))

    algorithm = train("algorithm")
    gpus = values.integer(keys.GPUS_PER_NODE) * max(values.integer(keys.NUM_NODES), 1)
    if algorithm not in ("sft", "osft", "lora") or gpus <= 0:
        return None
    integers = {field: values.integer(("train", argument)) for field, argument in SHAPE_ARGUMENTS.items()}
    return memory_estimate.RunShape(
        algorithm=str(algorithm),
        base_model=str(values.get(keys.BASE_MODEL) or ""),
        num_gpus=gpus,
        unfreeze_rank_ratio=float(train("unfreeze_rank_ratio")),
        use_liger=bool(train("use_liger")),
        quantization="4bit" if train("lora_load_in_4bit") else "8bit" if train("lora_load_in_8bit") else "",
        **integers,
    )


def check_gpu_memory(cluster: Cluster, values: RunValues) -> list[Check]:
    """``estimated X GiB per GPU (low–high) vs Y GiB on <product>`` against the smallest GPU."""
    shape = run_shape(values)
    if shape is None:
        return []
    try:
        nodes = cluster.nodes(GPU_PRESENT_LABEL)
    except (Forbidden, ApiUnavailable) as error:
        return [warn("gpus", f"GPU memory not checked: cannot list nodes ({error})", "ask an admin for the GPU type")]
    if not nodes:  # no GPU node at all: check_gpus says so
        return []
    advertised = memory_estimate.node_gpu_memory(nodes)
    if advertised is None:
        what = f"GPU memory not checked: no node carries the {memory_estimate.GPU_MEMORY_LABEL} label"
        return [warn("gpus", what, "GPU Feature Discovery (NVIDIA GPU Operator) labels nodes with it")]
    try:
        result = memory_estimate.estimate(shape, memory_estimate.config_directory(shape.base_model))
    except memory_estimate.EstimateUnavailable as error:  # not a finding about the cluster: a note, not a WARN
        return [ok("gpus", f"GPU memory not estimated here: {error}", _ESTIMATE_NEEDS)]
    level, what, remedy = memory_estimate.verdict(shape, result, *advertised)
    return [Check(level, "gpus", what, remedy)]
