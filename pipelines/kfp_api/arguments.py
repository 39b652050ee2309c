"""A run's inputs, checked before anything is sent: its arguments, the package, the components' rules, the cron."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

PACKAGE_SUFFIXES = (".yaml", ".yml")
#: PyYAML's safe loader on libyaml where PyYAML has it (a compiled pipeline parses in 0.05 s instead of 0.5 s).
FAST_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_arguments(params: list[str], params_file: str = "") -> dict:
    """The ``--params-file`` mapping (YAML/JSON) updated by the ``--param KEY=VALUE`` flags (VALUE: JSON if it parses).

    Raises:
        ValueError: A bad file (with the line) or a bad or repeated ``--param`` entry (naming it).
    """
    arguments = _read_params_file(params_file) if params_file else {}
    from_flags: dict[str, Any] = {}
    for index, entry in enumerate(params, start=1):
        key, separator, raw_value = entry.partition("=")
        key = key.strip()
        if not separator or not key:
            raise ValueError(
                f"--param #{index} {entry!r}: expected KEY=VALUE, e.g. --param phase_02_train_man_train_epochs=2"
            )
        if key in from_flags:
            raise ValueError(f"--param #{index} {entry!r}: parameter {key!r} is given twice")
        try:
            from_flags[key] = json.loads(raw_value)
        except ValueError:  # not JSON: the string itself
            from_flags[key] = raw_value
    arguments.update(from_flags)
    return arguments


def read_option_file(path: str, what: str, flag: str) -> str:
    """The text of a file an option names; the error says which option and why, never quoting the content."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise ValueError(f"cannot read {what} {path!r} ({flag}): {reason}") from None


def _read_params_file(params_file: str) -> dict:
    text = read_option_file(params_file, "the parameters file", "--params-file")
    try:
        content = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{params_file}:{mark.line + 1}" if mark is not None else params_file
        problem = getattr(error, "problem", None) or str(error)
        raise ValueError(f"{where}: the parameters file (--params-file) is not valid YAML/JSON: {problem}") from None
    if content is None:
        return {}
    if not isinstance(content, dict):
        raise ValueError(
            f"{params_file}: the parameters file (--params-file) must hold a mapping of parameter name to value, "
            f"not a {type(content).__name__}"
        )
    for key in content:
        if not isinstance(key, str):
            raise ValueError(f"{params_file}: parameter name {key!r} (--params-file) must be a string")
    return dict(content)


def read_pipeline_documents(package_path: str) -> list[dict]:
    """The non-empty YAML documents of a compiled pipeline, spec first; a :class:`ValueError` when it is not one."""
    path = Path(package_path)
    if path.suffix not in PACKAGE_SUFFIXES:
        raise ValueError(f"pipeline package {package_path!r}: expected a compiled pipeline YAML (.yaml or .yml)")
    try:
        documents = list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=FAST_SAFE_LOADER))
    except OSError as error:
        raise ValueError(f"cannot read the pipeline package {package_path!r}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ValueError(
            f"pipeline package {package_path!r} is not a text file (not UTF-8 at byte {error.start}): expected a "
            "compiled pipeline YAML, e.g. from `kfp-finetune compile`"
        ) from None
    except yaml.YAMLError as error:
        text = " ".join(str(error).split())
        raise ValueError(f"pipeline package {package_path!r} is not valid YAML: {text}") from None
    spec = documents[0] if documents else None
    if not isinstance(spec, dict) or not isinstance(spec.get("pipelineInfo"), dict) or "root" not in spec:
        raise ValueError(
            f"{package_path!r} is not a compiled KFP pipeline (no pipelineInfo/root): compile it first, "
            "e.g. `kfp-finetune compile`"
        )
    return [document for document in documents if document]


_TYPE_CHECKS = {
    "STRING": (lambda value: isinstance(value, str), "a string"),
    "NUMBER_INTEGER": (lambda value: isinstance(value, int) and not isinstance(value, bool), "an integer"),
    "NUMBER_DOUBLE": (lambda value: isinstance(value, (int, float)) and not isinstance(value, bool), "a number"),
    "BOOLEAN": (lambda value: isinstance(value, bool), "true or false"),
    "LIST": (lambda value: isinstance(value, list), "a JSON list"),
    "STRUCT": (lambda value: isinstance(value, dict), "a JSON object"),
}


