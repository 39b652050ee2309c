"""The class of this project's components: KFP's own ``PythonComponent`` with a per-image rebuild and string routes.

Kept apart from :mod:`components._common.runtime` so that the runtime bundler imports no kfp until it builds a
component (kfp's modules import each other in an order that only ``kfp.dsl`` first gets right).
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
    """A component of this project: KFP's own ``PythonComponent`` (public class and constructor) with two additions.

    * :meth:`with_image`: the same function built for another step image (the image and the install list are part
      of the executor's command, so they cannot be swapped on a built component);
    * ``string_routes``: an artifact input that also takes a string, routed to a parameter input
      (``train_model(dataset="path/to/data.jsonl")``, the RHOAI guide's form, and ``train_model(dataset=task.output)``
      both work).

    ``built`` is what ``kfp.dsl.component`` built; ``build(image, prebuilt)`` builds it for another image.
    """

    def __init__(self, built: Any, build: Callable[[str, bool], Any], string_routes: Mapping[str, str]) -> None:
        super().__init__(component_spec=built.component_spec, python_func=built.python_func)
        self._build = build
        self.string_routes = dict(string_routes)

    def with_image(self, image: str, prebuilt: bool = False) -> Any:
        """This component built for ``image`` (``prebuilt``: a complete runtime image); cached per image."""
        return self._build(image, prebuilt)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for artifact_input, string_input in self.string_routes.items():
            if _is_string(kwargs.get(artifact_input)):
                kwargs[string_input] = kwargs.pop(artifact_input)
        return super().__call__(*args, **kwargs)
