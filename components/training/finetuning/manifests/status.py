"""The ``status`` both job kinds (TrainJob, PyTorchJob) report: conditions of the Kubernetes shape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def condition(job: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    """The job's condition of a type when its status is ``True``, else None (both kinds use this shape)."""
    for item in (job.get("status") or {}).get("conditions") or []:
        if item.get("type") == type_ and item.get("status") == "True":
            return item
    return None
