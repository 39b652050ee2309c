"""``eval_backend=lmevaljob``: a TrustyAI ``LMEvalJob`` (CRD in ``tests/specs/crds``) run by the launcher's layer."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from typing import Any

from components._common.hardware_profiles import lmevaljob_pod_settings
from components.evaluation.lm_eval.remote_evaluation import RemoteEvaluation, check_same_location

API_GROUP, API_VERSION = "trustyai.opendatahub.io", "v1alpha1"
#: Where the controller mounts ``offline.storage.pvcName`` (``HuggingFaceHomePath``).
HF_HOME_PATH = "/opt/app-root/src/hf_home"
#: The directory the controller always passes to lm-eval as ``--include_path`` (``DefaultTaskRecipesPath``).
TASKS_PATH = "/opt/app-root/src/my_tasks"
#: The label the job's pod inherits (the controller copies the job's labels to its pod), selecting its pods.
JOB_LABEL = "kfp-finetune.io/lmevaljob"
#: Seconds the job may take to start, and the Kubernetes API may stay unreachable while it is followed.
START_TIMEOUT_SECONDS = 1800.0
API_OUTAGE_TOLERANCE_SECONDS = 600.0
_TASK_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
_ARG_VALUE = re.compile(r"^[a-zA-Z0-9._/:\- ]*$")


class LmEvalJobResultsError(ValueError):
    """An LMEvalJob that completed without results JSON (one line)."""


def pod_path(relative: str) -> str:
    """Where a workspace-relative path appears in the LMEvalJob's pod."""
    return f"{HF_HOME_PATH}/{relative.strip('/')}" if relative.strip("/") else HF_HOME_PATH


def tasks_dir_in_pod(tasks_relative: str) -> str:
    """Where the job's pod sees the held-out task directory: mounted at the driver's ``--include_path``."""
    return TASKS_PATH


def build_lmevaljob(evaluation: RemoteEvaluation, labels: Mapping[str, str]) -> dict[str, Any]:
    """The ``LMEvalJob`` of an evaluation, labelled ``labels`` and with its hardware profile's pod and queue.

    Raises:
        ValueError: A task name or model path the CRD's patterns refuse (named).
    """
    for task in evaluation.task_names:
        if not _TASK_NAME.match(task):
            raise ValueError(f"task {task!r}: an LMEvalJob task name must match {_TASK_NAME.pattern}")
    pretrained = pod_path(evaluation.model_relative)
    if not _ARG_VALUE.match(pretrained):
        raise ValueError(f"model path {pretrained!r}: an LMEvalJob model argument must match {_ARG_VALUE.pattern}")
    arguments, harness = evaluation.harness.lm_eval_arguments(), evaluation.harness
    spec: dict[str, Any] = {
        "model": "hf",
        "modelArgs": [{"name": "pretrained", "value": pretrained}],
        "taskList": {"taskNames": list(evaluation.task_names)},
        "batchSize": str(arguments["batch_size"]),
        "logSamples": bool(harness.log_samples),
        "offline": {"storage": {"pvcName": evaluation.pvc_name}},
        "chatTemplate": {"enabled": bool(harness.apply_chat_template)},
    }
    if arguments["limit"] is not None:
        spec["limit"] = str(arguments["limit"])
    if arguments["num_fewshot"] is not None:
        spec["numFewShot"] = arguments["num_fewshot"]
    if arguments["gen_kwargs"]:
        spec["genArgs"] = [{"name": str(k), "value": str(v)} for k, v in arguments["gen_kwargs"].items()]
    pod_spec, queue = lmevaljob_pod_settings(evaluation.profile) if evaluation.profile is not None else ({}, {})
    if evaluation.tasks_relative:
        volume = {"name": "heldout-tasks", "persistentVolumeClaim": {"claimName": evaluation.pvc_name}}
        pod_spec.setdefault("volumes", []).append(volume)
        mount = {"name": "heldout-tasks", "mountPath": TASKS_PATH, "subPath": evaluation.tasks_relative.strip("/")}
        pod_spec.setdefault("container", {}).setdefault("volumeMounts", []).append({**mount, "readOnly": True})
    if pod_spec:
        spec["pod"] = pod_spec
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "LMEvalJob",
        "metadata": {
            "name": evaluation.name,
            "namespace": evaluation.namespace,
            "labels": {**labels, **queue, JOB_LABEL: evaluation.name},
        },
        "spec": spec,
    }