def check_arguments(spec: dict, arguments: Mapping[str, Any], package_path: str) -> None:
    """Checks run arguments against ``spec``'s parameters; one :class:`ValueError` lists every problem."""
    declared = spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {}) or {}
    problems = []
    unknown = [name for name in arguments if name not in declared]
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        listed = ", ".join(repr(name) for name in unknown)
        problems.append(
            f"parameter {listed} is not a parameter of pipeline {package_path!r} (it has: {known})"
            if len(unknown) == 1
            else f"parameters {listed} are not parameters of pipeline {package_path!r} (it has: {known})"
        )
    for name, value in arguments.items():
        if name not in declared:
            continue
        parameter_type = declared[name].get("parameterType", "")
        check, expected = _TYPE_CHECKS.get(parameter_type, (lambda _value: True, ""))
        if not check(value):
            hint = ""
            if parameter_type == "STRING":
                hint = f"; to pass it as text, quote it: --param '{name}=\"{value}\"' or {name}: '{value}' in a file"
            problems.append(
                f"parameter {name!r} of pipeline {package_path!r} is {parameter_type} and needs {expected}, "
                f"got {value!r} ({type(value).__name__}){hint}"
            )
    missing = [
        name
        for name, definition in declared.items()
        if name not in arguments and "defaultValue" not in definition and not definition.get("isOptional")
    ]
    if missing:
        problems.append(f"pipeline {package_path!r} needs a value for {', '.join(sorted(missing))}: pass --param")
    if problems:
        raise ValueError("; ".join(problems))


Values = dict[str, Any]


def _check_dataset(values: Values, task_inputs: Mapping[str, Values]) -> None:
    from components._common.arguments import option_group
    from components.data_processing.dataset_download.request import GROUPS

    for name in ("split", "validation", "tokens"):  # each group checks its own fields when it is built
        option_group(GROUPS, name, values)


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
    """A KFP integer YAML keeps as a float (``3.0``) as an int."""
    if parameter_type == "NUMBER_INTEGER" and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def task_values(spec: dict, arguments: Mapping[str, Any]) -> tuple[dict[str, Values], dict[str, dict[str, str]]]:
    """``({task: {input: value}}, {task: {input: pipeline parameter feeding it}})`` of a run (task outputs left out)."""
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
    """Checks a run's arguments with the components' own validation (:data:`TASK_CHECKS`).

    Raises:
        ValueError: ``pipeline '<pipeline>', step <task>: <error> (pipeline parameter <name>)`` per failing step.
    """
    values, sources = task_values(spec, arguments)
    problems = []
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


# -- cron expressions of recurring runs, checked with croniter as the KFP scheduler (robfig/cron) reads them; the few
# croniter accepts and robfig/cron refuses (day-of-week 7, a range 5-1) the KFP API server refuses itself.
_FIELDS = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
#: Allowed values of each field, for the message.
_ALLOWED = ("0-59", "0-59", "0-23", "1-31", "1-12 or JAN-DEC", "0-6 or SUN-SAT")
#: A valid expression whose fields are swapped one at a time for the user's, to find the wrong one.
_PROBE = ("0", "0", "0", "1", "1", "*")
_DESCRIPTORS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
#: ``@every <Go duration>`` (robfig/cron), e.g. ``@every 1h30m``; croniter does not know it.
_GO_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+")
_FORMAT = (
    "KFP cron has 6 fields: second minute hour day-of-month month day-of-week, e.g. '0 0 2 * * *' (02:00 daily), "
    "or a descriptor such as @daily or '@every 6h'"
)


def _parses(fields: list[str] | tuple[str, ...]) -> bool:
    from croniter import CroniterError, croniter

    try:
        croniter.expand(" ".join(fields), second_at_beginning=True)
    except (CroniterError, ValueError):
        return False
    return True


def validate_cron(expression: str) -> str:
    """``expression`` stripped, checked as the KFP scheduler reads it: 6 fields with seconds, or a descriptor.

    Raises:
        ValueError: Naming the wrong field and what it allows (for 5 fields: the 6-field expression meant).
    """
    expression = expression.strip()
    if expression.startswith("@"):
        keyword, _, duration = expression.partition(" ")
        every = _GO_DURATION.fullmatch(duration.strip()) and re.search(r"[1-9]", duration)
        if expression.lower() in _DESCRIPTORS or (keyword.lower() == "@every" and every):
            return expression
        raise ValueError(
            f"cron {expression!r}: unknown descriptor; use one of {', '.join(sorted(_DESCRIPTORS))} or "
            "'@every <duration>' (e.g. '@every 1h30m')"
        )
    fields = expression.split()
    if len(fields) == 5:
        raise ValueError(
            f"cron {expression!r} has 5 fields, but {_FORMAT}; did you mean '0 {expression}'? "
            "(KFP would read a 5-field expression as starting with seconds)"
        )
    if len(fields) != 6:
        raise ValueError(f"cron {expression!r} has {len(fields)} fields, but {_FORMAT}")
    if _parses(fields):
        return expression
    for index, (name, allowed) in enumerate(zip(_FIELDS, _ALLOWED)):
        probe = list(_PROBE)
        probe[index] = fields[index]
        if not _parses(probe):
            raise ValueError(
                f"cron {expression!r}: {name} field {fields[index]!r} is not valid (values {allowed}, '*', '?', "
                f"ranges a-b, steps */n, lists a,b); {_FORMAT}"
            )
    raise ValueError(f"cron {expression!r}: the fields do not combine into a schedule; {_FORMAT}")
