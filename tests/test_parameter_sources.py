"""One source per parameter: the pipelines' defaults and descriptions are the components' own, but where declared.

A component's signature holds each default and its ``parameter_docs.py`` each description; the pipeline table adds
only the dashboard name, ``man``/``opt``, the minimal flag and the algorithms, plus the declared differences
(``PIPELINE_DEFAULTS``, ``ALGORITHM_DEFAULTS``, a pipeline module's ``defaults``). Any other difference is drift.
"""

from __future__ import annotations

import dataclasses
import inspect

import docstring_parser
import pytest
import yaml

from pipelines.compile import checked_in_path, pipeline_module
from pipelines.training.finetuning import PIPELINES
from pipelines.training.finetuning.component_parameters import COMPONENTS, REQUIRED, component_parameters
from pipelines.training.finetuning.parameters import (
    ALGORITHM_DEFAULTS,
    PARAMETERS,
    PIPELINE_DEFAULTS,
    parameters_for,
    with_defaults,
)

_PLAIN = (str, int, float, bool, list, dict)


def _imported_component(step: str):
    from importlib import import_module

    folder, function = COMPONENTS[step]
    return getattr(import_module(folder.replace("/", ".")), function)


@pytest.mark.parametrize("step", sorted(COMPONENTS))
def test_the_source_reading_agrees_with_the_imported_component(step):
    """The fast ``ast`` reading gives what the real (decorated, imported) component declares and documents."""
    func = _imported_component(step).python_func
    documented = {p.arg_name: " ".join(p.description.split()) for p in docstring_parser.parse(func.__doc__).params}
    expected = {}
    for name, parameter in inspect.signature(func).parameters.items():
        if parameter.annotation not in _PLAIN or isinstance(parameter.default, str) and "{{$" in parameter.default:
            continue  # artifacts and placeholders filled by the pipeline
        default = REQUIRED if parameter.default is inspect.Parameter.empty else parameter.default
        expected[name] = (parameter.annotation, default, documented.get(name, ""))
    read = {name: (p.annotation, p.default, p.description) for name, p in component_parameters(step).items()}
    assert read == expected


def test_every_table_row_feeds_a_documented_component_parameter():
    for p in PARAMETERS:
        assert p.name in component_parameters(p.step), f"{p.dashboard_name}: no parameter {p.name} in {p.step}"
        assert p.description, f"{p.dashboard_name}: the {p.step} component documents no {p.name}"
        assert "\n" not in p.description


def _declared(algorithm: str, module_defaults: dict) -> set[str]:
    return set(PIPELINE_DEFAULTS) | set(ALGORITHM_DEFAULTS[algorithm]) | set(module_defaults)


def drift(name: str, read=component_parameters) -> list[str]:
    """Defaults of pipeline ``name`` (table and checked-in YAML) that are neither the component's nor declared."""
    declaration = pipeline_module(name).DECLARATION
    declared = _declared(declaration.algorithm, declaration.defaults)
    parameters = with_defaults(parameters_for(declaration.algorithm, declaration.flavor), declaration.defaults)
    compiled = next(yaml.safe_load_all(checked_in_path(name).read_text()))["root"]["inputDefinitions"]["parameters"]
    found = []
    for p in parameters:
        key = f"{p.step}.{p.name}"
        expected = p.default if key in declared else read(p.step)[p.name].default
        if p.default != expected:
            found.append(f"{name}: {p.dashboard_name} = {p.default!r} in the table, {expected!r} in {key}")
        compiled_default = compiled[p.dashboard_name].get("defaultValue", REQUIRED)
        if compiled_default != expected:
            found.append(f"{name}: {p.dashboard_name} = {compiled_default!r} in pipeline.yaml, {expected!r} expected")
    return found


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_every_pipeline_default_is_the_component_default_unless_declared(name):
    assert drift(name) == []


def test_an_undeclared_difference_is_drift():
    """The comparison can fail: a component default that the pipeline (table or YAML) does not follow is reported."""
    changed = dict(component_parameters("train"))
    changed["training_num_epochs"] = dataclasses.replace(changed["training_num_epochs"], default=7)

    def read(step):
        return changed if step == "train" else component_parameters(step)

    found = drift("osft-minimal", read)
    assert len(found) == 2 and all("phase_02_train_man_train_epochs" in line for line in found)
    assert drift("osft-minimal", component_parameters) == []


def test_declared_differences_name_real_parameters_and_do_differ_where_they_say_why():
    known = {f"{p.step}.{p.name}" for p in PARAMETERS}
    assert set(PIPELINE_DEFAULTS) <= known
    for overrides in ALGORITHM_DEFAULTS.values():
        assert set(overrides) <= known
    for key, value in PIPELINE_DEFAULTS.items():
        step, name = key.split(".")
        assert component_parameters(step)[name].default != value, f"{key} is declared but equals the component's"


@pytest.mark.parametrize("step", sorted(COMPONENTS))
def test_each_wrapper_maps_every_argument_explicitly(step):
    """No ``**locals()`` or other bag: every argument of the component is read by name in its body."""
    import ast
    from pathlib import Path

    folder, function = COMPONENTS[step]
    tree = ast.parse((Path(__file__).resolve().parents[1] / folder / "component.py").read_text())
    wrapper = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    calls = {n.func.id for n in ast.walk(wrapper) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not calls & {"locals", "vars"}, f"{function} passes its arguments as a bag"
    read = {n.id for n in ast.walk(wrapper) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    arguments = [a.arg for a in wrapper.args.args + wrapper.args.kwonlyargs]
    assert [name for name in arguments if name not in read] == []
