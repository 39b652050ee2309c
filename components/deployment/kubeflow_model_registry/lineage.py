"""Lineage recorded on the model version as custom properties (README: *Lineage*): scalars only, no credentials."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from components._common.dataset_metadata import read_dataset_metadata

#: Keys whose values are never recorded (matched case-insensitively anywhere in the key).
SECRET_KEY_PATTERN = re.compile(r"token|secret|password|passwd|credential|access_key|api_key|private_key", re.I)
_INT32 = (-(2**31), 2**31 - 1)
#: Longest string value recorded (longer ones are cut, with a marker).
MAX_STRING_CHARS = 4000
#: lm_eval's results metadata recorded as ``eval.<key>`` (the evaluation's lineage: lm_eval's ``remote_evaluation.py``).
EVALUATION_LINEAGE = ("eval_backend", "evaluated_model_location", "evaluated_model_digest", "hardware_profile")

#: Model artifact metadata copied as-is (key in the metadata -> custom property name).
MODEL_METADATA_KEYS = {
    "base_model": "base_model",
    "base_model_digest": "base_model_digest",  # oci:// base models: the manifest digest the reference resolved to
    "base_model_resolved": "base_model_resolved_uri",  # ... and the reference pinned to it (oci://...@sha256:...)
    "algorithm": "algorithm",
    "job_name": "job_name",  # the TrainJob's or PyTorchJob's name
    "job_kind": "job_kind",  # TrainJob or PyTorchJob
    "trainjob_name": "trainjob_name",  # models trained before the job kinds got one name
    "backend": "training_backend",
    "checkpoint_path": "checkpoint_path",
    "library_version": "training_library_version",
    "training_library": "training_library",
    "model_format": "model_files_format",
    "lora_weights": "lora_weights",
}


@dataclasses.dataclass(frozen=True)
class ArtifactInfo:
    """An input artifact without KFP types: URI (remote, or a path under ``kfp.local``), local path, metadata."""

    uri: str
    path: str
    metadata: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """The pipeline run that produced the model: its id, name and namespace ("" when unknown)."""

    run_id: str = ""
    run_name: str = ""
    namespace: str = ""


def known_run_value(value: str) -> str:
    """``value`` unless it is empty or an unresolved KFP placeholder such as ``{{$.pipeline_job_uuid}}``."""
    value = (value or "").strip()
    return "" if value.startswith("{{$") else value


def scalar_property(value: Any) -> bool | int | float | str | None:
    """A JSON-like value as a custom-property scalar: big ints, non-finite floats and containers as (JSON) text."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if _INT32[0] <= value <= _INT32[1] else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    if len(text) > MAX_STRING_CHARS:
        text = text[: MAX_STRING_CHARS - 14] + "...(truncated)"
    return text


def flatten_properties(prefix: str, values: Mapping[str, Any]) -> dict[str, bool | int | float | str]:
    """``{"<prefix>.<key>[.<subkey>]": scalar}`` of a (nested) mapping, credential-like keys dropped."""
    flat: dict[str, bool | int | float | str] = {}
    for key, value in values.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if SECRET_KEY_PATTERN.search(str(key)):
            continue
        if isinstance(value, Mapping):
            flat.update(flatten_properties(name, value))
            continue
        scalar = scalar_property(value)
        if scalar is not None:
            flat[name] = scalar
    return flat


def _hyperparameters(model_metadata: Mapping[str, Any]) -> Mapping[str, Any]:
    value = model_metadata.get("hyperparameters") or {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(
                f"model metadata 'hyperparameters' must be a mapping or a JSON object string, got {value[:80]!r}"
            ) from None
    if not isinstance(value, Mapping):
        raise ValueError(f"model metadata 'hyperparameters' must be a mapping, got {type(value).__name__}")
    return value


def _dataset_properties(model: ArtifactInfo, dataset: ArtifactInfo | None) -> dict[str, Any]:
    """Dataset lineage under the names of :mod:`components._common.dataset_metadata` (README: *Lineage*)."""
    described = read_dataset_metadata(dataset.metadata, "model_registry input dataset") if dataset else None
    props: dict[str, Any] = {"dataset_artifact_uri": dataset.uri} if dataset and dataset.uri else {}
    if described is not None:
        props.update(
            dataset_uri=described.dataset_uri,
            dataset_revision=described.dataset_revision,
            dataset_sha256=described.dataset_sha256,
            dataset_rows=described.dataset_rows,
        )
        return props
    for name in ("dataset_uri", "dataset_sha256"):  # what train_model writes into the model's metadata
        if model.metadata.get(name) not in (None, ""):
            props[name] = model.metadata[name]
    if "dataset_uri" not in props and dataset and dataset.uri:
        props["dataset_uri"] = dataset.uri
    return props


def lineage_properties(
    model: ArtifactInfo,
    run: RunInfo,
    *,
    dataset: ArtifactInfo | None = None,
    train_metrics: Mapping[str, Any] | None = None,
    eval_metrics: Mapping[str, Any] | None = None,
    library_versions: Mapping[str, str] | None = None,
) -> dict[str, bool | int | float | str]:
    """The custom properties of a model version: where it came from and how good it is, as flat scalars.

    Raises:
        ValueError: ``hyperparameters`` in the model metadata is not a mapping.
    """
    run_values = {"pipeline_run_id": run.run_id, "pipeline_run_name": run.run_name, "pipeline_namespace": run.namespace}
    recorded = {name: model.metadata.get(key) for key, name in MODEL_METADATA_KEYS.items()}
    props = {name: value for name, value in {**run_values, **recorded}.items() if value not in (None, "")}
    props.update(model_artifact_uri=model.uri, **_dataset_properties(model, dataset))
    flat = flatten_properties("", props)
    flat.update(flatten_properties("hyperparameter", _hyperparameters(model.metadata)))
    flat.update(flatten_properties("train", train_metrics or {}))
    flat.update(flatten_properties("eval", eval_metrics or {}))
    flat.update(flatten_properties("library_version", library_versions or {}))
    return flat


def metric_values(metrics: ArtifactInfo | None) -> dict[str, Any]:
    """The metrics logged on a ``Metrics`` artifact (its metadata), minus KFP's bookkeeping keys."""
    if metrics is None:
        return {}
    return {k: v for k, v in metrics.metadata.items() if not str(k).startswith("display_name")}


def evaluation_values(
    eval_metrics: ArtifactInfo | None, eval_results: ArtifactInfo | None, comparison: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The ``eval.*`` values: metrics, the finite ``<name>/base`` and ``<name>/delta`` compared, verdict, lineage."""
    values = metric_values(eval_metrics)
    for name, record in comparison.items():
        for key in ("base", "delta"):
            number = record.get(key)
            if isinstance(number, (int, float)) and not isinstance(number, bool) and math.isfinite(number):
                values.setdefault(f"{name}/{key}", float(number))
    metadata = eval_results.metadata if eval_results is not None else {}
    for key in ("verdict", *EVALUATION_LINEAGE):
        if metadata.get(key):
            values.setdefault(key, metadata[key])
    return values
