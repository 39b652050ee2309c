"""KFP's ``PythonComponent`` with a per-image rebuild and string routes (apart: importing ``runtime`` needs no kfp)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kfp import dsl  # noqa: F401  (kfp.dsl first: it is what kfp.components' imports need loaded)
from kfp.components import PythonComponent


def _is_string(value: Any) -> bool:
    """Whether a task argument is a plain string or a string pipeline parameter (a channel of type ``String``)."""
    return isinstance(value, str) or getattr(value, "channel_type", None) == "String"


class RuntimeComponent(PythonComponent):
    """KFP's ``PythonComponent`` with :meth:`with_image` and ``string_routes``.

    ``string_routes`` route a string given for an artifact input to a parameter input (the guide's
    ``train_model(dataset="x.jsonl")``); ``build(image, described)`` builds it for another image.
    """

    def __init__(self, built: Any, build: Callable[[str, bool], Any], string_routes: Mapping[str, str]) -> None:
        super().__init__(component_spec=built.component_spec, python_func=built.python_func)
        self._build = build
        self.string_routes = dict(string_routes)

    def with_image(self, image: str) -> Any:
        """This component built for ``image``, its parameters undescribed (the pipeline's describe them); cached.

        Descriptions would be repeated five times per task in the Argo Workflow (``benchmarks/workflow_size.py``).
        """
        return self._build(image, False)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for artifact_input, string_input in self.string_routes.items():
            if _is_string(kwargs.get(artifact_input)):
                kwargs[string_input] = kwargs.pop(artifact_input)
        return super().__call__(*args, **kwargs)
