"""Pulls an ``oci://`` base model into ``<cache_root>/oci/sha256-<digest>/`` once per run, never half-written.

The model is a modelcar's ``models/...`` tar entries (whiteouts honoured, ``data`` filter) or an ORAS artifact's one
layer per file, named by its title annotation; ``pull.json`` records the digest and file sizes, so that a retried task
reuses a complete copy after checking them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from components.training.finetuning.oci import client
from components.training.finetuning.oci.client import OciModelError

TITLE_ANNOTATION = "org.opencontainers.image.title"
UNPACK_ANNOTATION = "io.deis.oras.content.unpack"
#: The directory of a modelcar image that holds the model (KServe's convention).
MODELCAR_DIR = "models"


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _safe_relative(name: str, source: str, what: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts:
        raise OciModelError(f"{source}: {what} {name!r} is not a safe relative path; refusing to write it")
    return path


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, name: str, linkname: str, dest: Path, source: str) -> None:
    try:
        tar.extract(member.replace(name=name, linkname=linkname, deep=False), dest, filter="data")
    except tarfile.FilterError as error:
        raise OciModelError(
            f"{source}: unsafe entry {member.name!r} in an image layer ({error}); refusing it"
        ) from None


def _within_models(name: str) -> str | None:
    parts = [part for part in PurePosixPath(name).parts if part not in ("/", ".")]
    if len(parts) < 2 or parts[0] != MODELCAR_DIR:
        return None
    return "/".join(parts[1:])


def extract_modelcar_layer(blob: Path, model_dir: Path, source: str) -> None:
    """Applies one image layer's ``models/...`` entries to ``model_dir`` (whiteouts remove earlier files)."""
    try:
        tar = tarfile.open(blob, mode="r:*")
    except tarfile.TarError as error:
        raise OciModelError(f"{source}: an image layer is not a (gzip) tar ({error}); push gzip or plain tar layers")
    with tar:
        for member in tar:
            relative = _within_models(member.name)
            if relative is None:
                continue
            path = PurePosixPath(relative)
            if path.name == ".wh..wh..opq":
                opaque = model_dir / path.parent
                for child in opaque.iterdir() if opaque.is_dir() else ():
                    _remove(child)
                continue
            if path.name.startswith(".wh."):
                removed = model_dir / _safe_relative(str(path.parent / path.name[4:]), source, "whiteout")
                _remove(removed)
                continue
            linkname = member.linkname
            if member.islnk():
                linkname = _within_models(member.linkname) or ""
                if not linkname:
                    continue  # a hard link to a file outside /models: nothing of the model
            _extract(tar, member, relative, linkname, model_dir, source)


def add_artifact_layer(blob: Path, descriptor: Mapping[str, Any], model_dir: Path, source: str) -> None:
    """Places an ORAS-style layer: its file under its title, or a directory tarball (``unpack``) unpacked."""
    annotations = descriptor.get("annotations") or {}
    title = _safe_relative(str(annotations.get(TITLE_ANNOTATION, "")), source, "layer title")
    if str(annotations.get(UNPACK_ANNOTATION, "")).lower() == "true":
        with tarfile.open(blob, mode="r:*") as tar:
            for member in tar:
                _extract(tar, member, member.name, member.linkname, model_dir, source)
        return
    target = model_dir / title
    target.parent.mkdir(parents=True, exist_ok=True)
    blob.replace(target)


def is_tar_layer(media_type: str) -> bool:
    """Whether a layer media type is an image filesystem layer (tar, possibly compressed)."""
    return "tar" in media_type or "rootfs.diff" in media_type


def locate_model(model_dir: Path, source: str, digest: str) -> Path:
    """The shallowest directory holding ``config.json`` (:class:`OciModelError` when there is none)."""
    files = [p for p in model_dir.rglob("*") if p.is_file()]
    if not files:
        raise OciModelError(
            f"{source}: image {digest} has no model files: no /{MODELCAR_DIR} directory in its layers and no "
            "ORAS file layers; build a modelcar with the model under /models (or push the files with oras)"
        )
    configs = sorted(model_dir.rglob("config.json"), key=lambda p: len(p.parts))
    if not configs:
        shown = ", ".join(sorted(p.relative_to(model_dir).as_posix() for p in files)[:10])
        raise OciModelError(
            f"{source}: image {digest} has files ({shown}) but no config.json: not a Hugging Face model directory"
        )
    return configs[0].parent


PULL_RECORD = "pull.json"


@dataclasses.dataclass(frozen=True)
class PulledModel:
    """A model pulled (or reused): its directory (``config.json`` inside), manifest digest and pinned URI."""

    path: Path
    digest: str
    uri: str
    reused: bool = False


