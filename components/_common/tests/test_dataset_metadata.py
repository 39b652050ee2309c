"""The dataset artifact's metadata: one schema, written by dataset_download, decoded strictly by its readers."""

from __future__ import annotations

import pytest

from components._common.dataset_metadata import (
    DATASET_METADATA_VERSION,
    DatasetMetadata,
    DatasetMetadataError,
    read_dataset_metadata,
)

WRITTEN = DatasetMetadata(DATASET_METADATA_VERSION, "org/chat@main", "abc", "ef" * 32, 40, "sharegpt", "train", 7)


def test_round_trip_and_kfp_doubles():
    metadata = WRITTEN.to_metadata()
    assert read_dataset_metadata(metadata, "x") == WRITTEN
    # KFP keeps artifact metadata in a protobuf Struct: ints come back as doubles; its display_name is ignored.
    stored = {**metadata, "dataset_rows": 40.0, "dataset_split_seed": 7.0, "dataset_metadata_version": 1.0}
    assert read_dataset_metadata({**stored, "display_name": "train"}, "x") == WRITTEN


def test_a_dataset_from_another_component_has_no_schema():
    assert read_dataset_metadata({"source_uri": "x", "rows": 3}, "x") is None
    assert read_dataset_metadata(None, "x") is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"dataset_metadata_version": 2}, "dataset_metadata_version=2: this release reads version 1"),
        ({"source_uri": "old-name"}, "unknown field 'source_uri'"),
        ({"dataset_rows": "40"}, "field dataset_rows='40' must be of type int"),
        ({"dataset_rows": 40.5}, "field dataset_rows=40.5 must be of type int"),
        ({"dataset_uri": None}, "field dataset_uri=None must be of type str"),
    ],
)
def test_a_broken_schema_fails_naming_the_artifact_and_the_field(change, message):
    with pytest.raises(DatasetMetadataError, match=message) as error:
        read_dataset_metadata({**WRITTEN.to_metadata(), **change}, "train_model input dataset")
    assert str(error.value).startswith("train_model input dataset metadata")


def test_a_missing_field_is_named():
    metadata = WRITTEN.to_metadata()
    del metadata["dataset_sha256"]
    with pytest.raises(DatasetMetadataError, match="missing field 'dataset_sha256'"):
        read_dataset_metadata(metadata, "lineage")
