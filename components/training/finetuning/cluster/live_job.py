"""Whether a job of this run/task still exists: ``training_resume=False`` never wipes the files of a live job."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from components.training.finetuning.cluster.api import Api
from components.training.finetuning.cluster.errors import JobApiError
from components.training.finetuning.cluster.job_client import JobClient
from components.training.finetuning.cluster.job_kinds import owned_by


def find_live_job(
    api_client: Any, namespace: str, name: str, labels: Mapping[str, str], kinds: Iterable[str]
) -> dict[str, Any] | None:
    """This run/task's job of one of ``kinds`` that is not being deleted (completed or failed counts), or ``None``.

    Raises:
        JobApiError: The API could not be asked (the message says nothing was deleted).
    """
    api = Api(api_client, time.sleep, lambda line: None, 3)
    for kind in kinds:
        manifest = {"kind": kind, "metadata": {"name": name, "namespace": namespace}}
        try:
            job = JobClient(api, manifest, say=lambda line: None).get_job()
        except JobApiError as error:
            raise JobApiError(f"{error} (is a job of this run/task still there?); nothing was deleted") from None
        if job is not None and owned_by(job, labels) and not (job.get("metadata") or {}).get("deletionTimestamp"):
            return job
    return None
