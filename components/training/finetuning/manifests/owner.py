"""The ``ownerReference`` a job gets to the object that owns the KFP run, so that deleting the run deletes the job.

The owner is the launcher pod's own owner (the run's Argo ``Workflow``), never the pod itself; it must live in the
job's namespace (across namespaces the garbage collector deletes the dependent), which :class:`~.spec.JobSpec` checks.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

_UID = re.compile(r"^[0-9a-fA-F-]{8,64}$")


@dataclasses.dataclass(frozen=True)
class OwnerReference:
    """The object that owns the run (e.g. the ``argoproj.io/v1alpha1`` ``Workflow``), from the launcher pod.

    ``namespace`` is not written: an owner must be in the job's namespace (checked by ``JobSpec``).
    """

    api_version: str
    kind: str
    name: str
    uid: str
    namespace: str

    def __post_init__(self) -> None:
        for field in ("api_version", "kind", "name", "namespace"):
            if not isinstance(getattr(self, field), str) or not getattr(self, field):
                raise ValueError(f"OwnerReference.{field}={getattr(self, field)!r}: must be a non-empty string")
        if not isinstance(self.uid, str) or not _UID.match(self.uid):
            raise ValueError(f"OwnerReference.uid={self.uid!r}: must be a Kubernetes uid")

    def to_dict(self) -> dict[str, Any]:
        """The ``metadata.ownerReferences`` entry (not the controller; never blocks the owner's deletion)."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": False,
            "blockOwnerDeletion": False,
        }
