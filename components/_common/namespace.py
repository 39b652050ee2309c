"""The namespace a pod runs in: ``$POD_NAMESPACE`` (the downward API), else its service account's mount."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: Where Kubernetes mounts the pod's service-account token, CA and namespace.
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SERVICE_ACCOUNT_NAMESPACE = f"{SERVICE_ACCOUNT_DIR}/namespace"


def pod_namespace(
    environ: Mapping[str, str] | None = None, namespace_path: str | Path = SERVICE_ACCOUNT_NAMESPACE
) -> str:
    """The pod's namespace, "" when not running in a cluster (no ``$POD_NAMESPACE``, no service-account mount)."""
    environ = os.environ if environ is None else environ
    if environ.get("POD_NAMESPACE"):
        return environ["POD_NAMESPACE"]
    path = Path(namespace_path)
    return path.read_text().strip() if path.is_file() else ""
