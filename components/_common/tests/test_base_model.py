"""``base_model``: the base model downloaded once per run into the workspace, then found there without network."""

from __future__ import annotations

import os

import pytest

from components._common.base_model import (
    BaseModelError,
    model_cache_dir,
    needs_staging,
    stage_base_model,
    staged_base_model,
)
from components.training.finetuning.staging import stage_base_model as stage_for_the_pods
from components.training.finetuning.tests.test_model_manifest import plan_for


def test_what_is_staged_and_what_is_read_in_place(tmp_path):
    assert needs_staging("Qwen/Qwen2.5-1.5B-Instruct") and needs_staging("s3://b/m") and needs_staging("oci://q/r:1")
    assert not needs_staging(str(tmp_path)) and not needs_staging("pvc://claim/model") and not needs_staging("")
    assert stage_base_model(str(tmp_path), tmp_path / "ws", {}, parameter="model_source") is None


def _upload(client, bucket, model_dir):
    for path in model_dir.iterdir():
        client.upload_file(str(path), bucket, f"tiny/{path.name}")
    return f"s3://{bucket}/tiny"


def test_an_s3_model_is_downloaded_once_and_reused_by_the_next_step(tmp_path, s3_data_connection, tiny_model_dir):
    client, bucket = s3_data_connection
    uri = _upload(client, bucket, tiny_model_dir)
    workspace, logged = tmp_path / "ws", []
    first = stage_base_model(uri, workspace, os.environ, parameter="model_source", log=logged.append)
    assert first is not None and not first.reused
    assert first.path.parent == model_cache_dir(workspace)
    assert sorted(p.name for p in first.path.iterdir()) == sorted(p.name for p in tiny_model_dir.iterdir())
    assert first.facts == {"base_model_path": str(first.path)}
    for path in tiny_model_dir.iterdir():  # the next step needs no S3: the objects may be gone
        client.delete_object(Bucket=bucket, Key=f"tiny/{path.name}")
    again = staged_base_model(uri, workspace)
    assert again is not None and again.reused and again.path == first.path
    second = stage_base_model(uri, workspace, {}, parameter="training_base_model", log=logged.append)
    assert second.path == first.path and second.reused
    assert any("using the copy staged on the workspace" in line for line in logged)
    plan = plan_for(tmp_path, training_base_model=uri)  # train_model hands the copy to its pods
    assert stage_for_the_pods(plan, log=logged.append) == (str(first.path), {"base_model_path": str(first.path)})
    (first.path / "config.json").write_text("{}")  # a changed copy is not reused
    assert staged_base_model(uri, workspace) is None


def test_a_failed_download_is_one_line_naming_the_parameter(tmp_path, s3_data_connection):
    _, bucket = s3_data_connection
    uri = f"s3://{bucket}/none"
    with pytest.raises(BaseModelError, match=rf"^model_source='{uri}': cannot download it") as error:
        stage_base_model(uri, tmp_path / "ws", os.environ, parameter="model_source")
    assert "\n" not in str(error.value)
    assert staged_base_model(uri, tmp_path / "ws") is None
