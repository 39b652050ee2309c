"""``model_location``: the ``Model`` artifact's manifest of weights on the workspace, resolved and checked."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from components._common.model_location import (
    HASHED_BYTES,
    MANIFEST_FILE,
    STORAGE_ARTIFACT,
    STORAGE_WORKSPACE,
    ModelLocationError,
    build_manifest,
    read_manifest,
    resolve_model_dir,
    write_manifest,
)


def _checkpoint(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text('{"model_type": "llama"}')
    (root / "tokenizer.json").write_text("{}")
    (root / "model.safetensors").write_bytes(b"\0" * (HASHED_BYTES + 1))  # fingerprinted by size and time
    return root


def _on_workspace(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A checkpoint on the workspace and an artifact holding only its manifest: ``(weights, artifact, manifest)``."""
    weights = _checkpoint(tmp_path / "ws" / "final")
    artifact = tmp_path / "artifact"
    return weights, artifact, write_manifest(artifact, build_manifest(weights, STORAGE_WORKSPACE, in_artifact=False))


def test_a_workspace_manifest_resolves_to_the_weights_in_place(tmp_path):
    weights = _checkpoint(tmp_path / "ws" / "train_model" / "run" / "final")
    artifact = tmp_path / "artifact"
    manifest = build_manifest(weights, STORAGE_WORKSPACE, in_artifact=False)
    write_manifest(artifact, manifest)
    assert [p.name for p in artifact.iterdir()] == [MANIFEST_FILE]  # the artifact holds no weight file
    assert (artifact / MANIFEST_FILE).stat().st_size < 4096
    assert resolve_model_dir(artifact) == weights
    assert manifest.total_bytes == sum(p.stat().st_size for p in weights.iterdir())
    assert manifest.metadata()["weights_path"] == str(weights) and manifest.digest.startswith("sha256:")
    assert read_manifest(artifact) == manifest


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda w: (w / "model.safetensors").unlink(), "model.safetensors is missing"),
        (lambda w: (w / "model.safetensors").write_bytes(b"\0" * 10), "model.safetensors has 10 bytes"),
        (lambda w: (w / "config.json").write_text('{"model_type": "llamb"}'), "config.json changed"),
        (lambda w: os.utime(w / "model.safetensors", ns=(1, 1)), "model.safetensors was rewritten"),
    ],
)
def test_missing_or_changed_weights_are_refused_in_one_line(tmp_path, change, reason):
    weights, artifact, _ = _on_workspace(tmp_path)
    change(weights)
    with pytest.raises(ModelLocationError, match=reason) as error:
        resolve_model_dir(artifact)
    assert "\n" not in str(error.value)


def test_weights_gone_with_the_workspace_name_the_ways_to_keep_them(tmp_path):
    weights, artifact, _ = _on_workspace(tmp_path)
    shutil.rmtree(weights)
    with pytest.raises(ModelLocationError, match="not found here.*modelcar_uri or s3_upload_prefix.*copy_model"):
        resolve_model_dir(artifact)


def test_the_opt_in_copy_is_used_once_the_workspace_is_gone(tmp_path):
    weights = _checkpoint(tmp_path / "ws" / "final")
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    for path in weights.iterdir():
        (artifact / path.name).write_bytes(path.read_bytes())
    write_manifest(artifact, build_manifest(weights, STORAGE_WORKSPACE, in_artifact=True))
    assert resolve_model_dir(artifact) == weights  # read in place while the workspace lives
    shutil.rmtree(weights)
    assert resolve_model_dir(artifact) == artifact


def test_an_artifact_without_manifest_holds_the_files_itself(tmp_path):
    model = _checkpoint(tmp_path / "model")
    assert resolve_model_dir(model) == model
    write_manifest(model, build_manifest(model, STORAGE_ARTIFACT, in_artifact=True))
    assert resolve_model_dir(model) == model
    (model / "tokenizer.json").write_text("[]")  # same size, other content
    with pytest.raises(ModelLocationError, match="tokenizer.json changed"):
        resolve_model_dir(model)


def test_a_tampered_manifest_is_refused(tmp_path):
    _, artifact, path = _on_workspace(tmp_path)
    raw = json.loads(path.read_text())
    raw["files"]["model.safetensors"]["size"] = 1
    path.write_text(json.dumps(raw))
    with pytest.raises(ModelLocationError, match="does not match its digest"):
        resolve_model_dir(artifact)
    path.write_text("{not json")
    with pytest.raises(ModelLocationError, match="unreadable"):
        resolve_model_dir(artifact)
