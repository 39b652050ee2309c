"""Reusable Kubeflow Pipelines components for fine-tuning LLMs.

Import a component from its category, e.g. ``from components.training.finetuning import train_model``.
"""
