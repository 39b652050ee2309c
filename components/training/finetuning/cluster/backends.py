"""``backend="auto"``: pick Kubeflow Trainer v2 (``TrainJob``) or Training Operator v1 (``PyTorchJob``) by discovery.

Rule (:func:`select_backend`): ``trainjob`` when the API serves ``trainjobs.trainer.kubeflow.org`` (the version the
builder writes) **and** the referenced runtime exists; else ``pytorchjob`` when it serves ``pytorchjobs.kubeflow.org``;
else fail, listing what was found. Discovery uses ``GET /apis`` and ``GET /apis/<group>/<version>``, which every
authenticated user may read (the ``system:discovery`` role); the runtime check needs ``get`` (and ``list`` for the
error message) on runtimes, which ``rbac.yaml`` already grants.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from components.training.finetuning.cluster.api import Api, api_message
from components.training.finetuning.cluster.errors import JobError
from components.training.finetuning.cluster.runtimes import RUNTIME_PLURALS, runtime_request
from components.training.finetuning.manifests import pytorchjob
from components.training.finetuning.manifests import spec as trainjob

BACKEND_TRAINJOB = "trainjob"
BACKEND_PYTORCHJOB = "pytorchjob"
#: (group, version, plural) of each backend's resource, as its builder writes it.
BACKEND_RESOURCES = {
    BACKEND_TRAINJOB: (trainjob.API_GROUP, trainjob.API_VERSION, trainjob.TRAINJOB_PLURAL),
    BACKEND_PYTORCHJOB: (pytorchjob.API_GROUP, pytorchjob.API_VERSION, pytorchjob.PYTORCHJOB_PLURAL),
}


class BackendSelectionError(JobError):
    """Neither training backend is usable on this cluster; the message lists what was found."""


def _discover(api: Api, what: str, func: Callable[..., Any], *args: Any) -> dict[str, Any] | None:
    """Calls a discovery endpoint of the official client; its JSON, or ``None`` on 404 (not served)."""
    from kubernetes.client import ApiException

    try:
        response = api.call(what, func, *args, _preload_content=False)
    except ApiException as error:
        if error.status == 404:
            return None
        raise BackendSelectionError(f"{what} was rejected by the Kubernetes API: {api_message(error)}") from None
    return json.loads(response.data)


def served_versions(api: Api, group: str) -> list[str]:
    """The versions of an API group the server serves (``[]`` when the group is unknown)."""
    from kubernetes import client

    apis = client.ApisApi(api.custom.api_client)
    groups = (_discover(api, "listing API groups", apis.get_api_versions) or {}).get("groups") or []
    for item in groups:
        if item.get("name") == group:
            return sorted(str(version.get("version")) for version in item.get("versions") or [])
    return []


def resource_served(api: Api, group: str, version: str, plural: str) -> bool:
    """Whether the server lists the resource ``plural`` under ``/apis/<group>/<version>``."""
    what = f"discovering {group}/{version}"
    listing = _discover(api, what, api.custom.get_api_resources, group, version) or {}
    return any(item.get("name") == plural for item in listing.get("resources") or [])


def runtime_state(api: Api, runtime_name: str, runtime_kind: str, namespace: str) -> str:
    """``found``, ``forbidden`` or ``missing (available: ...)`` for the referenced runtime."""
    from kubernetes.client import ApiException

    plural = RUNTIME_PLURALS.get(runtime_kind)
    if plural is None:
        raise ValueError(f"runtime_kind={runtime_kind!r}: must be one of {sorted(RUNTIME_PLURALS)}")
    what = f"reading {runtime_kind} {runtime_name!r}"
    try:
        runtime_request(api, what, "get", runtime_kind, namespace, runtime_name)
        return "found"
    except ApiException as error:
        if error.status == 403:
            return "forbidden"
        if error.status != 404:
            raise BackendSelectionError(f"{what} was rejected by the Kubernetes API: {api_message(error)}") from None
    try:
        listed = runtime_request(api, f"listing {plural}", "list", runtime_kind, namespace)
        names = sorted(item["metadata"]["name"] for item in listed.get("items") or [])
    except ApiException as error:
        return f"missing (available: cannot list, {api_message(error)})"
    return f"missing (available: {', '.join(names) if names else 'none'})"


def select_backend(
    api_client: Any,
    runtime_name: str,
    runtime_kind: str,
    namespace: str,
    *,
    log: Callable[[str], None] = print,
    api_attempts: int = 5,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """The backend ``backend="auto"`` resolves to on the cluster behind ``api_client``.

    Args:
        api_client: A ``kubernetes.client.ApiClient`` (see :func:`components._common.kube_auth.load_api_client`).
        runtime_name: The Trainer runtime a TrainJob would reference.
        runtime_kind: ``ClusterTrainingRuntime`` or ``TrainingRuntime`` (looked up in ``namespace``).
        namespace: The namespace the job would run in.
        log: Where the choice and its reason go.
        api_attempts: Attempts per API call on transient errors (5xx, 429, connection errors).
        sleep: Sleep between retries (tests).

    Returns:
        ``"trainjob"`` or ``"pytorchjob"``.

    Raises:
        BackendSelectionError: Neither backend is usable (the message lists the served versions and the runtime's
            state), or a discovery call was rejected.
        ValueError: ``runtime_kind`` is not a runtime kind.
    """
    api = Api(api_client, sleep, log, api_attempts)
    found: list[str] = []
    group, version, plural = BACKEND_RESOURCES[BACKEND_TRAINJOB]
    if resource_served(api, group, version, plural):
        state = runtime_state(api, runtime_name, runtime_kind, namespace)
        if state in ("found", "forbidden"):
            reason = "exists" if state == "found" else "cannot be read (forbidden), assumed to exist"
            log(f"backend=auto: {plural}.{group}/{version} is served and {runtime_kind} {runtime_name!r} {reason}")
            return BACKEND_TRAINJOB
        found.append(f"{plural}.{group}/{version}: served, but {runtime_kind} {runtime_name!r} is {state}")
    else:
        versions = served_versions(api, group)
        found.append(f"{plural}.{group}/{version}: not served (group versions served: {versions or 'none'})")
    group, version, plural = BACKEND_RESOURCES[BACKEND_PYTORCHJOB]
    if resource_served(api, group, version, plural):
        log(f"backend=auto: using {plural}.{group}/{version} (Training Operator v1) because {found[0]}")
        return BACKEND_PYTORCHJOB
    versions = served_versions(api, group)
    found.append(f"{plural}.{group}/{version}: not served (group versions served: {versions or 'none'})")
    raise BackendSelectionError(
        "backend=auto: no usable training backend in this cluster: "
        + "; ".join(found)
        + ". Install Kubeflow Trainer v2 with the runtime (or set runtime_name/runtime_kind to an existing one), "
        "or the Training Operator v1, or use backend='local' (`kfp-finetune doctor` checks this before a run)"
    )
