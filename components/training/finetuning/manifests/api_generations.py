"""The ``TrainJob`` API generations this project speaks, and reading which one a cluster serves (pure).

``trainer.kubeflow.org/v1alpha1`` kept its version while its spec changed (``runtimePatches``/``podTemplateOverrides``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from components.training.finetuning.manifests.spec import API_GROUP, API_VERSION

RUNTIME_PATCHES = "runtimePatches"
POD_TEMPLATE_OVERRIDES = "podTemplateOverrides"
GENERATIONS = (RUNTIME_PATCHES, POD_TEMPLATE_OVERRIDES)
#: Where each generation is served, for messages and doctor.
SERVED_BY = {
    RUNTIME_PATCHES: "Kubeflow Trainer >= 2.2, RHOAI >= 3.6",
    POD_TEMPLATE_OVERRIDES: "Kubeflow Trainer 2.0-2.1, RHOAI 3.3-3.5",
}
#: The OpenAPI v3 discovery path of the TrainJob's group-version.
OPENAPI_V3_PATH = f"/openapi/v3/apis/{API_GROUP}/{API_VERSION}"
#: The generation assumed when discovery cannot say: the guide's platform (RHOAI 3.3); a Strict create refuses a
#: wrong guess naming the field, and the launcher retries once with the other generation.
ASSUMED_GENERATION = POD_TEMPLATE_OVERRIDES


@dataclasses.dataclass(frozen=True)
class TrainJobApi:
    """What a cluster's ``TrainJob`` API serves; ``source``: ``OpenAPI v3 discovery``, or ``assumed: <why>``."""

    generation: str
    active_deadline: bool
    trainer_status: bool
    source: str = "OpenAPI v3 discovery"

    def __post_init__(self) -> None:
        if self.generation not in GENERATIONS:
            raise ValueError(f"TrainJobApi.generation={self.generation!r}: must be one of {list(GENERATIONS)}")

    @property
    def discovered(self) -> bool:
        """Whether the cluster said so (else the generation is a guess that a Strict create checks)."""
        return not self.source.startswith("assumed")

    def describe(self) -> str:
        """E.g. ``TrainJob API with spec.podTemplateOverrides (Kubeflow Trainer 2.0-2.1, RHOAI 3.3-3.5)``."""
        return f"TrainJob API with spec.{self.generation} ({SERVED_BY[self.generation]})"

    def consequences(self) -> str:
        """What follows for a run: the active deadline and the trainer status, one clause each."""
        deadline = (
            "spec.activeDeadlineSeconds served (the Trainer enforces training_timeout_seconds)"
            if self.active_deadline
            else "no spec.activeDeadlineSeconds (the launcher enforces training_timeout_seconds itself)"
        )
        status = (
            "status.trainerStatus served (progress reported to the Trainer's status server)"
            if self.trainer_status
            else "no status.trainerStatus (no status server: the pods report none)"
        )
        return f"{deadline}; {status}"


def assumed(generation: str, why: str) -> TrainJobApi:
    """The API a generation implies when discovery cannot say (``why`` names the reason)."""
    full = generation == RUNTIME_PATCHES
    return TrainJobApi(generation, active_deadline=full, trainer_status=full, source=f"assumed: {why}")


#: What the builders write when no cluster was asked (upstream Trainer 2.3, the project's reference).
TRAINER_2_3 = TrainJobApi(RUNTIME_PATCHES, active_deadline=True, trainer_status=True, source="assumed: Trainer 2.3")


def other_generation(api: TrainJobApi, why: str) -> TrainJobApi:
    """The other generation, assumed (after a Strict create rejected this one's fields)."""
    other = POD_TEMPLATE_OVERRIDES if api.generation == RUNTIME_PATCHES else RUNTIME_PATCHES
    return assumed(other, why)


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else ``{}`` (a hostile or broken answer may hold any JSON type anywhere)."""
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Any]:
    """``value`` when it is a JSON array, else ``[]``."""
    return value if isinstance(value, list) else []


def _schemas(openapi: Any) -> Mapping[str, Any]:
    return _mapping(_mapping(_mapping(openapi).get("components")).get("schemas"))


def trainjob_schema(openapi: Any) -> Mapping[str, Any] | None:
    """The ``TrainJob`` schema in an OpenAPI v3 document (by its GVK); anything not of the expected shape is skipped."""
    for schema in _schemas(openapi).values():
        for gvk in _items(_mapping(schema).get("x-kubernetes-group-version-kind")):
            gvk = _mapping(gvk)
            if gvk.get("kind") == "TrainJob" and gvk.get("group") == API_GROUP and gvk.get("version") == API_VERSION:
                return _mapping(schema)
    return None


def _resolved(openapi: Any, schema: Any) -> Mapping[str, Any]:
    """A schema, or the one its ``$ref`` (``#/components/schemas/<name>``, or in ``allOf``) points to."""
    if not isinstance(schema, Mapping):
        return {}
    refs = [_mapping(item).get("$ref") for item in _items(schema.get("allOf"))]
    ref = schema.get("$ref") or next((ref for ref in refs if ref), None)
    if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
        return _mapping(_schemas(openapi).get(ref.rsplit("/", 1)[-1]))
    return schema


def served_trainjob_api(openapi: Any) -> TrainJobApi | None:
    """The generation a ``trainer.kubeflow.org/v1alpha1`` OpenAPI v3 document serves, ``None`` when it cannot say."""
    schema = trainjob_schema(openapi)
    if schema is None:
        return None
    properties = _mapping(schema.get("properties"))
    spec = _mapping(_resolved(openapi, properties.get("spec")).get("properties"))
    status = _mapping(_resolved(openapi, properties.get("status")).get("properties"))
    generation = next((name for name in GENERATIONS if name in spec), None)  # (runtimePatches first)
    if generation is None:
        return None
    return TrainJobApi(
        generation, active_deadline="activeDeadlineSeconds" in spec, trainer_status="trainerStatus" in status
    )


def refuses_generation(generation: str, fields: list[str]) -> bool:
    """Whether a Strict refusal of ``fields`` names one of ``generation``'s own fields (any other says nothing)."""
    own = (f"spec.{generation}", *(("spec.activeDeadlineSeconds",) if generation == RUNTIME_PATCHES else ()))
    return any(field == name or field.startswith((f"{name}.", f"{name}[")) for field in fields for name in own)


def manifest_api(manifest: Mapping[str, Any]) -> str:
    """The API a manifest is written for, for errors: ``TrainJob API with spec.runtimePatches (...)`` or its kind."""
    spec = manifest.get("spec") or {}
    generation = next((name for name in GENERATIONS if name in spec), "") if manifest.get("kind") == "TrainJob" else ""
    return (
        assumed(generation, "").describe() if generation else f"{manifest.get('kind')} API {manifest.get('apiVersion')}"
    )
