"""``model_registry``'s arguments into one :class:`~.run.ModelRegistryRequest`; its result into the outputs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, NamedTuple

from components._common.arguments import artifact_path, require_arguments

from .lineage import ArtifactInfo
from .registration import ModelRegistryResult
from .run import ModelRegistryRequest
from .serving import ServingRequest

#: The input artifacts: each becomes an :class:`ArtifactInfo` under its own name.
ARTIFACTS = ("model", "eval_metrics", "train_metrics", "dataset", "eval_results")
#: The output artifact: the summary file, written by ``run_model_registration``, not part of the request.
OUTPUTS = ("summary",)


class Outputs(NamedTuple):
    """The component's return values (its ``NamedTuple`` outputs, in their order)."""

    status: str
    model_id: str
    version_id: str
    model_uri: str
    endpoint_url: str


def _artifact_info(name: str, artifact: Any) -> ArtifactInfo | None:
    path = artifact_path("model_registry", name, artifact)
    return None if artifact is None else ArtifactInfo(artifact.uri, path, dict(artifact.metadata))


def model_registry_request(arguments: Mapping[str, Any]) -> ModelRegistryRequest:
    """``model_registry``'s arguments (the wrapper's ``dict(locals())``) as its request.

    Parameters keep their names; input artifacts become :class:`ArtifactInfo` (``None`` when absent); the modelcar
    and deploy parameters form the request's ``serving`` group.

    Raises:
        TypeError: A name is missing or unknown, or an input artifact is not artifact-like.
    """
    serving = [field.name for field in dataclasses.fields(ServingRequest)]
    fields = [field.name for field in dataclasses.fields(ModelRegistryRequest) if field.name != "serving"]
    require_arguments("model_registry", arguments, [*fields, *serving, *OUTPUTS])
    values = {name: _artifact_info(name, arguments[name]) if name in ARTIFACTS else arguments[name] for name in fields}
    return ModelRegistryRequest(**values, serving=ServingRequest(**{name: arguments[name] for name in serving}))


def component_outputs(result: ModelRegistryResult) -> Outputs:
    """The component's outputs from the step's result."""
    return Outputs(result.status, result.model_id, result.version_id, result.uri, result.endpoint_url)
