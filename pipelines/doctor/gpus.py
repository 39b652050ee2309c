"""Check 5: GPU nodes can hold one training node's GPUs (``num_nodes`` times) and the eval step's, tolerations included.

GPU nodes are those labelled ``nvidia.com/gpu.present=true`` (GPU Feature Discovery) for ``nvidia.com/gpu``, or those
with the configured GPU resource allocatable otherwise. Allocatable is what a node can give; what running pods hold
already is not subtracted (doctor says "at most").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.doctor import facts as keys
from pipelines.doctor.cluster import ApiUnavailable, Cluster, Forbidden
from pipelines.doctor.facts import RunValues
from pipelines.doctor.gpu_demand import gpu_demand
from pipelines.doctor.report import Check, fail, ok, warn

NVIDIA = "nvidia.com/gpu"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present=true"
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


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


def blocking_taints(node: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The node's NoSchedule/NoExecute taints that ``tolerations`` do not tolerate."""
    taints = (node.get("spec") or {}).get("taints") or []
    return [dict(t) for t in taints if t.get("effect") in BLOCKING_EFFECTS and not tolerates(tolerations, t)]


def allocatable(node: Mapping[str, Any], resource: str) -> int:
    """The node's allocatable count of ``resource`` (0 when it has none)."""
    value = ((node.get("status") or {}).get("allocatable") or {}).get(resource, "0")
    try:
        return int(str(value))
    except ValueError:
        return 0


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name", "?"))


def _selected(node: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in selector.items())


def _toleration_for(taint: Mapping[str, Any]) -> dict[str, Any]:
    toleration = {"key": taint.get("key"), "operator": "Exists", "effect": taint.get("effect")}
    return {key: value for key, value in toleration.items() if value}


def _fit(
    nodes: list[dict[str, Any]], resource: str, per_pod: int, pods: int, tolerations: list, selector: dict, what: str
) -> tuple[Check | None, list[dict[str, Any]]]:
    """A FAIL when ``pods`` pods of ``per_pod`` GPUs cannot be placed, else None; plus the taints in the way."""
    big_enough = [n for n in nodes if allocatable(n, resource) >= per_pod and _selected(n, selector)]
    if not big_enough:
        largest = max((allocatable(n, resource) for n in nodes), default=0)
        detail = f"{what} asks for {per_pod} {resource} per pod; the largest GPU node has {largest} allocatable"
        if selector:
            detail += f" among nodes matching the node selector {selector}"
        return fail("gpus", detail, "ask for fewer GPUs per pod, or add larger GPU nodes"), []
    usable = [n for n in big_enough if not blocking_taints(n, tolerations)]
    capacity = sum(allocatable(n, resource) // per_pod for n in usable)
    if capacity >= pods:
        return None, []
    taints = [t for n in big_enough for t in blocking_taints(n, tolerations)]
    if taints:
        unique = {json.dumps(_toleration_for(t), sort_keys=True) for t in taints}
        needed = ", ".join(sorted(unique))
        detail = f"{what}: the GPU nodes that fit are tainted ({', '.join(sorted({_name(n) for n in big_enough}))})"
        return fail("gpus", detail, f"add tolerations [{needed}]"), taints
    detail = f"{what}: the GPU nodes hold at most {capacity} such pod(s) ({resource} allocatable)"
    return fail("gpus", detail, "lower the number of nodes or GPUs per node, or add GPU nodes"), []


def check_gpus(cluster: Cluster, values: RunValues, launcher: str) -> list[Check]:
    """Check 5: GPU nodes exist and fit one training node (``num_nodes`` times) and the eval step's GPUs."""
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
    nodes = [n for n in nodes if not (n.get("spec") or {}).get("unschedulable") and allocatable(n, resource) > 0]
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
    problems: list[Check] = []
    fits: list[str] = []
    for what, gpu_resource, per_pod, count, tolerations, node_selector, tainted, other in demands:
        problem, taints = _fit(nodes, gpu_resource, per_pod, count, tolerations, dict(node_selector or {}), what)
        if problem:
            problems.append(fail("gpus", problem.what, problem.remedy + (tainted if taints else other)))
        else:
            fits.append(what)
    if len(problems) > 1:  # one cause (no fitting GPU node, taints) usually stops both steps: one line
        return [fail("gpus", "; ".join(p.what for p in problems), "; ".join(p.remedy for p in problems))]
    if problems:
        return problems
    demand = gpu_demand(values, launcher)
    total = sum(allocatable(n, resource) for n in nodes)
    if demand.peak > total:
        what = f"the run holds {demand.describe()}; the GPU nodes have {total} {resource} allocatable in all"
        remedy = f"lower {knobs}, add GPU nodes, or keep GPU steps from overlapping (`.after()` in pipeline.py)"
        return [fail("gpus", what, remedy)]
    peak = f"; peak {demand.describe()} of {total} allocatable"
    return [ok("gpus", f"{len(nodes)} GPU node(s) fit {' and '.join(fits)} ({resource}){peak}")]
