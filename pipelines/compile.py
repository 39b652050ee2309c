"""Compiling the fine-tuning pipelines with compile-time settings (used by ``kfp-finetune compile`` and the tests)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

from pipelines.training.finetuning import PIPELINES
from pipelines.training.finetuning.settings import CompileSettings, compile_overrides


def _module_name(name: str) -> str:
    """The module of pipeline ``name``; a :class:`ValueError` listing the names for an unknown one."""
    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline {name!r}; choose one of {', '.join(PIPELINES)}")
    return PIPELINES[name]


def pipeline_function(name: str, module: ModuleType | None = None) -> Any:
    """The ``@dsl.pipeline`` function ``<name>_pipeline`` of ``module`` (default: the imported one), or LookupError."""
    module = module or importlib.import_module(_module_name(name))
    attribute = f"{name.replace('-', '_')}_pipeline"
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise LookupError(f"{module.__file__} defines no pipeline function {attribute!r}") from None


def default_output_path(name: str) -> Path:
    """Where pipeline ``name`` compiles to by default: beside its module in a clone, else ``./<name>.yaml``."""
    if __name__.split(".")[0] != "pipelines":
        return Path(f"{name}.yaml")
    return Path(importlib.util.find_spec(PIPELINES[name]).origin).with_name("pipeline.yaml")


def build_pipeline(name: str, settings: CompileSettings | Mapping[str, Any] | None = None) -> Any:
    """Pipeline ``name`` built with ``settings`` (``None`` ignored): a fresh copy of its module, executed."""
    module_name = _module_name(name)
    spec = importlib.util.find_spec(module_name)
    fresh = importlib.util.spec_from_file_location(f"{module_name}__compiled", spec.origin)
    module = importlib.util.module_from_spec(fresh)

    def execute() -> None:
        sys.modules[module.__name__] = module
        try:
            with compile_overrides(settings):
                exec(fresh.loader.get_code(fresh.name), module.__dict__)
        finally:
            del sys.modules[module.__name__]

    # In a thread of its own: kfp's resource setters call inspect.stack(), slow on a deep stack (1.3 s, not 0.3 s,
    # once torch is imported); tests/test_pipelines.py::test_kfp_resource_setters_still_read_the_whole_stack.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(execute).result()
    return pipeline_function(name, module)


def compile_named(name: str, output_path: Path, settings: CompileSettings | Mapping[str, Any] | None = None) -> Path:
    """Compiles pipeline ``name`` with ``settings`` (as :func:`build_pipeline`) to ``output_path``; returns it."""
    from kfp import compiler

    pipeline = build_pipeline(name, settings)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    compiler.Compiler().compile(pipeline, str(output_path))
    return output_path
