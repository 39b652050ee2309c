"""``run_job`` as ``train_model`` calls it: the settings its request always passes, at the component's defaults.

``run_job`` has no default for a ``train_model`` parameter (issue 27: every default lives once, in the component
signature), so tests that are not about those settings take them from the signature here.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from components.training.finetuning import train_model
from components.training.finetuning.cluster.runner import JobResult
from components.training.finetuning.cluster.runner import run_job as _run_job

_PARAMETERS = inspect.signature(train_model.python_func).parameters
#: ``run_job``'s keywords that come from ``train_model``'s parameters, at the component's defaults.
COMPONENT_DEFAULTS: dict[str, Any] = {
    "cleanup_policy": _PARAMETERS["training_cleanup_policy"].default,
    "api_outage_tolerance_seconds": _PARAMETERS["training_api_outage_tolerance_seconds"].default,
}


def run_job(api_client: Any, manifest: Mapping[str, Any], **options: Any) -> JobResult:
    """``cluster.runner.run_job`` with :data:`COMPONENT_DEFAULTS` under ``options``."""
    return _run_job(api_client, manifest, **{**COMPONENT_DEFAULTS, **options})
