"""Strict field validation: every create and patch this project sends asks the API server to refuse unknown fields.

By default a real API server prunes the fields a structural CRD schema does not know and only adds a ``Warning``
header (which the Python client ignores): a ``TrainJob`` written for another API generation would be stored without
its volumes, tolerations or node selector. With ``fieldValidation=Strict`` (:data:`FIELD_VALIDATION`, passed as
``field_validation=`` to every create and patch) the server answers ``400 BadRequest`` naming each field instead
(``strict decoding error: unknown field "spec.runtimePatches"``); :func:`unknown_fields` reads them back and
:func:`unknown_fields_message` turns them into one line naming the fields and the API the manifest was written for.
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
