"""Compiling the fine-tuning pipelines with compile-time settings (used by ``kfp-finetune compile`` and the tests)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from pipelines.training.finetuning import PIPELINES
from pipelines.training.finetuning.definition import compile_pipeline
from pipelines.training.finetuning.settings import CompileSettings

#: Environment variables read when the components are decorated (see ``components/_common/runtime.py``).
IMAGE_VARIABLES = {"base_image": "KFP_FINETUNE_BASE_IMAGE", "runtime_image": "KFP_FINETUNE_RUNTIME_IMAGE"}


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


def set_image_settings(base_image: str | None = None, runtime_image: str | None = None) -> None:
    """Exports the image settings read when the components are decorated.

    Raises:
        RuntimeError: The components were already imported, so the images can no longer change.
    """
    requested = {key: value for key, value in (("base_image", base_image), ("runtime_image", runtime_image)) if value}
    if requested and "components._common.runtime" in sys.modules:
        raise RuntimeError("image settings must be set before the components are imported (use a fresh process)")
    for key, value in requested.items():
        os.environ[IMAGE_VARIABLES[key]] = value


def compile_named(
    name: str, output_path: Path, settings: CompileSettings | Mapping[str, Any] | None = None
) -> Path:
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
