"""The run's workspace PVC: its defaults for ``@dsl.pipeline(pipeline_config=default_pipeline_config())``."""

from __future__ import annotations

import os
from typing import Any

PVC_SIZE = "50Gi"
PVC_STORAGE_CLASS = "nfs-csi"
PVC_ACCESS_MODES = ("ReadWriteMany",)


def check_workspace(pvc_path: str, step: str) -> None:
    """Fails in one line when the run's workspace (``pvc_path``; "" = none) is not writable here.

    Raises:
        OSError: Naming ``pvc_path``, the cause and the PVC settings to check.
    """
    if not pvc_path.strip():
        return
    probe = os.path.join(pvc_path, f".{step}-probe-{os.getpid()}")
    try:
        os.makedirs(pvc_path, exist_ok=True)  # kfp.local creates its workspace directory lazily; a mount exists
        with open(probe, "w", encoding="utf-8") as handle:
            handle.write("ok\n")
        os.remove(probe)
    except OSError as error:
        cause = error.strerror or type(error).__name__
        raise OSError(
            f"{step} parameter pvc_path={pvc_path!r}: the run's workspace is not writable here ({cause}); check the "
            "workspace PVC settings (PVC_SIZE, PVC_STORAGE_CLASS, PVC_ACCESS_MODES: ReadWriteMany)"
        ) from None


def default_workspace_config() -> Any:
    """A ``dsl.WorkspaceConfig`` from ``KFP_FINETUNE_PVC_SIZE`` / ``_STORAGE_CLASS`` / ``_ACCESS_MODES`` or defaults."""
    from kfp import dsl

    size = os.environ.get("KFP_FINETUNE_PVC_SIZE") or PVC_SIZE
    storage_class = os.environ.get("KFP_FINETUNE_PVC_STORAGE_CLASS", PVC_STORAGE_CLASS)
    modes = os.environ.get("KFP_FINETUNE_PVC_ACCESS_MODES")
    access_modes = [m.strip() for m in modes.split(",") if m.strip()] if modes else list(PVC_ACCESS_MODES)
    patch: dict[str, Any] = {"accessModes": access_modes}
    if storage_class:
        patch["storageClassName"] = storage_class
    return dsl.WorkspaceConfig(size=size, kubernetes=dsl.KubernetesWorkspaceConfig(pvcSpecPatch=patch))


def default_pipeline_config() -> Any:
    """A ``dsl.PipelineConfig`` with :func:`default_workspace_config`, for ``@dsl.pipeline(pipeline_config=...)``."""
    from kfp import dsl

    return dsl.PipelineConfig(workspace=default_workspace_config())