def _verified_copy(final: Path, digest: str) -> Path | None:
    """The model path of a complete earlier pull of ``digest`` whose files all have their recorded sizes."""
    try:
        record = json.loads((final / PULL_RECORD).read_text())
    except (OSError, ValueError):
        return None
    if record.get("digest") != digest:
        return None
    for name, size in (record.get("files") or {}).items():
        path = final / name
        if not path.is_file() or path.stat().st_size != size:
            return None
    return final / record["model_dir"]


def _ca_bundle_file(ca_bundle: str, oci_root: Path) -> str:
    value = ca_bundle.strip()
    if not value:
        return ""
    if value.startswith("-----BEGIN"):
        path = oci_root / f".ca-{hashlib.sha256(value.encode()).hexdigest()[:16]}.pem"
        path.write_text(value + "\n")
        return str(path)
    if not Path(value).is_file():
        raise OciModelError(
            f"training_oci_ca_bundle={value!r}: no such file; give a PEM file path in the task or PEM text"
        )
    return value


def pull_model(
    uri: str,
    cache_root: Path,
    env: Mapping[str, str],
    *,
    insecure: bool = False,
    ca_bundle: str = "",
    log: Callable[[str], None] = print,
    source: str = "training_base_model",
) -> PulledModel:
    """Pulls ``uri`` into ``<cache_root>/oci/sha256-<hex>/`` (or reuses a verified complete copy).

    ``env`` holds the pull secret (never logged); ``insecure`` skips TLS verification and allows plain HTTP;
    ``ca_bundle`` is a PEM file path or PEM text; ``source`` is the parameter named in errors.

    Raises:
        OciModelError: Any problem, as one line naming the reference and what to fix.
    """
    ref = client.parse_oci_uri(uri, source)
    where = f"{source}={uri!r}"
    oci_root = Path(cache_root) / "oci"
    oci_root.mkdir(parents=True, exist_ok=True)
    for stale in oci_root.glob(".partial-*"):  # left by an attempt that was killed mid-pull
        shutil.rmtree(stale, ignore_errors=True)
    if ref.digest:
        reused = _verified_copy(oci_root / ref.digest.replace(":", "-"), ref.digest)
        if reused is not None:
            log(f"{source}: reusing the verified copy of {ref.uri()} at {reused}")
            return PulledModel(reused, ref.digest, ref.uri(), reused=True)
    connection = client.connect(ref, env, insecure, _ca_bundle_file(ca_bundle, oci_root), where)
    top, digest = client.fetch_manifest(connection, ref.reference)
    final = oci_root / digest.replace(":", "-")
    reused = _verified_copy(final, digest)
    if reused is not None:
        log(f"{source}: {ref.uri()} is {digest}; reusing the verified copy at {reused}")
        return PulledModel(reused, digest, ref.uri(digest), reused=True)
    shutil.rmtree(final, ignore_errors=True)  # incomplete or tampered: pull afresh
    started = time.monotonic()
    manifest = client.resolve_image_manifest(connection, top)
    staging = Path(tempfile.mkdtemp(dir=oci_root, prefix=f".partial-{digest.replace(':', '-')}-"))
    try:
        model_dir = staging / "model"
        model_dir.mkdir()
        descriptors = manifest.get("layers") or []
        log(f"{source}: pulling {ref.uri()} ({digest}, {len(descriptors)} layers) from {ref.registry}")
        for index, descriptor in enumerate(descriptors):
            annotations = descriptor.get("annotations") or {}
            media_type = str(descriptor.get("mediaType", ""))
            if not annotations.get(TITLE_ANNOTATION) and not is_tar_layer(media_type):
                continue  # neither an ORAS file nor an image layer (e.g. a signature blob)
            blob = staging / f".layer-{index}"
            client.download_blob(connection, descriptor, blob)
            if annotations.get(TITLE_ANNOTATION):
                add_artifact_layer(blob, descriptor, model_dir, where)
            else:
                extract_modelcar_layer(blob, model_dir, where)
            blob.unlink(missing_ok=True)
        located = locate_model(model_dir, where, digest)
        files = {p.relative_to(staging).as_posix(): p.stat().st_size for p in model_dir.rglob("*") if p.is_file()}
        record = {
            "digest": digest,
            "uri": ref.uri(digest),
            "source": ref.uri(),
            "model_dir": located.relative_to(staging).as_posix(),
            "files": files,
        }
        (staging / PULL_RECORD).write_text(json.dumps(record, indent=1, sort_keys=True))
        try:
            staging.rename(final)
        except OSError:  # another attempt completed the same digest first: keep its copy if it verifies
            if _verified_copy(final, digest) is None:
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    total = sum(files.values())
    log(f"{source}: pulled {len(files)} files ({total / 1e6:.1f} MB) in {time.monotonic() - started:.1f} s to {final}")
    return PulledModel(final / record["model_dir"], digest, ref.uri(digest))
