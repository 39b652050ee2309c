"""The TrustyAI ``LMEvalJob`` evaluating a model on the workspace PVC (pure builder), and its results.

Source: trustyai-service-operator ``api/lmes/v1alpha1/lmevaljob_types.go`` and the CRD
``config/components/lmes/crd/trustyai.opendatahub.io_lmevaljobs.yaml`` (vendored in ``tests/specs/crds``, commit in
``tests/specs/SOURCE.md``). What the controller does with the fields (``controllers/lmes/lmevaljob_controller.go``):

* ``offline.storage.pvcName``: the claim is mounted at :data:`HF_HOME_PATH` (``/opt/app-root/src/hf_home``) and the
  pod runs with ``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE``; the model is read from there (``modelArgs``
  ``pretrained=<path>``), so the workspace PVC itself is the offline storage;
* ``lm_eval`` always runs with ``--include_path`` :data:`TASKS_PATH` (``/opt/app-root/src/my_tasks``,
  ``controllers/lmes/driver/driver.go`` ``DefaultTaskRecipesPath``): the held-out task directory on the same claim is
  mounted there (``pod.volumes`` + ``pod.container.volumeMounts`` with ``subPath``) and named in ``taskNames``;
* ``status.state`` ``New``/``Scheduled``/``Running``/``Complete``/``Cancelled``/``Suspended`` with ``reason``
  ``Succeeded``/``Failed``/``Cancelled`` and ``message``; ``status.results``: lm-eval's results JSON, as a string.

Task names and model argument values must match the CRD's patterns (:data:`_TASK_NAME`, :data:`_ARG_VALUE`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

API_GROUP = "trustyai.opendatahub.io"
API_VERSION = "v1alpha1"
PLURAL = "lmevaljobs"
KIND = "LMEvalJob"
#: Where the controller mounts ``offline.storage.pvcName`` (``HuggingFaceHomePath``).
HF_HOME_PATH = "/opt/app-root/src/hf_home"
#: The directory the controller always passes to lm-eval as ``--include_path`` (``DefaultTaskRecipesPath``).
TASKS_PATH = "/opt/app-root/src/my_tasks"
#: The label the job's pod inherits (the controller copies the job's labels to its pod), selecting its pods.
JOB_LABEL = "kfp-finetune.io/lmevaljob"
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
        options: ``limit`` (None: all), ``num_fewshot`` (None: task default), ``batch_size``, ``apply_chat_template``,
            ``gen_kwargs`` (from ``options.check_options``) and ``log_samples``.
        labels: The job's labels (this run/task's ownership labels; Kueue's queue label).
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
        pod_spec.setdefault("volumes", []).append(
            {"name": "heldout-tasks", "persistentVolumeClaim": {"claimName": pvc_name}}
        )
        container = pod_spec.setdefault("container", {})
        container.setdefault("volumeMounts", []).append(
            {"name": "heldout-tasks", "mountPath": TASKS_PATH, "subPath": tasks_subpath.strip("/"), "readOnly": True}
        )
    if pod_spec:
        spec["pod"] = pod_spec
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": {**dict(labels), JOB_LABEL: name}},
        "spec": spec,
    }


def evaluated_model(job: Mapping[str, Any]) -> str:
    """The ``pretrained`` model argument of an LMEvalJob (``""``: none): the model it evaluates."""
    for arg in (job.get("spec") or {}).get("modelArgs") or []:
        if arg.get("name") == "pretrained":
            return str(arg.get("value") or "")
    return ""


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
