"""A compatibility shim for ``kfp.local`` 2.15: unconnected optional input artifacts.

The real KFP backend runs a task whose optional ``Input[...] = None`` artifact is left unconnected (the function gets
``None``); ``kfp.local`` 2.15 instead raises ``KeyError`` while building the executor input, inside a pipeline DAG.
:func:`install` wraps that one function so such inputs are left out, as the backend does. It is applied only for
local runs (the demo and the test fixture) and never changes compiled YAML.
"""

from __future__ import annotations

import functools
from typing import Any

_MARKER = "_kfp_finetune_optional_artifacts"


def install() -> None:
    """Makes ``kfp.local`` leave unconnected optional input artifacts out (idempotent)."""
    from kfp.local import executor_input_utils

    original = executor_input_utils.construct_executor_input
    if getattr(original, _MARKER, False):
        return

    @functools.wraps(original)
    def construct_executor_input(component_spec: Any, arguments: dict, *args: Any, **kwargs: Any) -> Any:
        artifacts = component_spec.input_definitions.artifacts
        missing = [name for name, spec in artifacts.items() if name not in arguments and spec.is_optional]
        if missing:
            component_spec = type(component_spec).FromString(component_spec.SerializeToString())
            for name in missing:
                del component_spec.input_definitions.artifacts[name]
        return original(component_spec, arguments, *args, **kwargs)

    setattr(construct_executor_input, _MARKER, True)
    executor_input_utils.construct_executor_input = construct_executor_input
