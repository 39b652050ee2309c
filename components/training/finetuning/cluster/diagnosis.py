"""Why did a job fail? One-line causes with a remedy, from conditions, pods, events and logs (pure, over API dicts)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from components._common.masking import mask_text as redact
from components.training.finetuning.manifests.status import condition

#: Outcomes of a job run that end in a :class:`Diagnosis`.
OUTCOMES = ("Failed", "StartTimeout", "Timeout", "Cancelled", "Deleted")
_IMAGE_REASONS = {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull"}
_NCCL_TIMEOUT = re.compile(
    r"Watchdog caught collective operation timeout"
    r"|NCCL.{0,200}(timed? ?out|Timeout)"
    r"|ProcessGroupNCCL.{0,200}[Tt]imeout",
)
_CUDA_OOM = re.compile(r"CUDA out of memory|torch\.(cuda\.)?OutOfMemoryError|HIP out of memory")
_SECRET_MISSING = re.compile(r'secrets? "([^"]+)" not found|couldn\'t find key (\S+) in Secret (\S+)')
_PVC_MISSING = re.compile(r'persistentvolumeclaims? "([^"]+)" not found')
_INSUFFICIENT = re.compile(r"Insufficient ([\w./-]*\w)")
#: Each cause's code and usual remedy, in the order causes are reported (the most specific first).
_REMEDIES = {
    "MissingSecret": "",  # (names the secret)
    "MissingPVC": "",  # (names the claim)
    "ImagePullBackOff": "check the image name and tag, and that the namespace may pull it (pull secret, mirror)",
    "Unschedulable": "check the requested resources, tolerations and node selector against the nodes",
    "OOMKilled": "raise memory_per_node, or lower the batch size / max sequence length",
    "Evicted": "the node ran short of memory or disk (node pressure): check the node's resources (`oc describe node`), "
    "reduce the batch size, or request what the pod uses (memory_per_node)",
    "GPUOutOfMemory": "lower the batch size / max tokens per GPU (training_effective_batch_size / "
    "training_max_tokens_per_gpu: the pipelines' phase_02_train_man_train_batch / phase_02_train_man_train_tokens), "
    "or use more GPUs (gpus_per_node, num_nodes)",
    "NCCLTimeout": "raise INSTRUCTLAB_NCCL_TIMEOUT_MS (env, milliseconds) and check the network between the nodes "
    "(NCCL_SOCKET_IFNAME, NCCL_DEBUG=INFO)",
    "CrashLoopBackOff": "see the log lines below for the error the trainer reports",
    "ContainerFailed": "see the log lines below",
    "Suspended": "resume it or check Kueue quota",
    "NoPods": "",  # (names the controllers of the kind)
    "Deleted": "re-run the task",
}


@dataclasses.dataclass(frozen=True)
class Cause:
    """One reason a job failed or did not start, as the line ``code (where): detail -> remedy``."""

    code: str
    where: str
    detail: str
    remedy: str

    def __str__(self) -> str:
        return f"{self.code} ({self.where}): {self.detail} -> {self.remedy}"


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """Everything known about a job that did not complete: headline, causes (most specific first), redacted log tail."""

    namespace: str
    name: str
    outcome: str
    summary: str
    causes: tuple[Cause, ...] = ()
    log_source: str = ""
    log_tail: tuple[str, ...] = ()
    kind: str = "TrainJob"

    def text(self) -> str:
        """A multi-line report: headline, one line per cause, then the log tail."""
        lines = [f"{self.kind} {self.namespace}/{self.name}: {self.outcome}: {self.summary}"]
        lines += [f"  cause: {cause}" for cause in self.causes]
        if not self.causes:
            lines.append(
                f"  cause: unknown -> run `kubectl describe {self.kind.lower()} {self.name} -n {self.namespace}`"
            )
        if self.log_tail:
            lines.append(f"  last log lines ({self.log_source}):")
            lines += [f"    | {line}" for line in self.log_tail]
        return "\n".join(lines)

    @property
    def codes(self) -> tuple[str, ...]:
        """The cause codes, in report order."""
        return tuple(cause.code for cause in self.causes)


def _cause(code: str, where: str, detail: str, remedy: str = "") -> Cause:
    return Cause(code, where, detail, remedy or _REMEDIES[code])


def _missing_secret(where: str, message: str, remedy: str) -> Cause | None:
    missing = _SECRET_MISSING.search(message)
    if not missing:
        return None
    secret = (missing.group(1) or missing.group(3)).split("/")[-1]
    return Cause("MissingSecret", where, message, f"create secret '{secret}'{remedy} or fix secret_env")


def _scheduling_cause(where: str, message: str) -> Cause:
    missing_pvc = _PVC_MISSING.search(message)
    if missing_pvc:
        return Cause("MissingPVC", where, message, f"create PVC '{missing_pvc.group(1)}' or fix the volumes setting")
    insufficient = sorted(set(_INSUFFICIENT.findall(message)))
    remedies = []
    if insufficient:
        names = ", ".join(insufficient)
        remedies.append(f"ask for less {names} per node (gpus_per_node, cpu_per_node, memory_per_node) or add capacity")
    if "taint" in message:
        remedies.append("add tolerations for the nodes' taints")
    if "affinity" in message or "selector" in message:
        remedies.append("check node_selector / affinity")
    return _cause("Unschedulable", where, message, "; ".join(remedies))


def _waiting_cause(where: str, waiting: Mapping[str, Any], last: Mapping[str, Any]) -> Cause | None:
    reason = waiting.get("reason") or ""
    message = waiting.get("message") or ""
    if reason in _IMAGE_REASONS:
        return _cause("ImagePullBackOff", where, f"{reason}: {message}".rstrip(": "))
    if reason == "CreateContainerConfigError":
        return _missing_secret(where, message, " (with the key)") or Cause(
            "ContainerFailed", where, f"{reason}: {message}", "fix the container's env/volume configuration"
        )
    if reason == "CrashLoopBackOff":
        exit_code = last.get("exitCode")
        detail = f"the container keeps exiting (last exit code {exit_code}, {last.get('reason') or 'Error'})"
        return _cause("CrashLoopBackOff", where, detail)
    return None


def _terminated_cause(where: str, terminated: Mapping[str, Any]) -> Cause | None:
    reason = terminated.get("reason") or ""
    exit_code = terminated.get("exitCode")
    if reason == "OOMKilled":
        return _cause("OOMKilled", where, f"the container used more memory than its limit (exit code {exit_code})")
    if exit_code not in (None, 0):
        message = (terminated.get("message") or "").strip().splitlines()
        detail = f"exited with code {exit_code} ({reason or 'Error'})" + (f": {message[-1]}" if message else "")
        return _cause("ContainerFailed", where, detail)
    return None


def pod_causes(pod: Mapping[str, Any]) -> list[Cause]:
    """Causes visible in one pod's status (scheduling, image pulls, missing secrets, OOM, crash loops, exit codes)."""
    causes: list[Cause] = []
    name = str((pod.get("metadata") or {}).get("name", "?"))
    status = pod.get("status") or {}
    if status.get("reason") == "Evicted":  # the kubelet's node-pressure eviction (the RHOAI guide's `Evicted`)
        causes.append(_cause("Evicted", f"pod {name}", status.get("message") or "the kubelet evicted the pod"))
    for item in status.get("conditions") or []:
        if item.get("type") == "PodScheduled" and item.get("status") == "False":
            causes.append(_scheduling_cause(f"pod {name}", item.get("message") or item.get("reason") or ""))
    for status in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        where = f"pod {name}, container {status.get('name', '?')}"
        state = status.get("state") or {}
        last = (status.get("lastState") or {}).get("terminated") or {}
        found = [_waiting_cause(where, state["waiting"], last) if state.get("waiting") else None]
        if "OOMKilled" in (last.get("reason"), (state.get("terminated") or {}).get("reason")):
            found.append(_terminated_cause(where, {"reason": "OOMKilled", "exitCode": 137}))
        elif state.get("terminated"):
            found.append(_terminated_cause(where, state["terminated"]))
        causes += [cause for cause in found if cause]
    return causes


