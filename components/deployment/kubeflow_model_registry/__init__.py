"""Kubeflow Model Registry component: registers a fine-tuned model with its lineage."""

from __future__ import annotations

from typing import Any

__all__ = ["model_registry"]


def __getattr__(name: str) -> Any:
    """The KFP component, imported on first use.

    Importing a module of this package (as the step image's pod does, where kfp runs in its runtime mode) then never
    imports the ``kfp.dsl`` decorators.
    """
    if name == "model_registry":
        from .component import model_registry

        return model_registry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