def evaluated_model(job: Mapping[str, Any]) -> str:
    """The ``pretrained`` model argument of an LMEvalJob (``""``: none): the model it evaluates."""
    args = (job.get("spec") or {}).get("modelArgs") or []
    return next((str(arg.get("value") or "") for arg in args if arg.get("name") == "pretrained"), "")


def lmevaljob_results(job: Mapping[str, Any]) -> dict[str, Any]:
    """``status.results`` of a completed LMEvalJob as lm-eval's results dict (else ``LmEvalJobResultsError``)."""
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


def evaluate(api_client: Any, evaluation: RemoteEvaluation) -> tuple[dict[str, Any], str]:
    """Runs the evaluation's LMEvalJob to its end; returns ``(lm-eval results, the model location it evaluated)``.

    Raises:
        LmEvalJobResultsError: The job completed without results JSON.
        JobFailed, JobApiError, ApiOutageTooLong: From the cluster layer (the message says where the job is).
        WrongModelError: The job found under this name evaluates another model.
    """
    from components.training.finetuning.cluster import state
    from components.training.finetuning.cluster.api import Api
    from components.training.finetuning.cluster.errors import JobApiError
    from components.training.finetuning.cluster.job_client import JobClient
    from components.training.finetuning.cluster.launcher_pod import read_launcher_pod
    from components.training.finetuning.cluster.runner import run_job
    from components.training.finetuning.manifests.names import ownership_labels

    name, namespace, log, remote = evaluation.name, evaluation.namespace, evaluation.log, evaluation.remote
    manifest = build_lmevaljob(evaluation, ownership_labels(os.environ.get("HOSTNAME", "lm-eval"), name))
    launcher = read_launcher_pod(api_client, namespace, log=log)
    if launcher.owner is not None:
        manifest["metadata"]["ownerReferences"] = [launcher.owner.to_dict()]
    deadlines = state.Deadlines(
        start_timeout_seconds=START_TIMEOUT_SECONDS,
        timeout_seconds=float(remote.eval_timeout_seconds),
        api_outage_tolerance_seconds=API_OUTAGE_TOLERANCE_SECONDS,
        timeout_counts_paused_time=False,
        cancel_timeout_seconds=state.cancel_budget(launcher.grace_seconds),
    )
    settings = state.JobSettings(
        deadlines,
        state.JobPolicy(cleanup_policy=remote.eval_cleanup_policy, delete_on_success=False),
        state.ApiOptions(poll_interval_seconds=evaluation.poll_seconds),
        launcher_pod=(launcher.namespace, launcher.name),
        log=log,
    )
    location = pod_path(evaluation.model_relative)
    log(f"LMEvalJob {namespace}/{name}: model {location}, tasks {', '.join(evaluation.task_names)}")
    run_job(api_client, manifest, settings)
    api = Api(api_client, time.sleep, log, settings.api.attempts)
    job = JobClient(api, manifest, lambda line: log(f"LMEvalJob {namespace}/{name}: {line}"))
    finished = job.get_job() or {}
    check_same_location(location, evaluated_model(finished), f"LMEvalJob {namespace}/{name}")
    results = lmevaljob_results(finished)
    if remote.eval_cleanup_policy == "delete":  # after reading the results; a failure is logged only
        try:
            if job.delete_job((finished.get("metadata") or {}).get("uid", "")):
                log(f"LMEvalJob {namespace}/{name}: deleted after reading its results (cleanup_policy=delete)")
        except JobApiError as error:
            log(f"LMEvalJob {namespace}/{name}: not deleted after reading its results ({error}); delete it by hand")
    return results, location
