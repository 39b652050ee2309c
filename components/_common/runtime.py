"""Components as KFP lightweight components on the project's image: the YAML names the image, embeds no code."""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any

from kfp import dsl
from kfp.components import PythonComponent

from components._common.images import STEP_IMAGE


def with_parameter_docs(func: Callable[..., Any], parameter_docs: Mapping[str, str]) -> Callable[..., Any]:
    """Appends an ``Args:`` section built from ``parameter_docs`` to ``func``'s docstring (KFP's descriptions).

    Raises:
        ValueError: ``parameter_docs`` names a parameter ``func`` does not have.
    """
    unknown = sorted(set(parameter_docs) - set(inspect.signature(func).parameters))
    if unknown:
        raise ValueError(f"parameter_docs of {func.__name__} name unknown parameters {unknown}")
    summary = inspect.cleandoc(func.__doc__ or func.__name__)
    lines = [f"    {name}: {' '.join(text.split())}" for name, text in parameter_docs.items()]
    func.__doc__ = summary + "\n\nArgs:\n" + "\n".join(lines) + "\n"
    return func


def compact_program(program: str, function_name: str) -> str:
    """The program KFP embeds in a component's command without the wrapper's docstring (Argo copies it 5 times).

    Raises:
        ValueError: ``program`` does not define ``function_name`` (KFP's command layout changed).
    """
    tree = ast.parse(program)
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == function_name]
    if len(functions) != 1:
        raise ValueError(f"the component program does not define {function_name} once: KFP's command layout changed")
    body = functions[0].body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        if isinstance(body[0].value.value, str):
            functions[0].body = body[1:]
    return ast.unparse(tree) + "\n"


class RuntimeComponent(PythonComponent):
    """KFP's ``PythonComponent`` with :meth:`with_image` and ``string_routes``.

    ``string_routes`` send a string given for an artifact input to a parameter (``train_model(dataset="x.jsonl")``).
    """

    def __init__(self, built: Any, build: Callable[[str, bool], Any], string_routes: Mapping[str, str]) -> None:
        super().__init__(component_spec=built.component_spec, python_func=built.python_func)
        self._build = build
        self.string_routes = dict(string_routes)

    def with_image(self, image: str) -> Any:
        """This component built for ``image``, its parameters undescribed (the pipeline's describe them); cached."""
        return self._build(image, False)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for artifact_input, string_input in self.string_routes.items():
            value = kwargs.get(artifact_input)
            if isinstance(value, str) or getattr(value, "channel_type", None) == "String":  # a string parameter
                kwargs[string_input] = kwargs.pop(artifact_input)
        return super().__call__(*args, **kwargs)


def runtime_component(
    parameter_docs: Mapping[str, str] | None = None,
    base_image: str = STEP_IMAGE,
    string_routes: Mapping[str, str] | None = None,
    **component_kwargs: Any,
) -> Callable[[Callable[..., Any]], Any]:
    """A ``@dsl.component`` on one of the project's images (``base_image`` by default), nothing embedded or installed.

    Args:
        parameter_docs: Descriptions of the parameters, by name.
        base_image: The default image (a pipeline picks another with ``with_image``).
        string_routes: ``{artifact input: string parameter input}`` (``RuntimeComponent``).
        **component_kwargs: Passed through to ``kfp.dsl.component``.
    """
    routes = dict(string_routes or {})

    def decorate(func: Callable[..., Any]) -> Any:
        if parameter_docs:
            with_parameter_docs(func, parameter_docs)
        built: dict[tuple[str, bool], Any] = {}

        def build(step_image: str, described: bool) -> Any:
            if not step_image:
                raise ValueError(f"{func.__name__}: the image must name a container image, got ''")
            if (step_image, described) not in built:
                component = dsl.component(func, base_image=step_image, install_kfp_package=False, **component_kwargs)
                if not described:  # the parameters without descriptions: the pipeline's describe them
                    specs = component.component_spec
                    for spec in [*(specs.inputs or {}).values(), *(specs.outputs or {}).values()]:
                        spec.description = None
                container = component.component_spec.implementation.container  # the command, compacted
                *shell, script, program = container.command
                container.command = [*shell, re.sub(r" {2,}", " ", script), compact_program(program, func.__name__)]
                built[step_image, described] = RuntimeComponent(component, build, routes)
            return built[step_image, described]

        return build(base_image, True)

    return decorate
