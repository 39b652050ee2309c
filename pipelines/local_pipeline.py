"""``kfp.local`` runs a pipeline as the KFP backend does: unconnected optional artifact inputs are ``None``.

``kfp.local`` 2.15 raises ``KeyError`` for them (fixed in kfp 2.17's ``construct_executor_input``); the pipelines leave
such inputs unconnected on purpose (the base model's evaluation has no baseline). :func:`local_pipeline` compiles the
pipeline, leaves those inputs out of each task's component definition and loads the result as a component.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any


def without_unconnected_optional_artifacts(spec: dict) -> dict:
    """A copy of ``spec`` whose tasks' components declare only the optional artifacts they get (shared ones copied)."""
    spec = copy.deepcopy(spec)
    components = spec.get("components", {})
    users: dict[str, int] = {}

    def count(dag: dict) -> None:
        for task in dag.get("tasks", {}).values():
            reference = task.get("componentRef", {}).get("name")
            users[reference] = users.get(reference, 0) + 1
            count(components.get(reference, {}).get("dag", {}))

    def adjust(dag: dict) -> None:
        for task_name, task in dag.get("tasks", {}).items():
            reference = task.get("componentRef", {}).get("name")
            component = components.get(reference)
            if component is None:
                continue
            if "dag" in component:
                adjust(component["dag"])
            artifacts = component.get("inputDefinitions", {}).get("artifacts", {})
            given = set(task.get("inputs", {}).get("artifacts", {}))
            left_out = [name for name, item in artifacts.items() if item.get("isOptional") and name not in given]
            if not left_out:
                continue
            if users[reference] > 1:  # shared: this task gets its own copy
                component = components[f"{reference}-local-{task_name}"] = copy.deepcopy(component)
                task["componentRef"]["name"] = f"{reference}-local-{task_name}"
            for name in left_out:
                del component["inputDefinitions"]["artifacts"][name]

    root = spec.get("root", {}).get("dag", {})
    count(root)
    adjust(root)
    return spec


def local_pipeline(pipeline: Any) -> Any:
    """``pipeline`` (a ``@dsl.pipeline``) as a component to call after ``kfp.local.init(...)``; it returns the task."""
    import yaml
    from kfp import compiler, components

    with tempfile.TemporaryDirectory(prefix="kfp-finetune-local-") as folder:
        path = Path(folder) / "pipeline.yaml"
        compiler.Compiler().compile(pipeline, str(path))
        documents = list(yaml.safe_load_all(path.read_text()))
    documents[0] = without_unconnected_optional_artifacts(documents[0])
    return components.load_component_from_text(yaml.safe_dump_all(documents, sort_keys=False))
