"""Run arguments checked against the rules the components themselves apply, before anything is sent to a server.

A compiled pipeline says which pipeline parameter feeds which component input (``componentInputParameter``) and which
inputs are constants; :func:`task_values` rebuilds each task's arguments from that, the run's arguments and the
defaults, and :func:`check_component_rules` hands them to the components' own validation functions (never a copy of
their rules). Only tasks named in :data:`TASK_CHECKS` are checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Values = dict[str, Any]


def _check_dataset(values: Values, task_inputs: Mapping[str, Values]) -> None:
    from components.data_processing.dataset_download.formats import check_input_format
    from components.data_processing.dataset_download.split import check_split_options
    from components.data_processing.dataset_download.tokens import check_token_options
    from components.data_processing.dataset_download.validation_report import check_validation_options

    check_split_options(values["train_split_ratio"], values["subset_count"])
    check_validation_options(values["on_invalid"], values["max_invalid_fraction"])
    check_input_format(values["input_format"])
    check_token_options(values["max_seq_len"], values["tokenizer_source"])


def _check_train(values: Values, task_inputs: Mapping[str, Values]) -> None:
    from components.training.finetuning.config import OUTPUTS, parameter_fields, train_model_request
    from components.training.finetuning.run import validate_request

    names = parameter_fields()
    not_parameters = {"task_config": None, "dataset": None, "eval_dataset": None}  # artifacts and the passthrough
    given = {name: value for name, value in values.items() if name in names}
    request = train_model_request({**dict.fromkeys(OUTPUTS), **not_parameters, **given})
    dataset = task_inputs.get("dataset-download")
    validate_request(request, has_eval_data=dataset is not None and dataset["train_split_ratio"] < 1.0)


def _check_eval(values: Values, task_inputs: Mapping[str, Values]) -> None:
    from components.evaluation.lm_eval.config import check_options

    check_options(values)


def _check_registry(values: Values, task_inputs: Mapping[str, Values]) -> None:
    from components.deployment.kubeflow_model_registry.registration import check_registration_names

    check_registration_names(values["registry_address"], values["model_name"], values["model_version"])


#: The component checks by task name: ``check(task's values, every task's values)``.
TASK_CHECKS: dict[str, Callable[[Values, Mapping[str, Values]], None]] = {
    "dataset-download": _check_dataset,
    "train-model": _check_train,
    "lm-eval": _check_eval,
    "model-registry": _check_registry,
}


def _typed(value: Any, parameter_type: str) -> Any:
    """YAML keeps KFP integers as floats (``3.0``): give them back their type."""
    if parameter_type == "NUMBER_INTEGER" and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def task_values(spec: dict, arguments: Mapping[str, Any]) -> tuple[dict[str, Values], dict[str, dict[str, str]]]:
    """Each task's component arguments as a run with ``arguments`` would pass them.

    Args:
        spec: The pipeline spec (first document of a compiled pipeline).
        arguments: The run's arguments by pipeline parameter name.

    Returns:
        ``({task: {input: value}}, {task: {input: pipeline parameter feeding it}})``; inputs fed by other tasks'
        outputs are left out.
    """
    from pipelines.training.finetuning.interface import task_wiring

    root = spec.get("root", {})
    root_parameters = root.get("inputDefinitions", {}).get("parameters", {}) or {}
    values: dict[str, Values] = {}
    sources: dict[str, dict[str, str]] = {}
    for task, wiring in task_wiring(spec).items():
        reference = root["dag"]["tasks"][task].get("componentRef", {}).get("name", "")
        component = spec.get("components", {}).get(reference, {})
        declared = component.get("inputDefinitions", {}).get("parameters", {}) or {}
        given: Values = {name: d["defaultValue"] for name, d in declared.items() if "defaultValue" in d}
        sources[task] = {name: value for name, (kind, value) in wiring.items() if kind == "parameter"}
        given.update({name: value for name, (kind, value) in wiring.items() if kind == "constant"})
        for name, parameter in sources[task].items():
            if parameter in arguments:
                given[name] = arguments[parameter]
            elif "defaultValue" in root_parameters.get(parameter, {}):
                given[name] = root_parameters[parameter]["defaultValue"]
        values[task] = {
            name: _typed(value, declared.get(name, {}).get("parameterType", "")) for name, value in given.items()
        }
    return values, sources


def check_component_rules(spec: dict, arguments: Mapping[str, Any], pipeline: str) -> None:
    """Checks a run's arguments with the components' own validation, before anything is sent.

    Args:
        spec: The pipeline spec.
        arguments: The run's arguments by pipeline parameter name (types already checked).
        pipeline: The pipeline as the user named it, for errors.

    Raises:
        ValueError: ``pipeline '<name>', step <task>: <the component's one-line error>``, naming the pipeline
            parameter(s) that fed the broken input.
    """
    values, sources = task_values(spec, arguments)
    problems = []  # one per step that fails its rules: every mistake at once
    for task, check in TASK_CHECKS.items():
        if task not in values:
            continue
        try:
            check(values[task], values)
        except (ValueError, KeyError) as error:
            text = str(error) if isinstance(error, ValueError) else f"input {error} is missing"
            fed_by = sorted({p for name, p in sources[task].items() if re.search(rf"\b{re.escape(name)}\b", text)})
            origin = f" (pipeline parameter {', '.join(fed_by)})" if fed_by else ""
            problems.append(f"pipeline {pipeline!r}, step {task}: {text}{origin}")
    if problems:
        raise ValueError("; ".join(problems))
