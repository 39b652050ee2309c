"""Before a TrainJob is submitted: its (Cluster)TrainingRuntime must exist and hold the replicated job it patches."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from components.training.finetuning.cluster.api import Api, api_message, rejected, status_of
from components.training.finetuning.cluster.errors import JobError
from components.training.finetuning.manifests.spec import API_GROUP, API_VERSION, PATCH_MANAGER

RUNTIME_PLURALS = {"ClusterTrainingRuntime": "clustertrainingruntimes", "TrainingRuntime": "trainingruntimes"}


class RuntimeNotFoundError(JobError):
    """The referenced training runtime does not exist, or lacks the replicated job the TrainJob patches."""


def runtime_request(api: Api, what: str, verb: str, kind: str, namespace: str, *name: str) -> Any:
    """``get`` (with ``name``) or ``list`` runtimes of ``kind``: cluster-scoped, or in ``namespace``."""
    scope = "cluster" if kind == "ClusterTrainingRuntime" else "namespaced"
    where = () if scope == "cluster" else (namespace,)
    method = getattr(api.custom, f"{verb}_{scope}_custom_object")
    return api.call(what, method, API_GROUP, API_VERSION, *where, RUNTIME_PLURALS[kind], *name)


def runtime_names(api: Api, kind: str, namespace: str) -> list[str]:
    """The names of the runtimes of ``kind`` (cluster-scoped, or in ``namespace``); raises ``ApiException``."""
    listed = runtime_request(api, f"listing {RUNTIME_PLURALS[kind]}", "list", kind, namespace)
    return sorted(item["metadata"]["name"] for item in listed.get("items") or [])


def check_runtime(api: Api, manifest: Mapping[str, Any], say: Callable[[str], None]) -> None:
    """Fails (:class:`RuntimeNotFoundError`) unless the TrainJob's runtime exists with the job it patches; 403 warns."""
    from kubernetes.client import ApiException

    namespace, job_name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    ref = manifest["spec"]["runtimeRef"]
    kind, name = ref.get("kind", "ClusterTrainingRuntime"), ref["name"]
    what = f"reading {kind} {name!r}"
    try:
        runtime = runtime_request(api, what, "get", kind, namespace, name)
    except ApiException as error:
        if status_of(error) == 403:
            say(
                f"WARNING: cannot check {kind} {name!r} ({api_message(error)}); see rbac.yaml or run "
                "`kfp-finetune doctor`. Submitting."
            )
            return
        if status_of(error) != 404:
            raise rejected(what, error) from None
        raise RuntimeNotFoundError(
            f"TrainJob {namespace}/{job_name}: spec.runtimeRef names {kind} {name!r}, which does not exist. "
            f"Available: {available_runtimes(api, namespace)}. Set runtime_name/runtime_kind to one of them "
            "(`kfp-finetune doctor` checks this before a run)."
        ) from None
    _check_patched_jobs(manifest, kind, name, runtime)


def available_runtimes(api: Api, namespace: str) -> str:
    """The runtimes that exist, for an error message: ``ClusterTrainingRuntime: a, b; TrainingRuntime in ns: c``."""
    from kubernetes.client import ApiException

    found = []
    for kind in RUNTIME_PLURALS:
        label = kind if kind == "ClusterTrainingRuntime" else f"TrainingRuntime in {namespace}"
        try:
            names = runtime_names(api, kind, namespace)
        except ApiException as error:
            found.append(f"{kind}: cannot list ({api_message(error)})")
            continue
        found.append(f"{label}: {', '.join(names) if names else '(none)'}")
    return "; ".join(found)


def _check_patched_jobs(manifest: Mapping[str, Any], kind: str, name: str, runtime: Mapping[str, Any]) -> None:
    """Fails unless the runtime has every replicated job the manifest's pod patch targets."""
    jobs = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or []
    available = [job.get("name") for job in jobs]
    spec = manifest.get("spec") or {}
    patched = [
        target["name"] for override in spec.get("podTemplateOverrides") or [] for target in override["targetJobs"]
    ]
    for patch in spec.get("runtimePatches") or []:
        if patch.get("manager") == PATCH_MANAGER:
            patched += [job["name"] for job in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]]
    for job in patched:
        if job not in available:
            raise RuntimeNotFoundError(
                f"TrainJob {manifest['metadata']['namespace']}/{manifest['metadata']['name']}: {kind} {name!r} has no "
                f"replicated job {job!r} to patch (it has {available}); set trainer_job_name to one of them"
            )
