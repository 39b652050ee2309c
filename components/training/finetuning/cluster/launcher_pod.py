"""What the launcher learns from its own pod: the job's owner (its controller, same namespace), the grace period.

After SIGTERM, :func:`disruption` tells a cancelled run from a disrupted launcher pod. Nothing here fails the run.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client import ApiException

from components._common.namespace import pod_namespace
from components._common.retry import RetryPolicy
from components.training.finetuning.cluster.api import Api, Retry, failure_text
from components.training.finetuning.cluster.errors import JobError
from components.training.finetuning.manifests.spec import OwnerReference

#: The environment variables KFP sets in a task's pod.
POD_NAME_ENV = "KFP_POD_NAME"
POD_UID_ENV = "KFP_POD_UID"


@dataclasses.dataclass(frozen=True)
class LauncherPod:
    """What the launcher's pod says: the job's owner or ``None`` (``why``: one line for the log), its grace period."""

    owner: OwnerReference | None
    grace_seconds: float | None
    why: str
    namespace: str = ""
    name: str = ""


def read_launcher_pod(
    api_client: Any,
    job_namespace: str,
    *,
    environ: Mapping[str, str] | None = None,
    log: Callable[[str], None] = print,
    namespace_path: str | None = None,
) -> LauncherPod:
    """Reads the launcher's pod: the job's owner and the grace period (never raises; logs one line)."""
    environ = os.environ if environ is None else environ
    name, uid = environ.get(POD_NAME_ENV, ""), environ.get(POD_UID_ENV, "")
    namespace = pod_namespace(environ, namespace_path) if namespace_path else pod_namespace(environ)
    found = dataclasses.replace(_read(api_client, name, uid, namespace, job_namespace), namespace=namespace, name=name)
    log(f"ownerReference: {found.why}")
    return found


def _read_pod(api: Api, namespace: str, name: str, timeout: tuple[float, float], **options: Any) -> dict[str, Any]:
    """The launcher pod as JSON (``options``: for :meth:`Api.call`, e.g. ``retry``)."""
    what = f"reading the launcher pod {namespace}/{name}"
    return api.read_json(what, api.core.read_namespaced_pod, name, namespace, _request_timeout=timeout, **options)


def disruption(api: Api, namespace: str, name: str) -> str:
    """Why the launcher pod is being disrupted (its ``DisruptionTarget`` reason); ``""`` when not, or unreadable."""
    if not name or not namespace:
        return ""
    try:
        pod = _read_pod(api, namespace, name, (1, 2), retry=Retry(policy=RetryPolicy(attempts=1)))
    except (ApiException, JobError, OSError, ValueError):
        return ""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            return str(condition.get("reason") or "DisruptionTarget")
    return ""


def _read(api_client: Any, name: str, uid: str, namespace: str, job_namespace: str) -> LauncherPod:
    if not name or not namespace:
        return LauncherPod(None, None, f"none (not in a KFP pod: {POD_NAME_ENV} or the pod's namespace unknown)")
    if namespace != job_namespace:
        why = (
            f"none (the launcher pod is in namespace {namespace}, the job in {job_namespace}: never across "
            "namespaces); the job is removed by the cleanup policy or by hand"
        )
        return LauncherPod(None, None, why)
    api = Api(api_client, lambda seconds: None, lambda line: None, 2)
    try:
        pod = _read_pod(api, namespace, name, (5, 10))
    except (ApiException, JobError, OSError, ValueError) as error:
        hint = " (grant `get pods`, see rbac.yaml)" if getattr(error, "status", None) == 403 else ""
        why = f"none: cannot read the launcher pod {namespace}/{name}: {failure_text(error)}{hint}"
        return LauncherPod(None, None, why)
    metadata = pod.get("metadata") or {}
    grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    grace = float(grace) if isinstance(grace, (int, float)) and not isinstance(grace, bool) else None
    if uid and metadata.get("uid") != uid:
        return LauncherPod(None, grace, f"none: pod {namespace}/{name} has uid {metadata.get('uid')}, not {uid}")
    # Only the controller (the run's Workflow) stands for the run; another owner may outlive it.
    owners = list(metadata.get("ownerReferences") or [])
    owner = next((owner for owner in owners if owner.get("controller") is True), None)
    if owner is None:
        others = ", ".join(f"{o.get('kind')} {o.get('name')}" for o in owners if isinstance(o, Mapping))
        why = (
            f"none (the launcher pod {namespace}/{name} has no controller owner"
            + (f": {others} is not its controller and is never given to the job" if others else "")
            + "; the pod itself is never the owner)"
        )
        return LauncherPod(None, grace, why)
    try:
        fields = (str(owner.get(key) or "") for key in ("apiVersion", "kind", "name", "uid"))
        reference = OwnerReference(*fields, namespace=namespace)
    except ValueError as error:
        return LauncherPod(None, grace, f"none: the launcher pod's owner is unusable ({error})")
    why = f"{reference.kind} {namespace}/{reference.name} (the launcher pod's owner): deleting the run deletes the job"
    return LauncherPod(reference, grace, why)
