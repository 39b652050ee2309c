"""The run's workspace PVC: its defaults, and a workspace for custom pipelines that use one without declaring it.

The RHOAI guide's custom-pipeline snippet passes ``pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER`` to ``train_model`` inside
a plain ``@dsl.pipeline(name=...)``. KFP 2.15 refuses to compile that ("Workspace features are used ... but
PipelineConfig.workspace.size is not set"). :func:`allow_default_workspace` makes such a pipeline compile with the
workspace the fine-tuning pipelines use (``KFP_FINETUNE_PVC_*`` variables, else 50Gi ``nfs-csi`` ReadWriteMany), so the
snippet means what it says; it applies only when one of this project's components uses the placeholder and the
pipeline declares no workspace of its own, and it says so on stderr. The hook is installed by the task call that passes
the placeholder (:func:`uses_workspace_placeholder`, see ``runtime_component``), never on import; the patch itself is
:func:`components._common.kfp_patches.allow_default_workspace`.
"""

from __future__ import annotations

import os
from typing import Any

PVC_SIZE = "50Gi"
PVC_STORAGE_CLASS = "nfs-csi"
PVC_ACCESS_MODES = ("ReadWriteMany",)
#: Component names (``component_spec.name``) of this project's components.
PROJECT_COMPONENTS = {"dataset-download", "train-model", "lm-eval", "model-registry"}


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


def _uses_placeholder_in_project_component(pipeline: Any) -> bool:
    from kfp import dsl

    for task in pipeline.tasks.values():
        if task.component_spec.name not in PROJECT_COMPONENTS:
            continue
        if any(isinstance(v, str) and dsl.WORKSPACE_PATH_PLACEHOLDER in v for v in task.inputs.values()):
            return True
    return False


def allow_default_workspace() -> None:
    """Installs (once) the KFP compile hook described in the module docstring (:mod:`.kfp_patches`)."""
    from components._common.kfp_patches import allow_default_workspace as install

    install(_uses_placeholder_in_project_component, default_workspace_config)


def uses_workspace_placeholder(arguments: dict[str, Any]) -> bool:
    """Whether a task's arguments pass ``dsl.WORKSPACE_PATH_PLACEHOLDER`` (then the hook is needed)."""
    from kfp import dsl

    return any(isinstance(value, str) and dsl.WORKSPACE_PATH_PLACEHOLDER in value for value in arguments.values())
