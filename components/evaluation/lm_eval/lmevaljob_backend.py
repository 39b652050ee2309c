"""``eval_backend=lmevaljob``: a TrustyAI ``LMEvalJob`` reading the workspace PVC (README: *Evaluation backends*).

Built pure after trustyai-service-operator's ``api/lmes/v1alpha1/lmevaljob_types.go`` (CRD vendored in
``tests/specs/crds``, commit in ``tests/specs/SOURCE.md``; controller behaviour: ``controllers/lmes/``), then submitted,
followed and cleaned up by the training launcher's cluster layer (``cluster/runner.py`` ``run_job``, kind
``LMEvalJob`` in ``job_kinds.py``): the same outage tolerance, deadlines, ownership and cleanup policy as a TrainJob.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from components._common.hardware_profiles import HardwareProfile, lmevaljob_pod_settings

API_GROUP, API_VERSION, PLURAL = "trustyai.opendatahub.io", "v1alpha1", "lmevaljobs"
#: Where the controller mounts ``offline.storage.pvcName`` (``HuggingFaceHomePath``).
HF_HOME_PATH = "/opt/app-root/src/hf_home"
#: The directory the controller always passes to lm-eval as ``--include_path`` (``DefaultTaskRecipesPath``).
TASKS_PATH = "/opt/app-root/src/my_tasks"
#: The label the job's pod inherits (the controller copies the job's labels to its pod), selecting its pods.
JOB_LABEL = "kfp-finetune.io/lmevaljob"
#: Seconds the job may take to start, and the Kubernetes API may stay unreachable while it is followed.
START_TIMEOUT_SECONDS = 1800.0
API_OUTAGE_TOLERANCE_SECONDS = 600.0
_TIMEOUT = (5.0, 30.0)
_TASK_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
_ARG_VALUE = re.compile(r"^[a-zA-Z0-9._/:\- ]*$")


class LmEvalJobResultsError(ValueError):
    """An LMEvalJob that completed without results JSON (one line)."""


def pod_path(relative: str, root: str = HF_HOME_PATH) -> str:
    """Where a workspace-relative path appears in the LMEvalJob's pod."""
    return f"{root}/{relative.strip('/')}" if relative.strip("/") else root


