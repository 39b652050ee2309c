"""The ``lm_eval`` component; imported on first use, so that the step's pod never imports the ``kfp.dsl`` decorators."""

from __future__ import annotations

from typing import Any

__all__ = ["lm_eval"]


def __getattr__(name: str) -> Any:
    if name == "lm_eval":
        from .component import lm_eval

        return lm_eval
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
