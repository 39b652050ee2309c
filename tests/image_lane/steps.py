"""One compiled step's command, with its executor input built as KFP's launcher builds it, and its outputs read back.

The executor input and the placeholders are kfp.local's public modules (``kfp.local.executor_input_utils``,
``kfp.local.placeholder_utils``), the same code ``kfp.local``'s runners use: parameters by name (the component's
defaults for the rest), input artifacts as ``dsl`` artifacts whose ``uri`` is a local path, outputs under the task's
root (``<root>/<output name>``, ``executor_output.json``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PIPELINE_NAME = "image-lane"
RUN_ID = "image-lane-run"


@dataclasses.dataclass(frozen=True)
class CompiledStep:
    """A step of a compiled pipeline: its component spec and its executor's container."""

    component: str
    spec: Any  # pipeline_spec_pb2.ComponentSpec
    image: str
    command: list[str]
    args: list[str]


def compiled_steps(pipeline_yaml: Path) -> dict[str, CompiledStep]:
    """The components of a compiled pipeline by name (``dataset-download``, ``train-model``, ...)."""
    import yaml
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    document = next(yaml.safe_load_all(pipeline_yaml.read_text()))
    executors = document["deploymentSpec"]["executors"]
    steps = {}
    for key, component in document["components"].items():
        if "executorLabel" not in component:
            continue
        container = executors[component["executorLabel"]]["container"]
        spec = json_format.ParseDict(component, pipeline_spec_pb2.ComponentSpec(), ignore_unknown_fields=True)
        name = key.removeprefix("comp-")
        steps[name] = CompiledStep(name, spec, container["image"], container["command"], container.get("args", []))
    return steps


def resolved_command(step: CompiledStep, arguments: Mapping[str, Any], pipeline_root: Path) -> tuple[list[str], Path]:
    """The step's ``command + args`` with every placeholder resolved, and its task root (where the outputs go)."""
    from kfp.local import executor_input_utils, placeholder_utils

    task_root = pipeline_root / step.component
    task_root.mkdir(parents=True, exist_ok=True)
    # An optional input artifact left out is absent from the executor input, as KFP's driver leaves it (kfp.local
    # 2.15 would look every declared artifact up in the arguments).
    spec = type(step.spec)()
    spec.CopyFrom(step.spec)
    for name in list(spec.input_definitions.artifacts):
        if name not in arguments:
            del spec.input_definitions.artifacts[name]
    executor_input = executor_input_utils.construct_executor_input(
        spec, dict(arguments), str(task_root), block_input_artifact=False
    )
    as_dict = executor_input_utils.executor_input_to_dict(executor_input, spec)
    command = placeholder_utils.replace_placeholders(
        [*step.command, *step.args], as_dict, PIPELINE_NAME, step.component, str(pipeline_root), RUN_ID
    )
    return command, task_root


def outputs(task_root: Path) -> dict[str, Any]:
    """The step's ``executor_output.json``: ``{"artifacts": {name: dsl.Artifact}, "parameters": {name: value}}``."""
    from kfp import dsl

    written = json.loads((task_root / "executor_output.json").read_text())
    artifacts = {}
    for name, listed in (written.get("artifacts") or {}).items():
        [artifact] = listed["artifacts"]
        artifacts[name] = dsl.Artifact(uri=artifact["uri"], metadata=artifact.get("metadata") or {})
    return {"artifacts": artifacts, "parameters": dict(written.get("parameterValues") or {})}


def typed(artifact: Any, kind: str) -> Any:
    """``artifact`` as a ``dsl`` artifact of ``kind`` (``Dataset``, ``Model``, ``Metrics``, ``Artifact``)."""
    from kfp import dsl

    return getattr(dsl, kind)(uri=artifact.uri, metadata=dict(artifact.metadata))
