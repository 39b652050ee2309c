"""The job kinds the launchers run (TrainJob, PyTorchJob; ``lm_eval``'s LMEvalJob) and what differs (:class:`JobKind`).

:data:`API_PERMISSIONS` lists every API call's RBAC verb; ``rbac.yaml`` grants exactly these.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from components.training.finetuning.cluster.runtimes import RUNTIME_PLURALS
from components.training.finetuning.manifests import pytorchjob
from components.training.finetuning.manifests.spec import API_GROUP, API_VERSION, QUEUE_NAME_LABEL, TRAINJOB_PLURAL
from components.training.finetuning.manifests.status import condition
from components.training.finetuning.manifests.trainjob import JOB_NAME_POD_LABEL

#: JobSet labels the pods it creates with the JobSet's (= the TrainJob's) name.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
#: Every API call made here as (apiGroup, resource, verb); ``rbac.yaml`` grants exactly these.
API_PERMISSIONS = frozenset(
    {(API_GROUP, TRAINJOB_PLURAL, verb) for verb in ("create", "get", "watch", "patch", "delete")}
    | {(API_GROUP, plural, verb) for plural in RUNTIME_PLURALS.values() for verb in ("get", "list")}
    # pods "get": the launcher's own pod, the run's owner for the job's ownerReference
    | {("", "pods", "list"), ("", "pods", "get"), ("", "pods/log", "get"), ("", "events", "list")}
    | pytorchjob.API_PERMISSIONS
)


def trainjob_phase(trainjob: Mapping[str, Any]) -> str:
    """``Complete``, ``Failed``, ``Suspended``, ``Running`` (a pod ready / progress reported) or ``Pending``."""
    for type_ in ("Complete", "Failed", "Suspended"):
        if condition(trainjob, type_):
            return type_
    status = trainjob.get("status") or {}
    if status.get("trainerStatus") or any((job.get("ready") or 0) > 0 for job in status.get("jobsStatus") or []):
        return "Running"
    return "Pending"


def owned_by(trainjob: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a job carries all of ``labels`` (this run/task's ownership labels)."""
    existing = (trainjob.get("metadata") or {}).get("labels") or {}
    return all(existing.get(key) == value for key, value in labels.items())


@dataclasses.dataclass(frozen=True)
class JobKind:
    """What differs between the job kinds :func:`~.runner.run_job` runs (``suspend_path``: under ``spec``)."""

    kind: str
    group: str
    version: str
    plural: str
    phase: Callable[[Mapping[str, Any]], str]
    pod_selector: Callable[[str], str]
    checks_runtime: bool
    suspend_path: tuple[str, ...]
    children: str

    def suspend_patch(self, suspend: bool) -> dict[str, Any]:
        """The merge patch that suspends (``True``) or resumes (``False``) a job of this kind."""
        body: Any = suspend
        for key in reversed(self.suspend_path):
            body = {key: body}
        return {"spec": body}

    def is_suspended(self, job: Mapping[str, Any]) -> bool:
        """Whether the job's spec asks for it to be suspended."""
        node: Any = job.get("spec") or {}
        for key in self.suspend_path:
            node = (node or {}).get(key) if isinstance(node, Mapping) else None
        return node is True


TRAINJOB_KIND = JobKind(
    kind="TrainJob",
    group=API_GROUP,
    version=API_VERSION,
    plural=TRAINJOB_PLURAL,
    phase=trainjob_phase,
    pod_selector=lambda name: f"{JOBSET_NAME_LABEL}={name}",
    checks_runtime=True,
    suspend_path=("suspend",),
    children="its JobSet and pods",
)
PYTORCHJOB_KIND = JobKind(
    kind="PyTorchJob",
    group=pytorchjob.API_GROUP,
    version=pytorchjob.API_VERSION,
    plural=pytorchjob.PYTORCHJOB_PLURAL,
    phase=pytorchjob.pytorchjob_phase,
    pod_selector=pytorchjob.pod_label_selector,
    checks_runtime=False,
    suspend_path=("runPolicy", "suspend"),
    children="its pods",
)


def lmevaljob_phase(job: Mapping[str, Any]) -> str:
    """An LMEvalJob's phase from ``status.state``/``reason`` (trustyai-service-operator ``lmevaljob_types.go``)."""
    status = job.get("status") or {}
    state = status.get("state")
    if state == "Complete":
        return "Complete" if status.get("reason") == "Succeeded" else "Failed"
    if state == "Cancelled":
        return "Failed"
    if state == "Suspended" or (job.get("spec") or {}).get("suspend") is True:
        return "Suspended"
    return "Running" if state == "Running" else "Pending"


#: TrustyAI's LMEvalJob (``lm_eval`` with ``eval_backend=lmevaljob``): one pod named after the job, labelled with the
#: job's labels (``kfp-finetune.io/lmevaljob=<name>`` selects it).
LMEVALJOB_KIND = JobKind(
    kind="LMEvalJob",
    group="trustyai.opendatahub.io",
    version="v1alpha1",
    plural="lmevaljobs",
    phase=lmevaljob_phase,
    pod_selector=lambda name: f"kfp-finetune.io/lmevaljob={name}",
    checks_runtime=False,
    suspend_path=("suspend",),
    children="its pod",
)
#: The job kinds :func:`run_job` runs, by manifest ``kind``.
JOB_KINDS = {job_kind.kind: job_kind for job_kind in (TRAINJOB_KIND, PYTORCHJOB_KIND, LMEVALJOB_KIND)}


def queue_name(job: Mapping[str, Any]) -> str:
    """The Kueue LocalQueue a job is submitted to (its ``kueue.x-k8s.io/queue-name`` label), ``""`` for none."""
    return str(((job.get("metadata") or {}).get("labels") or {}).get(QUEUE_NAME_LABEL) or "")


def _trainer_container(node: Any) -> str:
    """The first container named in a manifest's pod templates or pod patches (``""`` when it names none)."""
    if isinstance(node, Mapping):
        containers = node.get("containers")
        if isinstance(containers, list) and containers and isinstance(containers[0], Mapping):
            return str(containers[0].get("name") or "")
        node = list(node.values())
    items = node if isinstance(node, list) else []
    return next((found for item in items if (found := _trainer_container(item))), "")


def pods_and_logs_hint(manifest: Mapping[str, Any], namespace: str) -> str:
    """The RHOAI guide's troubleshooting commands for this job (``Pods: oc get pods ...; logs: oc logs ... -c ...``)."""
    name = (manifest.get("metadata") or {}).get("name", "")
    if manifest.get("kind") == LMEVALJOB_KIND.kind:  # one pod, named after the job
        selector = LMEVALJOB_KIND.pod_selector(name)
        return f"Pods: oc get pods -n {namespace} -l {selector}; logs: oc logs {name} -n {namespace}"
    container = _trainer_container(manifest.get("spec") or {})
    logs = f"oc logs <pod-name> -n {namespace}" + (f" -c {container}" if container else "")
    return f"Pods: oc get pods -n {namespace} -l {JOB_NAME_POD_LABEL}={name}; logs: {logs}"
