"""Kueue-safe manifests: no explicit empty or false values that a typed Go client would drop.

Kueue writes a job back from Go structs to unsuspend it: ``omitempty`` zero values vanish and the Trainer's CEL
immutability rule rejects the unsuspend (kubeflow/trainer#3888); a volume's source is kept even when ``{}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from components.training.finetuning.manifests.spec import JobSpec


def is_empty(value: Any) -> bool:
    """Whether a typed client would drop ``value`` from an ``omitempty`` field (``0`` is kept: pointer fields)."""
    return value is None or value is False or (isinstance(value, (str, list, tuple, dict)) and len(value) == 0)


def without_empty(value: Any) -> Any:
    """``value`` with every empty entry removed, recursively (dict entries and list items that end up empty)."""
    if isinstance(value, Mapping):
        cleaned = {key: without_empty(item) for key, item in value.items()}
        return {key: item for key, item in cleaned.items() if not is_empty(item)}
    if isinstance(value, (list, tuple)):
        items = [without_empty(item) for item in value]
        return [item for item in items if not is_empty(item)]
    return value


def set_fields(**fields: Any) -> dict[str, Any]:
    """The fields that hold a value, in order (an empty one is left out: a typed client would drop it)."""
    return {key: value for key, value in fields.items() if not is_empty(value)}


def container_env(spec: JobSpec) -> list[dict[str, Any]]:
    """The trainer container's ``env``: the literal variables (sorted by name), then the secret references."""
    env = [{"name": key, "value": value} if value else {"name": key} for key, value in sorted(spec.env.items())]
    return env + [item.to_env_var() for item in spec.secret_env]


def pod_settings(spec: JobSpec) -> dict[str, Any]:
    """The training pods' ``volumes``, ``tolerations``, ``nodeSelector`` and ``affinity`` (those set, Kueue-safe)."""
    return set_fields(
        volumes=[  # a source is kept even when empty: ``emptyDir: {}``
            {key: item if key == "name" else without_empty(item) for key, item in v.items()} for v in spec.volumes
        ],
        tolerations=without_empty(spec.tolerations),
        nodeSelector=dict(spec.node_selector),
        affinity=without_empty(spec.affinity),
    )


def pod_metadata(spec: JobSpec, labels: Mapping[str, str]) -> dict[str, Any]:
    """The pod template's ``labels`` (``spec.pod_labels`` and ``labels``) and ``annotations``, those not empty."""
    return set_fields(labels={**dict(spec.pod_labels), **labels}, annotations=dict(spec.pod_annotations))
