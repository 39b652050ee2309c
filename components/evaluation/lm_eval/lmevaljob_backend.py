"""``eval_backend=lmevaljob``: the step evaluates through a TrustyAI ``LMEvalJob`` reading the workspace PVC.

The job is submitted, followed and cleaned up by the training launcher's cluster layer
(``components/training/finetuning/cluster/runner.py`` ``run_job``, kind ``LMEvalJob`` in ``job_kinds.py``): the same
outage tolerance, deadlines, ownership (labels + the run's owner as ``ownerReference``, uid preconditions on every
patch and delete) and cleanup policy as a TrainJob. The held-out task directory is written onto the PVC and made
self-contained (its ``!function`` module copied beside the YAMLs, its data file named by the pod's path), since the
LMEvalJob's image carries lm-eval but not this project.
"""

from __future__ import annotations

import hashlib
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components._common.hardware_profiles import HardwareProfile, lmevaljob_pod_settings
from components.evaluation.lm_eval import custom_task
from components.evaluation.lm_eval.lmevaljob_manifest import (
    TASKS_PATH,
    build_lmevaljob,
    evaluated_model,
    lmevaljob_results,
    pod_path,
)

#: The module the held-out YAMLs' ``!function`` tags name on the PVC (a copy of the two functions they use).
HELDOUT_FUNCTIONS_MODULE = "heldout_functions"
_THIS_MODULE_REF = "components.evaluation.lm_eval.custom_task."


@dataclass(frozen=True)
class RemoteJobSettings:
    """How long a remote evaluation may take and what happens to it when it fails or the run is cancelled.

    Attributes:
        start_timeout_seconds: How long the evaluation may take to start (0: no limit).
        timeout_seconds: How long it may take in all (0: no limit).
        api_outage_tolerance_seconds: How long following rides out an unreachable API.
        cleanup_policy: ``delete``, ``keep`` or ``suspend`` (the launcher's ``cleanup_policy``).
        poll_seconds: One watch window / poll of the job's state.
    """

    start_timeout_seconds: float
    timeout_seconds: float
    api_outage_tolerance_seconds: float
    cleanup_policy: str
    poll_seconds: float = 10.0


class WorkspaceError(ValueError):
    """A path that is not on the workspace PVC the remote evaluation reads (one line)."""


def relative_to_workspace(path: Path, workspace: Path, what: str) -> str:
    """``path`` relative to the workspace root.

    Raises:
        WorkspaceError: ``path`` is outside the workspace.
    """
    try:
        return str(path.resolve().relative_to(workspace.resolve()))
    except ValueError:
        raise WorkspaceError(
            f"{what} {path} is not on the workspace {workspace}: eval_backend=lmevaljob/evalhub read it from the "
            "workspace PVC; give pvc_path (the pipeline's dsl.WORKSPACE_PATH_PLACEHOLDER)"
        ) from None


def make_tasks_portable(task_dir: Path, pod_dir: str) -> None:
    """Rewrites the held-out YAMLs in ``task_dir`` to run where the directory is mounted at ``pod_dir``.

    The ``!function`` references point to a stdlib-only copy of the two functions (``heldout_functions.py`` beside the
    YAMLs, which lm-eval's loader reads first) and the documents file is named by its path in the pod.
    """
    functions = [custom_task.perplexity_process_results, custom_task.token_loss]
    module = "from __future__ import annotations\n\nimport math\n\n\n" + "\n\n".join(
        inspect.getsource(function) for function in functions
    )
    (task_dir / f"{HELDOUT_FUNCTIONS_MODULE}.py").write_text(module, encoding="utf-8")
    for yaml_file in task_dir.glob("*.yaml"):
        text = yaml_file.read_text(encoding="utf-8")
        text = text.replace(_THIS_MODULE_REF, f"{HELDOUT_FUNCTIONS_MODULE}.").replace(str(task_dir), pod_dir)
        yaml_file.write_text(text, encoding="utf-8")


def evaluation_job_name(model_location: str, task_names: Sequence[str]) -> str:
    """The LMEvalJob's name: this pod's, plus a hash of what it evaluates (a retried pod gets a new job)."""
    pod = os.environ.get("HOSTNAME", "lm-eval")
    digest = hashlib.sha256(f"{pod}/{model_location}/{','.join(task_names)}".encode()).hexdigest()[:10]
    return f"lmeval-{digest}"


