"""Whether a job of this run/task still exists: ``training_resume=False`` never wipes the files of a live job.

A retried launcher (KFP retry, a restarted pod) runs the same run and task, so it re-attaches to the job of the first
attempt (:func:`.lifecycle.submit`). That job writes its checkpoints and metrics into the run directory; clearing the
directory for a fresh start (``resume=False``) must therefore wait until no job of this run/task exists.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from components.training.finetuning.cluster.api import Api
from components.training.finetuning.cluster.api import rejected as _rejected
from components.training.finetuning.cluster.errors import JobApiError
from components.training.finetuning.cluster.job_kinds import JOB_KINDS, owned_by


def find_live_job(
    api_client: Any, namespace: str, name: str, labels: Mapping[str, str], kinds: Iterable[str]
) -> dict[str, Any] | None:
    """This run/task's job of one of ``kinds`` (``TrainJob``, ``PyTorchJob``) that is not being deleted, or ``None``.

    A job of another run/task under the name, one being deleted, or a kind the cluster does not serve (404) count as
    none. A completed or failed job counts: its files are still the run's.

    Raises:
        JobApiError: The API could not be asked (the message says nothing was deleted).
    """
    from kubernetes.client import ApiException

    api = Api(api_client, time.sleep, lambda line: None, 3)
    for kind_name in kinds:
        kind = JOB_KINDS[kind_name]
        what = f"reading {kind.kind} {namespace}/{name} (is a job of this run/task still there?)"
        try:
            job = api.call(
                what, api.custom.get_namespaced_custom_object, kind.group, kind.version, namespace, kind.plural, name
            )
        except ApiException as error:
            if getattr(error, "status", None) == 404:
                continue
            raise JobApiError(f"{_rejected(what, error)}; nothing was deleted") from None
        except JobApiError as error:
            raise JobApiError(f"{error}; nothing was deleted") from None
        if owned_by(job, labels) and not (job.get("metadata") or {}).get("deletionTimestamp"):
            return job
    return None
