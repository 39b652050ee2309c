"""Kubeflow Model Registry component: registers a fine-tuned model with its lineage."""

from .component import model_registry

__all__ = ["model_registry"]