def event_causes(events: Iterable[Mapping[str, Any]]) -> list[Cause]:
    """Causes in warning events (FailedMount, FailedScheduling, failed image pulls)."""
    causes: list[Cause] = []
    for event in events:
        if event.get("type") == "Normal":
            continue
        involved = event.get("involvedObject") or {}
        where = f"{str(involved.get('kind', 'object')).lower()} {involved.get('name', '?')}"
        message = event.get("message") or ""
        reason = event.get("reason") or ""
        missing_secret = _missing_secret(where, message, "")
        if missing_secret:
            causes.append(missing_secret)
        elif _PVC_MISSING.search(message) or reason == "FailedScheduling":
            causes.append(_scheduling_cause(where, message))
        elif "ImagePull" in message or "pull image" in message or reason == "ErrImagePull":
            causes.append(
                _cause("ImagePullBackOff", where, message, "check the image name and tag, and the pull credentials")
            )
    return causes


def log_causes(where: str, log_text: str) -> list[Cause]:
    """Causes in the last log lines of a failed container (NCCL timeouts, CUDA out-of-memory)."""
    causes = []
    nccl = _NCCL_TIMEOUT.search(log_text)
    if nccl:
        causes.append(_cause("NCCLTimeout", where, f"a collective operation timed out: {nccl.group(0)[:160]}"))
    if _CUDA_OOM.search(log_text):
        causes.append(_cause("GPUOutOfMemory", where, "the GPU ran out of memory"))
    return causes


