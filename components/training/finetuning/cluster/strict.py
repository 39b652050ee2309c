"""Strict field validation: every create and patch asks the API server to refuse unknown fields.

Without it a real API server silently prunes the fields its CRD schema does not know (a ``TrainJob`` written for
another API generation would lose its volumes); with it the server answers ``400`` naming each field, read back here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from components.training.finetuning.cluster.api import api_message, status_of
from components.training.finetuning.manifests.api_generations import manifest_api

#: The ``fieldValidation`` of every create and patch (``field_validation=`` of the official client's calls).
FIELD_VALIDATION = "Strict"
_UNKNOWN_FIELD = re.compile(r'unknown field \\?"([^"\\]+)\\?"')


def unknown_fields(error: Exception) -> list[str]:
    """The fields a Strict request was refused for (400/422 ``unknown field "..."``), ``[]`` for other errors."""
    if status_of(error) not in (400, 422):
        return []
    text = api_message(error)
    return list(dict.fromkeys(_UNKNOWN_FIELD.findall(text)))


def unknown_fields_message(what: str, fields: list[str], manifest: Mapping[str, Any]) -> str:
    """One line: what was refused, the unknown fields, the API generation the manifest was written for, the remedy."""
    return (
        f"{what} was rejected by the Kubernetes API (fieldValidation={FIELD_VALIDATION}): it does not serve field(s) "
        f"{', '.join(fields)} of the {manifest_api(manifest)} this step wrote, so nothing was stored. The cluster "
        "serves another API generation: `kfp-finetune doctor` names the one it serves"
    )
