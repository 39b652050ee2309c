"""Every default lives once, in the component's signature: no layer below restates one.

Requests and contracts have no defaults; no module below the wrappers (nor the CLI and ``doctor``) gives a component
parameter a value default (parameter, field, ``.get(name, default)``, ``DEFAULT_<NAME>``); empty values are allowed.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing
from pathlib import Path

import pytest

from components._common.dataset_metadata import DatasetMetadata
from components.data_processing.dataset_download import dataset_download
from components.data_processing.dataset_download.request import GROUPS as DATASET_GROUPS
from components.data_processing.dataset_download.run import DatasetDownloadRequest, run_dataset_download
from components.deployment.kubeflow_model_registry import model_registry
from components.deployment.kubeflow_model_registry.request import GROUPS as REGISTRY_GROUPS
from components.deployment.kubeflow_model_registry.request import ModelRegistryRequest
from components.deployment.kubeflow_model_registry.run import run_model_registration
from components.evaluation.lm_eval import lm_eval
from components.evaluation.lm_eval.config import GROUPS as LM_EVAL_GROUPS
from components.evaluation.lm_eval.config import LmEvalRequest
from components.evaluation.lm_eval.run import run_lm_eval
from components.training.finetuning import train_model
from components.training.finetuning.config import GROUPS, TrainingConfig, TrainModelRequest
from components.training.finetuning.contract import MlflowSettings, ProgressSettings, RunConfig, TrainingOptions
from components.training.finetuning.launch import PodSettings
from components.training.finetuning.run import run_train_model

ROOT = Path(__file__).resolve().parents[1]
FINETUNING = ROOT / "components" / "training" / "finetuning"
COMPONENTS = (train_model, dataset_download, lm_eval, model_registry)
TYPED = (
    TrainModelRequest,
    DatasetDownloadRequest,
    LmEvalRequest,
    ModelRegistryRequest,
    *(
        group_type
        for groups in (GROUPS, DATASET_GROUPS, LM_EVAL_GROUPS, REGISTRY_GROUPS)
        for group_type, _ in groups.values()
    ),
    TrainingOptions,
    RunConfig,
    ProgressSettings,
    MlflowSettings,
    PodSettings,
    DatasetMetadata,
)
#: The output artifacts of each component (not part of its request).
OUTPUTS = {
    "train_model": {"output_model", "output_metrics", "output_loss_chart"},
    "dataset_download": {"train_dataset", "eval_dataset", "report", "metrics"},
    "lm_eval": {"metrics", "results", "report"},
    "model_registry": {"summary"},
}
#: Each request's ``GROUPS`` table (its option groups and their parameter prefixes).
REQUEST_GROUPS = {
    TrainModelRequest: GROUPS,
    DatasetDownloadRequest: DATASET_GROUPS,
    LmEvalRequest: LM_EVAL_GROUPS,
    ModelRegistryRequest: REGISTRY_GROUPS,
}


def _flat_hints(cls, parameters: set[str], prefix: str = "") -> dict[str, object]:
    """The type of each field of ``cls``; a dataclass field that is no parameter (a group of options) by its fields,
    each under its group's parameter prefix (:data:`REQUEST_GROUPS`)."""
    hints = {}
    for name, hint in typing.get_type_hints(cls).items():
        grouped = dataclasses.is_dataclass(hint) and name not in parameters
        inner = REQUEST_GROUPS[cls][name][1] if name in REQUEST_GROUPS.get(cls, {}) else ""
        hints.update(_flat_hints(hint, parameters, inner) if grouped else {prefix + name: hint})
    return hints


def _parameters(component) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(component.python_func).parameters)


@pytest.mark.parametrize("cls", TYPED, ids=lambda cls: cls.__name__)
def test_requests_and_contracts_have_no_defaults(cls):
    with_default = [
        field.name
        for field in dataclasses.fields(cls)
        if field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    ]
    assert with_default == []


