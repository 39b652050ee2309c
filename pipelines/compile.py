"""Compiling the fine-tuning pipelines with compile-time settings (used by ``kfp-finetune compile`` and the tests)."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from pipelines.training.finetuning import PIPELINES
from pipelines.training.finetuning.definition import compile_pipeline
from pipelines.training.finetuning.settings import CompileSettings


def pipeline_module(name: str) -> ModuleType:
    """Imports the module declaring pipeline ``name``.

    Raises:
        ValueError: ``name`` is not one of :data:`PIPELINES`, with the list of names.
    """
    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline {name!r}; choose one of {', '.join(PIPELINES)}")
    return importlib.import_module(PIPELINES[name])


def checked_in_path(name: str) -> Path:
    """Where the compiled YAML of pipeline ``name`` is checked in (beside its module)."""
    return Path(importlib.util.find_spec(PIPELINES[name]).origin).with_name("pipeline.yaml")


def compile_named(name: str, output_path: Path, settings: CompileSettings | Mapping[str, Any] | None = None) -> Path:
    """Compiles pipeline ``name`` to ``output_path``.

    Args:
        name: One of :data:`PIPELINES`.
        output_path: The YAML to write.
        settings: Complete settings, or overrides (e.g. CLI flags; ``None`` values ignored) of the pipeline module's
            constants and the ``KFP_FINETUNE_*`` variables.

    Returns:
        ``output_path``.
    """
    declaration = pipeline_module(name).DECLARATION
    if not isinstance(settings, CompileSettings):
        settings = declaration.settings(**dict(settings or {}))
    pipeline = declaration.build(settings)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    compile_pipeline(pipeline, str(output_path))
    return output_path
