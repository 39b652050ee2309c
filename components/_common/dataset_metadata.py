"""The dataset artifact's metadata: one versioned schema that ``dataset_download`` writes and later steps read."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

#: The schema version written by this release (raise it when a field changes) and the key that marks it.
DATASET_METADATA_VERSION = 1
VERSION_KEY = "dataset_metadata_version"
#: Metadata keys KFP itself may add to an artifact.
_KFP_KEYS = frozenset({"display_name"})
_TYPES: dict[str, Any] = {"str": str, "int": int}


class DatasetMetadataError(ValueError):
    """A dataset artifact's metadata is not this schema; the message names the artifact and the field."""


@dataclasses.dataclass(frozen=True)
class DatasetMetadata:
    """What ``dataset_download`` knows about one split it wrote.

    Attributes:
        dataset_revision: The Hub commit, the object's ETag/version, or the file's mtime.
        dataset_format: The input format the rows were converted from (``messages``, ``alpaca``, ...).
    """

    dataset_metadata_version: int
    dataset_uri: str
    dataset_revision: str
    dataset_sha256: str
    dataset_rows: int
    dataset_format: str
    dataset_split: str
    dataset_split_seed: int

    def to_metadata(self) -> dict[str, Any]:
        """The artifact metadata (a flat dict of the fields)."""
        return dataclasses.asdict(self)


def read_dataset_metadata(metadata: Mapping[str, Any] | None, label: str) -> DatasetMetadata | None:
    """Decodes a dataset artifact's metadata strictly, or ``None`` when another component produced it.

    Raises:
        DatasetMetadataError: Another version, or a missing, unknown or mistyped field.
    """
    values = {key: value for key, value in dict(metadata or {}).items() if key not in _KFP_KEYS}
    if VERSION_KEY not in values:
        return None
    if values[VERSION_KEY] != DATASET_METADATA_VERSION:
        raise DatasetMetadataError(
            f"{label} metadata {VERSION_KEY}={values[VERSION_KEY]!r}: this release reads version "
            f"{DATASET_METADATA_VERSION}; produce the dataset with the same kfp-finetune release"
        )
    fields = dataclasses.fields(DatasetMetadata)
    names = [field.name for field in fields]
    wrong = [f"unknown field {name!r}" for name in sorted(set(values) - set(names))]
    wrong += [f"missing field {name!r}" for name in names if name not in values]
    if wrong:
        raise DatasetMetadataError(
            f"{label} metadata: {wrong[0]} (dataset metadata version {DATASET_METADATA_VERSION} has {', '.join(names)})"
        )
    for field in fields:
        value = values[field.name]
        if field.type == "int" and isinstance(value, float) and value.is_integer():
            # a protobuf Struct's numbers come back as doubles
            values[field.name] = value = int(value)
        if isinstance(value, bool) or not isinstance(value, _TYPES[field.type]):
            raise DatasetMetadataError(f"{label} metadata: field {field.name}={value!r} must be of type {field.type}")
    return DatasetMetadata(**{name: values[name] for name in names})
