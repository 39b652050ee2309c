"""The ``lm_eval`` component: lm-eval benchmarks and the held-out split, as Metrics, a results JSON and a report.

``lm_eval`` (the KFP component) is imported on first use, so that importing a module of this package (as the step's
pod does, where kfp runs in its runtime mode) never imports the ``kfp.dsl`` decorators.
"""

from __future__ import annotations

from typing import Any

__all__ = ["lm_eval"]


def __getattr__(name: str) -> Any:
    if name == "lm_eval":
        from .component import lm_eval

        return lm_eval
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