def _ordered(causes: Iterable[Cause]) -> tuple[Cause, ...]:
    unique: dict[tuple[str, str], Cause] = {}
    for cause in causes:
        unique.setdefault((cause.code, cause.detail), cause)
    rank = {code: index for index, code in enumerate(_REMEDIES)}
    return tuple(sorted(unique.values(), key=lambda cause: rank.get(cause.code, len(rank))))


def _summary(outcome: str, job: Mapping[str, Any], kind: str, start_timeout: float, timeout: float) -> str:
    failed = condition(job, "Failed")
    if outcome == "Failed" and failed:
        return f"{failed.get('reason', 'Failed')}: {failed.get('message', '')}".rstrip(": ")
    return {
        "StartTimeout": f"the training pods did not start within start_timeout_seconds={start_timeout:g}",
        "Timeout": f"training did not finish within timeout_seconds={timeout:g}",
        "Cancelled": "the pipeline task was cancelled (SIGTERM)",
        "Deleted": f"the {kind} was deleted while it was being followed",
    }.get(outcome, f"the {kind} failed")


def diagnose(
    outcome: str,
    job: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]] = (),
    events: Sequence[Mapping[str, Any]] = (),
    logs: Mapping[str, str] | None = None,
    *,
    start_timeout: float = 0,
    timeout: float = 0,
    tail_lines: int = 20,
    kind: str = "",
) -> Diagnosis:
    """What the cluster says about a job (``{}``: unread) as a :class:`Diagnosis`; ``logs``: failed containers first."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome={outcome!r}: must be one of {list(OUTCOMES)}")
    kind = kind or str(job.get("kind") or "TrainJob")
    metadata = job.get("metadata") or {}
    name, namespace = str(metadata.get("name") or "?"), str(metadata.get("namespace") or "?")  # "?": unread job
    causes: list[Cause] = []
    for pod in pods:
        causes += pod_causes(pod)
    causes += event_causes(events)
    log_source, log_tail = "", ()
    for source, text in (logs or {}).items():
        causes += log_causes(source, text)
        if not log_tail and text.strip():
            log_source, log_tail = source, tuple(redact(line) for line in text.rstrip("\n").splitlines()[-tail_lines:])
    suspend_field = "spec.runPolicy.suspend" if kind == "PyTorchJob" else "spec.suspend"
    controllers = "Trainer and JobSet controllers" if kind == "TrainJob" else "Training Operator"
    suspended = condition(job, "Suspended")
    if suspended and outcome != "Cancelled":
        detail = f"{suspended.get('reason', '')}: {suspended.get('message', '')}".strip(": ")
        causes.append(_cause("Suspended", f"{kind} {name}", detail or f"{suspend_field} is true"))
    if outcome == "StartTimeout" and not pods and not causes:
        runtime = " and the runtime" if kind == "TrainJob" else ""
        describe = f"kubectl describe {kind.lower()} {name} -n {namespace}"
        remedy = f"check the {controllers}, queue admission (Kueue){runtime} (`{describe}`)"
        causes.append(_cause("NoPods", f"{kind} {name}", "no training pods were created", remedy))
    if outcome == "Deleted":
        causes.append(_cause("Deleted", f"{kind} {name}", "deleted by someone else"))
    status = job.get("status") or {}
    if kind == "LMEvalJob" and status.get("reason") in ("Failed", "Cancelled") and status.get("message"):
        remedy = f"the evaluation's pod logs: `oc logs {name} -n {namespace}`"
        causes.append(_cause(str(status["reason"]), f"{kind} {name}", redact(str(status["message"])), remedy))
    return Diagnosis(
        namespace=namespace,
        name=name,
        outcome=outcome,
        summary=_summary(outcome, job, kind, start_timeout, timeout),
        causes=_ordered(causes),
        log_source=log_source,
        log_tail=log_tail,
        kind=kind,
    )
