"""The model in an image's layers.

A modelcar's ``models/...`` tar entries (whiteouts honoured, ``data`` filter), or an ORAS artifact's one layer per
file, named by its title annotation.
"""

from __future__ import annotations

import shutil
import tarfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

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