def build_lmevaljob(
    name: str,
    namespace: str,
    pvc_name: str,
    model_path: str,
    task_names: Sequence[str],
    tasks_subpath: str,
    options: Mapping[str, Any],
    labels: Mapping[str, str],
    pod: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An ``LMEvalJob`` evaluating ``model_path`` (relative to the PVC's root) on ``task_names``.

    Args:
        name: The job's name (DNS-1123).
        namespace: Its namespace (the run's).
        pvc_name: The workspace PVC (``offline.storage.pvcName``).
        model_path: The model's directory relative to the PVC's root.
        task_names: lm-eval task names (built-in, or defined in ``tasks_subpath``).
        tasks_subpath: The held-out task directory relative to the PVC's root (``""``: none), mounted at
            :data:`TASKS_PATH`.
        options: ``limit``, ``num_fewshot``, ``batch_size``, ``apply_chat_template``, ``gen_kwargs`` (from
            ``options.check_options``) and ``log_samples``.
        labels: The job's labels (ownership; Kueue's queue label).
        pod: ``spec.pod`` from the hardware profile (``hardware_profiles.lmevaljob_pod_settings``).

    Raises:
        ValueError: A task name or model path the CRD's patterns refuse (named).
    """
    for task in task_names:
        if not _TASK_NAME.match(task):
            raise ValueError(f"task {task!r}: an LMEvalJob task name must match {_TASK_NAME.pattern}")
    pretrained = pod_path(model_path)
    if not _ARG_VALUE.match(pretrained):
        raise ValueError(f"model path {pretrained!r}: an LMEvalJob model argument must match {_ARG_VALUE.pattern}")
    spec: dict[str, Any] = {
        "model": "hf",
        "modelArgs": [{"name": "pretrained", "value": pretrained}],
        "taskList": {"taskNames": list(task_names)},
        "batchSize": str(options.get("batch_size") or "1"),
        "logSamples": bool(options.get("log_samples")),
        "offline": {"storage": {"pvcName": pvc_name}},
        "chatTemplate": {"enabled": bool(options.get("apply_chat_template"))},
    }
    if options.get("limit") is not None:
        spec["limit"] = str(options["limit"])
    if options.get("num_fewshot") is not None:
        spec["numFewShot"] = int(options["num_fewshot"])
    if options.get("gen_kwargs"):
        spec["genArgs"] = [{"name": str(k), "value": str(v)} for k, v in dict(options["gen_kwargs"]).items()]
    pod_spec: dict[str, Any] = json.loads(json.dumps(dict(pod or {})))
    if tasks_subpath:
        volume = {"name": "heldout-tasks", "persistentVolumeClaim": {"claimName": pvc_name}}
        pod_spec.setdefault("volumes", []).append(volume)
        mount = {"name": "heldout-tasks", "mountPath": TASKS_PATH, "subPath": tasks_subpath.strip("/")}
        mount["readOnly"] = True
        pod_spec.setdefault("container", {}).setdefault("volumeMounts", []).append(mount)
    if pod_spec:
        spec["pod"] = pod_spec
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "LMEvalJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {**dict(labels), JOB_LABEL: name}},
        "spec": spec,
    }


def evaluated_model(job: Mapping[str, Any]) -> str:
    """The ``pretrained`` model argument of an LMEvalJob (``""``: none): the model it evaluates."""
    args = (job.get("spec") or {}).get("modelArgs") or []
    return next((str(arg.get("value") or "") for arg in args if arg.get("name") == "pretrained"), "")


def lmevaljob_results(job: Mapping[str, Any]) -> dict[str, Any]:
    """``status.results`` of a completed LMEvalJob as lm-eval's results dict.

    Raises:
        LmEvalJobResultsError: No results, results that are not JSON, or JSON without a ``results`` object.
    """
    name = (job.get("metadata") or {}).get("name", "")
    text = (job.get("status") or {}).get("results") or ""
    if not text:
        raise LmEvalJobResultsError(f"LMEvalJob {name}: status.results is empty although the job completed")
    try:
        results = json.loads(text)
    except json.JSONDecodeError as error:
        raise LmEvalJobResultsError(
            f"LMEvalJob {name}: status.results is not JSON ({error.msg} at character {error.pos}): {text[:80]!r}"
        ) from None
    if not isinstance(results, dict) or not isinstance(results.get("results"), dict):
        raise LmEvalJobResultsError(f"LMEvalJob {name}: status.results holds no lm-eval 'results' object")
    return results


def evaluate_with_lmevaljob(
    api_client: Any,
    namespace: str,
    pvc_name: str,
    name: str,
    model_relative: str,
    task_names: Sequence[str],
    tasks_relative: str,
    options: Mapping[str, Any],
    profile: HardwareProfile | None,
    request: Any,
    poll_seconds: float,
    log: Callable[[str], None],
) -> tuple[dict[str, Any], str]:
    """Runs the LMEvalJob ``name`` to its end; returns ``(lm-eval results, the model location it evaluated)``.

    ``request`` gives ``eval_timeout_seconds`` and ``eval_cleanup_policy``.

    Raises:
        HardwareProfileError: The profile cannot be applied to an LMEvalJob.
        LmEvalJobResultsError: The job completed without results JSON.
        JobFailed, JobApiError, ApiOutageTooLong: From the cluster layer (the message says where the job is).
        WrongModelError: The job found under this name evaluates another model.
    """
    from kubernetes import client

    from components.evaluation.lm_eval.model_identity import check_same_location
    from components.training.finetuning.cluster import state
    from components.training.finetuning.cluster.launcher_pod import read_launcher_pod
    from components.training.finetuning.cluster.runner import run_job
    from components.training.finetuning.manifests.names import ownership_labels

    pod, labels = lmevaljob_pod_settings(profile) if profile is not None else ({}, {})
    owner = ownership_labels(os.environ.get("HOSTNAME", "lm-eval"), name)
    manifest = build_lmevaljob(name, namespace, pvc_name, model_relative, task_names, tasks_relative, options,
                               {**owner, **labels}, pod)  # fmt: skip
    launcher = read_launcher_pod(api_client, namespace, log=log)
    if launcher.owner is not None:
        manifest["metadata"]["ownerReferences"] = [launcher.owner.to_dict()]
    deadlines = state.Deadlines(
        start_timeout_seconds=START_TIMEOUT_SECONDS,
        timeout_seconds=float(request.eval_timeout_seconds),
        api_outage_tolerance_seconds=API_OUTAGE_TOLERANCE_SECONDS,
        timeout_counts_paused_time=False,
        cancel_timeout_seconds=state.cancel_budget(launcher.grace_seconds),
    )
    policy = state.JobPolicy(cleanup_policy=request.eval_cleanup_policy, delete_on_success=False)
    settings = state.JobSettings(deadlines, policy, state.ApiOptions(poll_interval_seconds=poll_seconds),
                           launcher_pod=(launcher.namespace, launcher.name), log=log)  # fmt: skip
    location = pod_path(model_relative)
    log(f"LMEvalJob {namespace}/{name}: model {location}, tasks {', '.join(task_names)}")
    run_job(api_client, manifest, settings)
    custom = client.CustomObjectsApi(api_client)
    finished = custom.get_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, name, _request_timeout=_TIMEOUT
    )
    check_same_location(location, evaluated_model(finished), f"LMEvalJob {namespace}/{name}")
    results = lmevaljob_results(finished)
    if request.eval_cleanup_policy == "delete":  # after reading the results; a failure is logged only
        uid = (finished.get("metadata") or {}).get("uid", "")
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid else None
        try:
            custom.delete_namespaced_custom_object(
                API_GROUP, API_VERSION, namespace, PLURAL, name, body=body, _request_timeout=_TIMEOUT
            )
            log(f"LMEvalJob {namespace}/{name}: deleted after reading its results (cleanup_policy=delete)")
        except client.ApiException as error:
            log(f"LMEvalJob {namespace}/{name}: not deleted ({error.status} {error.reason}); delete it by hand")
    return results, location
