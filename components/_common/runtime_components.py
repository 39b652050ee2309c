"""The class of this project's components: KFP's own ``PythonComponent`` with a per-image rebuild and string routes.

Apart from :mod:`components._common.runtime` so that importing that module imports no kfp until it builds one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kfp import dsl  # noqa: F401  (kfp.dsl first: it is what kfp.components' imports need loaded)
from kfp.components import PythonComponent


def _is_string(value: Any) -> bool:
    """Whether a task argument is a plain string or a string pipeline parameter (a channel of type ``String``)."""
    return isinstance(value, str) or getattr(value, "channel_type", None) == "String"


class RuntimeComponent(PythonComponent):
    """KFP's own ``PythonComponent`` with :meth:`with_image` and ``string_routes``.

    ``string_routes`` route a string given for an artifact input to a parameter input (the RHOAI guide's
    ``train_model(dataset="x.jsonl")`` and ``train_model(dataset=task.output)`` both work). ``built`` is what
    ``kfp.dsl.component`` built; ``build(image, described)`` builds it for another image, with or without the
    parameters' descriptions.
    """

    def __init__(self, built: Any, build: Callable[[str, bool], Any], string_routes: Mapping[str, str]) -> None:
        super().__init__(component_spec=built.component_spec, python_func=built.python_func)
        self._build = build
        self.string_routes = dict(string_routes)

    def with_image(self, image: str) -> Any:
        """This component as a pipeline embeds it: built for ``image``, its parameters undescribed; cached per image.

        ``image`` must be built from the project's ``Containerfile``. A pipeline's parameters carry their own
        descriptions (its docstring: what the dashboard shows); the component's would be repeated in the Argo
        Workflow five times per task (the spec's arguments, the driver's inputs, its ``pod-spec-patch`` output and
        the executor's inputs: ``benchmarks/workflow_size.py``).
        """
        return self._build(image, False)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for artifact_input, string_input in self.string_routes.items():
            if _is_string(kwargs.get(artifact_input)):
                kwargs[string_input] = kwargs.pop(artifact_input)
        return super().__call__(*args, **kwargs)