def evaluate_with_lmevaljob(
    api_client: Any,
    namespace: str,
    pvc_name: str,
    workspace: Path,
    model_dir: Path,
    task_names: Sequence[str],
    heldout_dir: Path | None,
    options: Mapping[str, Any],
    profile: HardwareProfile | None,
    settings: RemoteJobSettings,
    log: Callable[[str], None],
    name: str,
) -> tuple[dict[str, Any], str]:
    """Runs the LMEvalJob ``name`` to its end and returns ``(lm-eval results, the model location it evaluated)``.

    Raises:
        WorkspaceError: The model or the held-out tasks are not on the workspace.
        HardwareProfileError: The profile cannot be applied to an LMEvalJob.
        LmEvalJobResultsError: The job completed without results JSON.
        JobFailed, JobApiError, ApiOutageTooLong: From the cluster layer (the message says where the job is).
        WrongModelError: The job found under this name evaluates another model.
    """
    from components.evaluation.lm_eval.model_identity import check_same_location
    from components.training.finetuning.cluster.launcher_pod import read_launcher_pod
    from components.training.finetuning.cluster.runner import run_job
    from components.training.finetuning.cluster.state import (
        ApiOptions,
        Deadlines,
        JobPolicy,
        JobSettings,
        cancel_budget,
    )
    from components.training.finetuning.manifests.names import ownership_labels

    model_relative = relative_to_workspace(model_dir, workspace, "the model")
    tasks_relative = ""
    if heldout_dir is not None:
        tasks_relative = relative_to_workspace(heldout_dir, workspace, "the held-out task directory")
        make_tasks_portable(heldout_dir, TASKS_PATH)
    pod, labels = lmevaljob_pod_settings(profile) if profile is not None else ({}, {})
    manifest = build_lmevaljob(
        name,
        namespace,
        pvc_name,
        model_relative,
        task_names,
        tasks_relative,
        options,
        {**ownership_labels(os.environ.get("HOSTNAME", "lm-eval"), name), **labels},
        pod,
    )
    launcher = read_launcher_pod(api_client, namespace, log=log)
    if launcher.owner is not None:
        manifest["metadata"]["ownerReferences"] = [launcher.owner.to_dict()]
    job_settings = JobSettings(
        Deadlines(
            start_timeout_seconds=settings.start_timeout_seconds,
            timeout_seconds=settings.timeout_seconds,
            api_outage_tolerance_seconds=settings.api_outage_tolerance_seconds,
            timeout_counts_paused_time=False,
            cancel_timeout_seconds=cancel_budget(launcher.grace_seconds),
        ),
        JobPolicy(cleanup_policy=settings.cleanup_policy, delete_on_success=False),
        ApiOptions(poll_interval_seconds=settings.poll_seconds),
        launcher_pod=(launcher.namespace, launcher.name),
        log=log,
    )
    log(f"LMEvalJob {namespace}/{name}: model {pod_path(model_relative)}, tasks {', '.join(task_names)}")
    run_job(api_client, manifest, job_settings)
    finished = _read(api_client, namespace, name)
    check_same_location(pod_path(model_relative), evaluated_model(finished), f"LMEvalJob {namespace}/{name}")
    results = lmevaljob_results(finished)
    if settings.cleanup_policy == "delete":
        _delete(api_client, namespace, name, (finished.get("metadata") or {}).get("uid", ""), log)
    return results, pod_path(model_relative)


def _read(api_client: Any, namespace: str, name: str) -> dict[str, Any]:
    """The finished LMEvalJob (one GET with a timeout)."""
    from kubernetes import client

    custom = client.CustomObjectsApi(api_client)
    return custom.get_namespaced_custom_object(
        "trustyai.opendatahub.io", "v1alpha1", namespace, "lmevaljobs", name, _request_timeout=(5.0, 30.0)
    )


def _delete(api_client: Any, namespace: str, name: str, uid: str, log: Callable[[str], None]) -> None:
    """Deletes the completed job (its results are read), this job's uid as precondition; a failure is logged only."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid else None
    try:
        client.CustomObjectsApi(api_client).delete_namespaced_custom_object(
            "trustyai.opendatahub.io",
            "v1alpha1",
            namespace,
            "lmevaljobs",
            name,
            body=body,
            _request_timeout=(5.0, 30.0),
        )
        log(f"LMEvalJob {namespace}/{name}: deleted after reading its results (cleanup_policy=delete)")
    except ApiException as error:
        log(f"LMEvalJob {namespace}/{name}: not deleted ({error.status} {error.reason}); delete it by hand")
