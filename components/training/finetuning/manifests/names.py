"""Kubernetes names and labels of the jobs: the API server's DNS-name rules, the job name, ownership labels."""

from __future__ import annotations

import hashlib
import re

#: Label/annotation keys tying a job to the KFP run and task that created it.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "kfp-finetune"
RUN_ID_LABEL = "kfp-finetune.kubeflow.org/run-id"
TASK_NAME_LABEL = "kfp-finetune.kubeflow.org/task-name"
TASK_NAME_ANNOTATION = "kfp-finetune.kubeflow.org/task-name"
#: The pod label the RHOAI guide's troubleshooting selects training pods by (``oc get pods -l ...=<job-name>``): the
#: Training Operator sets it on PyTorchJob pods, the TrainJob builder on TrainJob pods (through its pod patch).
JOB_NAME_POD_LABEL = "training.kubeflow.org/job-name"
#: Job names are kept this short so that JobSet's derived names (``<name>-node-<job>-<pod>``) fit in 63 chars.
MAX_NAME_LENGTH = 47

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def qualified_name_ok(key: str) -> bool:
    """Whether ``key`` is a qualified name (``[prefix/]name``) as label and annotation keys must be."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)):
        return False
    return len(name) <= 63 and bool(LABEL_NAME.match(name))


def _slug(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", text.lower())).strip("-")


def job_name(run_id: str, task_name: str) -> str:
    """The deterministic job name of a KFP run's task, e.g. ``train-model-3f2a9c1b7d`` (DNS-1035, short)."""
    digest = hashlib.sha256(f"{run_id}/{task_name}".encode()).hexdigest()[:10]
    slug = _slug(task_name)
    if not slug or not slug[0].isalpha():
        slug = f"tj-{slug}".rstrip("-")
    slug = slug[: MAX_NAME_LENGTH - len(digest) - 1].rstrip("-")
    return f"{slug}-{digest}"


def label_value(text: str) -> str:
    """A valid label value (<= 63 chars) standing for ``text``: itself when valid, else a readable slug plus a hash."""
    if len(text) <= 63 and LABEL_VALUE.match(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return f"{_slug(text)[:52].strip('-')}-{digest}".strip("-")


def ownership_labels(run_id: str, task_name: str) -> dict[str, str]:
    """The labels that tie a job to its KFP run and task (also used to recognise it on re-attach)."""
    return {
        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
        RUN_ID_LABEL: label_value(run_id),
        TASK_NAME_LABEL: label_value(task_name),
    }
