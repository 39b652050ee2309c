"""Kubeflow Model Registry component: registers a fine-tuned model with its lineage.

``model_registry`` (the KFP component) is imported on first use, so that importing a module of this package (as the
step's pod does, where kfp runs in its runtime mode) never imports the ``kfp.dsl`` decorators.
"""

from __future__ import annotations

from typing import Any

__all__ = ["model_registry"]


def __getattr__(name: str) -> Any:
    if name == "model_registry":
        from .component import model_registry

        return model_registry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
