"""``training_launcher="auto"``: ``trainjob`` when TrainJobs are served and the runtime exists, else ``pytorchjob``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from components.training.finetuning.cluster.api import Api, api_message
from components.training.finetuning.cluster.discovery import resource_served, served_versions
from components.training.finetuning.cluster.errors import JobError
from components.training.finetuning.cluster.job_kinds import PYTORCHJOB_KIND, TRAINJOB_KIND
from components.training.finetuning.cluster.runtimes import RUNTIME_PLURALS, runtime_names, runtime_request

LAUNCHER_TRAINJOB = "trainjob"
LAUNCHER_PYTORCHJOB = "pytorchjob"
#: (group, version, plural) of each launcher's resource, as its builder writes it.
LAUNCHER_RESOURCES = {
    launcher: (kind.group, kind.version, kind.plural)
    for launcher, kind in ((LAUNCHER_TRAINJOB, TRAINJOB_KIND), (LAUNCHER_PYTORCHJOB, PYTORCHJOB_KIND))
}


class LauncherSelectionError(JobError):
    """Neither cluster launcher is usable on this cluster; the message lists what was found."""


def runtime_state(api: Api, runtime_name: str, runtime_kind: str, namespace: str) -> str:
    """``found``, ``forbidden`` or ``missing (available: ...)`` for the referenced runtime."""
    from kubernetes.client import ApiException

    if runtime_kind not in RUNTIME_PLURALS:
        raise ValueError(f"runtime_kind={runtime_kind!r}: must be one of {sorted(RUNTIME_PLURALS)}")
    what = f"reading {runtime_kind} {runtime_name!r}"
    try:
        runtime_request(api, what, "get", runtime_kind, namespace, runtime_name)
        return "found"
    except ApiException as error:
        if error.status == 403:
            return "forbidden"
        if error.status != 404:
            raise LauncherSelectionError(f"{what} was rejected by the Kubernetes API: {api_message(error)}") from None
    try:
        names = runtime_names(api, runtime_kind, namespace)
    except ApiException as error:
        return f"missing (available: cannot list, {api_message(error)})"
    return f"missing (available: {', '.join(names) if names else 'none'})"


def select_launcher(
    api_client: Any,
    runtime_name: str,
    runtime_kind: str,
    namespace: str,
    *,
    log: Callable[[str], None] = print,
    api_attempts: int = 5,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """The launcher ``training_launcher="auto"`` resolves to, ``"trainjob"`` or ``"pytorchjob"``, logging why.

    Raises:
        LauncherSelectionError: Neither launcher is usable (the message lists what was found).
        JobError: A discovery call was rejected.
    """
    api = Api(api_client, sleep, log, api_attempts)
    found: list[str] = []
    for launcher, (group, version, plural) in LAUNCHER_RESOURCES.items():
        resource = f"{plural}.{group}/{version}"
        if not resource_served(api, group, version, plural):
            found.append(f"{resource}: not served (group versions served: {served_versions(api, group) or 'none'})")
            continue
        if launcher == LAUNCHER_PYTORCHJOB:
            log(f"training_launcher=auto: using {resource} (Training Operator v1) because {found[0]}")
            return launcher
        state = runtime_state(api, runtime_name, runtime_kind, namespace)
        if state in ("found", "forbidden"):
            reason = "exists" if state == "found" else "cannot be read (forbidden), assumed to exist"
            log(f"training_launcher=auto: {resource} is served and {runtime_kind} {runtime_name!r} {reason}")
            return launcher
        found.append(f"{resource}: served, but {runtime_kind} {runtime_name!r} is {state}")
    raise LauncherSelectionError(
        "training_launcher=auto: no usable launcher in this cluster: "
        + "; ".join(found)
        + ". Install Kubeflow Trainer v2 with the runtime (or set runtime_name/runtime_kind to an existing one), "
        "or the Training Operator v1, or use training_launcher='local' (`kfp-finetune doctor` checks this before a run)"
    )
