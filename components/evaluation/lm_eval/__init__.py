"""The ``lm_eval`` component: lm-eval benchmarks and the held-out split, as Metrics, a results JSON and a report."""

from __future__ import annotations

from typing import Any

__all__ = ["lm_eval"]


def __getattr__(name: str) -> Any:
    """The KFP component, imported on first use.

    Importing a module of this package (as the step image's pod does, where kfp runs in its runtime mode) then never
    imports the ``kfp.dsl`` decorators.
    """
    if name == "lm_eval":
        from .component import lm_eval

        return lm_eval
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