@pytest.mark.parametrize(
    ("component", "request_type"),
    [
        (train_model, TrainModelRequest),
        (dataset_download, DatasetDownloadRequest),
        (lm_eval, LmEvalRequest),
        (model_registry, ModelRegistryRequest),
    ],
    ids=["train_model", "dataset_download", "lm_eval", "model_registry"],
)
def test_a_request_is_its_components_parameters_under_the_same_names_and_types(component, request_type):
    """A grouped option type inside a request (``ModelRegistryRequest.deploy``, ``LmEvalRequest.harness``) counts as
    its own fields."""
    parameters = _parameters(component)
    expected = set(parameters) - OUTPUTS[component.name.replace("-", "_")]
    hints = _flat_hints(request_type, expected)
    assert set(hints) == expected
    for name in expected:
        annotation = parameters[name].annotation
        if annotation in (str, int, float, bool, dict, list):
            assert hints[name] is annotation, (name, hints[name], annotation)


@pytest.mark.parametrize(
    "run", [run_train_model, run_dataset_download, run_lm_eval, run_model_registration], ids=lambda f: f.__name__
)
def test_the_orchestrators_take_the_request_and_restate_no_default(run):
    parameters = inspect.signature(inspect.unwrap(run)).parameters
    first = next(iter(parameters.values()))
    assert first.name == "request" and first.default is inspect.Parameter.empty
    assert not [p for p in parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
    component_names = {name for component in COMPONENTS for name in _parameters(component)}
    assert [n for n, p in parameters.items() if n in component_names and p.default is not inspect.Parameter.empty] == []


def _component_parameter_names() -> set[str]:
    names: set[str] = set()
    for component in COMPONENTS:
        for name, parameter in _parameters(component).items():
            if parameter.default is not inspect.Parameter.empty:
                names |= {name, name.removeprefix("training_")}
    # Names the same settings take below the wrappers.
    return names | {field.name for field in dataclasses.fields(TrainingConfig)} | {"metrics_port", "epochs"}


def _empty(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in (None, "", 0, False) and not (node.value == 0 and isinstance(node.value, float))
    if isinstance(node, (ast.Tuple, ast.List, ast.Dict)):
        return not getattr(node, "elts", None) and not getattr(node, "keys", None)
    if isinstance(node, ast.Call):  # dataclasses.field(default_factory=dict) & co.
        factories = [kw.value for kw in node.keywords if kw.arg == "default_factory"]
        return bool(factories) and all(isinstance(f, ast.Name) and f.id in ("dict", "list", "tuple") for f in factories)
    return False


def restated_defaults(source: str, label: str, names: set[str]) -> list[str]:
    """Value defaults given to a component parameter's name in ``source`` (function, dataclass field, ``.get``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        pairs: list[tuple[str, ast.expr]] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            positional = node.args.posonlyargs + node.args.args
            pairs += [
                (a.arg, d) for a, d in zip(positional[len(positional) - len(node.args.defaults) :], node.args.defaults)
            ]
            pairs += [(a.arg, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
        elif isinstance(node, ast.ClassDef):
            pairs += [
                (item.target.id, item.value)
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None
            ]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            if len(node.args) == 2 and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                pairs.append((node.args[0].value, node.args[1]))
        found += [
            f"{label}:{getattr(value, 'lineno', '?')} {name}={ast.unparse(value)}"
            for name, value in pairs
            if name in names and not _empty(value)
        ]
    return found


def _below_the_wrappers() -> list[Path]:
    """Every non-test module under ``components/`` but the wrappers, and the ``pipelines/`` code calling into them."""
    files = [
        path
        for path in sorted((ROOT / "components").rglob("*.py"))
        if "tests" not in path.relative_to(ROOT).parts and path.name not in ("component.py", "parameter_docs.py")
    ]
    files += [ROOT / "pipelines" / "cli.py", ROOT / "pipelines" / "commands.py"]
    return files + sorted((ROOT / "pipelines" / "doctor").rglob("*.py"))


def _component_defaults() -> dict[str, list[object]]:
    """Each component parameter's default(s), under its name and its name without ``training_``."""
    defaults: dict[str, list[object]] = {}
    for component in COMPONENTS:
        for name, parameter in _parameters(component).items():
            if parameter.default is not inspect.Parameter.empty:
                for key in {name, name.removeprefix("training_")}:
                    defaults.setdefault(key, []).append(parameter.default)
    return defaults


def _constant(node: ast.expr) -> object:
    """The value of a constant expression (``16 << 20``, ``3 * 3600.0``); ``ValueError`` for anything else."""
    allowed = (ast.Expression, ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop)
    if not all(isinstance(part, allowed) for part in ast.walk(node)):
        raise ValueError(ast.unparse(node))
    return eval(compile(ast.Expression(node), "<constant>", "eval"), {"__builtins__": {}})  # noqa: S307 - arithmetic only


def restated_default_constants(source: str, label: str, defaults: dict[str, list[object]]) -> list[str]:
    """Module-level ``DEFAULT_<X>`` constants equal to the default of a component parameter ``<x>`` or ``..._<x>``."""
    found = []
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        constant = node.targets[0].id
        if not constant.startswith("DEFAULT_"):
            continue
        try:
            value = _constant(node.value)
        except ValueError:
            continue
        suffix = constant.removeprefix("DEFAULT_").lower()
        matches = [
            name
            for name, values in defaults.items()
            if (name == suffix or name.endswith(f"_{suffix}"))
            and any(type(value) is not bool and type(default) is not bool and value == default for default in values)
        ]
        if matches:
            found.append(f"{label}:{node.lineno} {constant}={ast.unparse(node.value)} (the default of {min(matches)})")
    return found


def test_no_layer_below_the_wrappers_restates_a_component_default():
    names, defaults = _component_parameter_names(), _component_defaults()
    assert {"num_epochs", "training_num_epochs", "backend", "metrics_port"} <= names
    scanned = {str(path.relative_to(ROOT)) for path in _below_the_wrappers()}
    assert {
        "components/_common/chat_files.py",
        "components/data_processing/dataset_download/validate.py",
        "components/training/finetuning/cluster/runner.py",
        "components/training/memory_estimate.py",
        "pipelines/commands.py",
    } <= scanned
    assert not {name for name in scanned if name.endswith(("/component.py", "/parameter_docs.py"))}
    offending = [
        hit
        for path in _below_the_wrappers()
        for scan in (restated_defaults, restated_default_constants)
        for hit in scan(path.read_text(), str(path.relative_to(ROOT)), names if scan is restated_defaults else defaults)
    ]
    assert offending == []


def test_the_scan_catches_the_drifts_it_is_for():
    """The drifts of issue 27, written the way they were, are all found; "not given" values are not."""
    source = (
        "import dataclasses\n"
        "@dataclasses.dataclass\nclass C:\n    num_epochs: int = 1\n    image: str = ''\n"
        "def f(params):\n    return params.get('backend', 'trainjob'), params.get('namespace', '')\n"
        "def g(raw, num_epochs=1, seed=None):\n    return raw\n"
    )
    hits = restated_defaults(source, "probe.py", _component_parameter_names())
    assert sorted(hit.split(" ", 1)[1] for hit in hits) == ["backend='trainjob'", "num_epochs=1", "num_epochs=1"], hits


def test_the_scan_catches_the_defaults_restated_below_the_wrappers_before_issue_27c():
    """Constants, named defaults and placeholders as they were in ``chat_files``, ``cluster/`` and ``diagnosis``."""
    source = (
        "DEFAULT_MAX_LINE_BYTES = 16 << 20\nDEFAULT_DEADLINE_S = 3 * 3600.0\nDEFAULT_PORT = 1\nDEFAULT_X = 'auto'\n"
        "class ReadLimits:\n    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES\n"
        "def run_job(*, cleanup_policy='delete', api_outage_tolerance_seconds=DEFAULT_API):\n"
        "    return job.get('namespace', '?')\n"
    )
    hits = restated_defaults(source, "probe.py", _component_parameter_names())
    assert sorted(hit.split(" ", 1)[1] for hit in hits) == [
        "api_outage_tolerance_seconds=DEFAULT_API",
        "cleanup_policy='delete'",
        "max_line_bytes=DEFAULT_MAX_LINE_BYTES",
        "namespace='?'",
    ], hits
    constants = restated_default_constants(source, "probe.py", _component_defaults())
    assert sorted(hit.split(" ", 1)[1].split(" (")[0] for hit in constants) == [
        "DEFAULT_DEADLINE_S=3 * 3600.0",
        "DEFAULT_MAX_LINE_BYTES=16 << 20",
    ], constants
