"""The run's workspace PVC: its defaults, and a workspace for custom pipelines that use one without declaring it.

The RHOAI guide's custom-pipeline snippet passes ``pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER`` to ``train_model`` inside
a plain ``@dsl.pipeline(name=...)``. KFP 2.15 refuses to compile that ("Workspace features are used ... but
PipelineConfig.workspace.size is not set"). :func:`allow_default_workspace` makes such a pipeline compile with the
workspace the fine-tuning pipelines use (``KFP_FINETUNE_PVC_*`` variables, else 50Gi ``nfs-csi`` ReadWriteMany), so the
snippet means what it says; it applies only when one of this project's components uses the placeholder and the
pipeline declares no workspace of its own, and it says so on stderr.
"""

from __future__ import annotations

import os
import sys
from typing import Any

PVC_SIZE = "50Gi"
PVC_STORAGE_CLASS = "nfs-csi"
PVC_ACCESS_MODES = ("ReadWriteMany",)
#: Component names (``component_spec.name``) of this project's components.
PROJECT_COMPONENTS = {"dataset-download", "train-model", "lm-eval", "model-registry"}
_INSTALLED = False


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
    """Installs (once) the KFP compile hook described in the module docstring."""
    global _INSTALLED
    if _INSTALLED:
        return
    from kfp.compiler import pipeline_spec_builder
    from kfp.dsl import graph_component, pipeline_config

    validate = graph_component.GraphComponent._validate_workspace_requirements
    create = pipeline_spec_builder.create_pipeline_spec

    def validate_or_default(self: Any, pipeline: Any, config: Any) -> None:
        declared = config is not None and config.workspace is not None and getattr(config.workspace, "size", None)
        if not declared and _uses_placeholder_in_project_component(pipeline):
            pipeline.kfp_finetune_default_workspace = default_workspace_config()
            workspace = pipeline.kfp_finetune_default_workspace
            print(
                f"kfp-finetune: pipeline {pipeline.name!r} passes dsl.WORKSPACE_PATH_PLACEHOLDER to a kfp-finetune "
                f"component but declares no workspace: using a {workspace.size} workspace PVC "
                f"({workspace.kubernetes.pvcSpecPatch}); set dsl.PipelineConfig(workspace=...) to choose",
                file=sys.stderr,
            )
            return
        validate(self, pipeline, config)

    def create_with_default(
        pipeline: Any, component_spec: Any, pipeline_outputs: Any = None, pipeline_config: Any = None
    ):
        workspace = getattr(pipeline, "kfp_finetune_default_workspace", None)
        if workspace is not None:
            pipeline_config = pipeline_config or pipeline_config_module.PipelineConfig()
            pipeline_config.workspace = workspace
        return create(pipeline, component_spec, pipeline_outputs=pipeline_outputs, pipeline_config=pipeline_config)

    pipeline_config_module = pipeline_config
    graph_component.GraphComponent._validate_workspace_requirements = validate_or_default
    pipeline_spec_builder.create_pipeline_spec = create_with_default
    _INSTALLED = True
