"""Kubeflow Model Registry component; ``model_registry`` is imported on first use (the pod never needs ``kfp.dsl``)."""

from __future__ import annotations

from typing import Any

__all__ = ["model_registry"]


def __getattr__(name: str) -> Any:
    if name == "model_registry":
        from .component import model_registry

        return model_registry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
