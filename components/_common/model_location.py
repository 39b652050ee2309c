"""Where a trained model's weights are: the ``Model`` artifact's manifest, written once and checked on every read.

On a cluster the weights stay on the workspace PVC and later steps read them in place (:func:`resolve_model_dir`).
Files up to :data:`HASHED_BYTES` are checked by SHA-256, larger ones by size and mtime.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The manifest's file name inside the ``Model`` artifact's directory.
MANIFEST_FILE = "kfp_finetune_model.json"
MANIFEST_VERSION = 1
HASHED_BYTES = 8 * 2**20
STORAGE_WORKSPACE = "workspace"
STORAGE_ARTIFACT = "artifact"


class ModelLocationError(ValueError):
    """The manifest is unreadable, or its weights are missing or changed; the message is one line."""


@dataclasses.dataclass(frozen=True)
class ModelManifest:
    """The content of :data:`MANIFEST_FILE`: ``files`` maps each relative path to its size and fingerprint."""

    version: int
    storage: str
    weights_path: str
    files: dict[str, dict[str, Any]]
    total_bytes: int
    digest: str
    in_artifact: bool

    def metadata(self) -> dict[str, Any]:
        """The manifest's facts as ``Model`` metadata (``weights_*``: the dashboard shows them)."""
        return {
            "weights_path": self.weights_path,
            "weights_storage": self.storage,
            "weights_bytes": self.total_bytes,
            "weights_digest": self.digest,
            "weights_in_artifact": self.in_artifact,
        }


def _fingerprint(path: Path) -> dict[str, Any]:
    stat = path.stat()
    if stat.st_size <= HASHED_BYTES:
        with path.open("rb") as handle:
            return {"size": stat.st_size, "sha256": hashlib.file_digest(handle, "sha256").hexdigest()}
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _files_digest(files: Mapping[str, Any]) -> str:
    canonical = json.dumps(files, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def build_manifest(weights_dir: Path, storage: str, in_artifact: bool) -> ModelManifest:
    """The manifest of the model in ``weights_dir`` (every file, symlinks not followed, with its fingerprint).

    Raises:
        ModelLocationError: ``weights_dir`` holds no file.
    """
    files = {
        path.relative_to(weights_dir).as_posix(): _fingerprint(path)
        for path in sorted(Path(weights_dir).rglob("*"))
        if path.is_file() and not path.is_symlink()
    }
    if not files:
        raise ModelLocationError(f"model weights: {weights_dir} holds no file to describe")
    return ModelManifest(
        version=MANIFEST_VERSION,
        storage=storage,
        weights_path=str(weights_dir) if storage == STORAGE_WORKSPACE else "",
        files=files,
        total_bytes=sum(int(facts["size"]) for facts in files.values()),
        digest=_files_digest(files),
        in_artifact=in_artifact,
    )


def write_manifest(artifact_dir: Path, manifest: ModelManifest) -> Path:
    """Writes ``manifest`` as :data:`MANIFEST_FILE` into ``artifact_dir`` (atomically); returns the file."""
    from components._common.files import write_text_atomically

    path = Path(artifact_dir) / MANIFEST_FILE
    write_text_atomically(path, json.dumps(dataclasses.asdict(manifest), indent=1, sort_keys=True) + "\n")
    return path


def read_manifest(artifact_path: str | os.PathLike) -> ModelManifest | None:
    """The manifest in a ``Model`` artifact's directory, or ``None`` (the artifact holds the files).

    Raises:
        ModelLocationError: The manifest is there but unreadable, of another version or inconsistent.
    """
    path = Path(artifact_path) / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        manifest = ModelManifest(**{field.name: raw[field.name] for field in dataclasses.fields(ModelManifest)})
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ModelLocationError(f"model manifest {path}: unreadable ({error}); re-run train_model") from None
    if manifest.version != MANIFEST_VERSION or manifest.storage not in (STORAGE_WORKSPACE, STORAGE_ARTIFACT):
        raise ModelLocationError(
            f"model manifest {path}: version {manifest.version!r}, storage {manifest.storage!r}: expected version "
            f"{MANIFEST_VERSION} and storage {STORAGE_WORKSPACE!r} or {STORAGE_ARTIFACT!r}"
        )
    if _files_digest(manifest.files) != manifest.digest:
        raise ModelLocationError(f"model manifest {path}: its file list does not match its digest {manifest.digest}")
    return manifest


def _first_difference(directory: Path, files: Mapping[str, Mapping[str, Any]], check_times: bool) -> str:
    """What differs between ``directory`` and the manifest's ``files`` ("" when nothing does)."""
    for name, expected in files.items():
        path = directory / name
        if not path.is_file():
            return f"{name} is missing"
        stat = path.stat()
        if stat.st_size != expected["size"]:
            return f"{name} has {stat.st_size} bytes, the manifest {expected['size']}"
        if "sha256" in expected and _fingerprint(path).get("sha256") != expected["sha256"]:
            return f"{name} changed (its SHA-256 differs)"
        if check_times and "mtime_ns" in expected and stat.st_mtime_ns != expected["mtime_ns"]:
            return f"{name} was rewritten after train_model recorded it (modification time differs)"
    return ""


def resolve_model_dir(artifact_path: str | os.PathLike) -> Path:
    """The model's directory: the workspace one the manifest names, else the artifact's copy, else the artifact.

    Raises:
        ModelLocationError: One line: the weights are missing or changed, or the workspace is not mounted here.
    """
    artifact = Path(artifact_path)
    manifest = read_manifest(artifact)
    if manifest is None:
        return artifact
    if manifest.storage == STORAGE_ARTIFACT:
        problem = _first_difference(artifact, manifest.files, check_times=False)
        if problem:
            raise ModelLocationError(f"model artifact {artifact}: {problem}; re-run train_model")
        return artifact
    weights = Path(manifest.weights_path)
    if not weights.is_dir() and manifest.in_artifact:
        problem = _first_difference(artifact, manifest.files, check_times=False)
        if not problem:
            return artifact
    if not weights.is_dir():
        raise ModelLocationError(
            f"model weights {weights} (manifest {artifact / MANIFEST_FILE}): not found here; the step must mount the "
            "run's workspace (pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER), and the workspace of a finished run is gone "
            "(register a modelcar_uri or s3_upload_prefix, or train with training_copy_model_to_artifact=True)"
        )
    problem = _first_difference(weights, manifest.files, check_times=True)
    if problem:
        raise ModelLocationError(
            f"model weights {weights}: {problem} (manifest digest {manifest.digest}); refusing to use changed weights, "
            "re-run train_model"
        )
    return weights
