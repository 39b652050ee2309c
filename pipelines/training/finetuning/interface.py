"""What a fine-tuning pipeline asks of its user, read from the pipeline itself: its run-time parameters and wiring.

The parameters come from the function's signature and docstring (as KFP reads them), the wiring from the built spec.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any

#: Marker for a parameter without default (the dashboard requires a value).
REQUIRED = inspect.Parameter.empty
#: The pipeline step of each task of the fine-tuning pipelines.
STEP_OF_TASK = {"dataset-download": "dataset", "train-model": "train", "lm-eval": "eval", "model-registry": "registry"}


def step_of_task(task: str) -> str:
    """The step of a task (``train-model`` -> ``train``; KFP's ``train-model-2`` too), else the task's own name."""
    return STEP_OF_TASK.get(re.sub(r"-\d+$", "", task), task)


@dataclasses.dataclass(frozen=True)
class PipelineParameter:
    """One run-time parameter of a pipeline: dashboard name, type, default (or :data:`REQUIRED`), description."""

    name: str
    annotation: type
    default: Any
    description: str


def pipeline_parameters(pipeline: Any) -> list[PipelineParameter]:
    """The run-time parameters of ``pipeline`` (a ``@dsl.pipeline`` function), in signature order."""
    import docstring_parser

    function = pipeline.pipeline_func
    docs = {p.arg_name: " ".join(p.description.split()) for p in docstring_parser.parse(function.__doc__ or "").params}
    return [
        PipelineParameter(name, parameter.annotation, parameter.default, docs.get(name, ""))
        for name, parameter in inspect.signature(function).parameters.items()
    ]


def pipeline_description(pipeline: Any) -> str:
    """The description the dashboard shows (the function docstring's text before ``Args``), whitespace collapsed."""
    return " ".join(pipeline.pipeline_spec.pipeline_info.description.split())


def task_wiring(spec: dict) -> dict[str, dict[str, tuple[str, Any]]]:
    """``{task: {component argument: ("parameter", pipeline parameter) | ("constant", value)}}`` of a pipeline spec.

    Args:
        spec: The pipeline spec as a dict (the first document of a compiled YAML, or :func:`spec_of`).
    """
    wiring: dict[str, dict[str, tuple[str, Any]]] = {}
    for task, task_spec in (((spec.get("root") or {}).get("dag") or {}).get("tasks") or {}).items():
        inputs: dict[str, tuple[str, Any]] = {}
        for argument, value in ((task_spec.get("inputs") or {}).get("parameters") or {}).items():
            if "componentInputParameter" in value:
                inputs[argument] = ("parameter", value["componentInputParameter"])
            elif "constant" in (value.get("runtimeValue") or {}):
                inputs[argument] = ("constant", value["runtimeValue"]["constant"])
        wiring[task] = inputs
    return wiring


def spec_of(pipeline: Any) -> dict:
    """The pipeline spec of a ``@dsl.pipeline`` function as a dict (what the compiled YAML's first document holds)."""
    from google.protobuf import json_format

    return json_format.MessageToDict(pipeline.pipeline_spec)


def fed_by(pipeline: Any) -> dict[str, list[tuple[str, str]]]:
    """``{pipeline parameter: [(step, component argument), ...]}``: where each run-time parameter goes."""
    found: dict[str, list[tuple[str, str]]] = {}
    for task, inputs in task_wiring(spec_of(pipeline)).items():
        for argument, (kind, value) in inputs.items():
            if kind == "parameter":
                found.setdefault(value, []).append((step_of_task(task), argument))
    return found


def parameter_feeding(pipeline: Any, step: str, argument: str) -> str | None:
    """The pipeline parameter that feeds ``argument`` of ``step`` (``train``, ...), or None when none does."""
    for parameter, targets in fed_by(pipeline).items():
        if (step, argument) in targets:
            return parameter
    return None
