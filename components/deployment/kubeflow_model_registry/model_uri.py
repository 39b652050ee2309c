"""The URI registered for serving (where the model really is, never a path in this container) and the S3 upload."""

from __future__ import annotations

import dataclasses
import os
import posixpath
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from components._common.masking import mask_url
from components._common.model_location import STORAGE_WORKSPACE, read_manifest, resolve_model_dir

from .lineage import ArtifactInfo

#: Storage schemes a KServe / OpenShift AI serving runtime can load a model from.
SERVING_SCHEMES = ("s3", "pvc", "oci", "gs", "hf", "https", "http")
#: Where KFP mounts the pipeline workspace PVC in a task (``dsl.WORKSPACE_PATH_PLACEHOLDER``).
KFP_WORKSPACE_MOUNT_PATH = "/kfp-workspace"
#: Env vars naming the PVC that holds the model and where it is mounted in the training pod.
PVC_CLAIM_ENV = "MODEL_PVC_CLAIM"
PVC_MOUNT_PATH_ENV = "MODEL_PVC_MOUNT_PATH"
#: KFP's name of the run's workspace claim, ``<workflow name>-kfp-workspace`` (argocompiler ``workspaceVolumeName``).
WORKSPACE_CLAIM_SUFFIX = "-kfp-workspace"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
_CLAIM = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


@dataclasses.dataclass(frozen=True)
class ServingUri:
    """The URI to register (``s3://``, ``pvc://``, ``oci://``...) and where it came from (for the log and summary)."""

    uri: str
    source: str


def parse_s3_uri(s3_uri: str, parameter: str = "s3_upload_prefix") -> tuple[str, str]:
    """Splits ``s3://bucket/prefix`` into bucket and key prefix (without surrounding slashes).

    Raises:
        ValueError: Not ``s3://``, an invalid bucket name, or no prefix (uploading to a bucket's root is refused).
    """
    parts = urlsplit(s3_uri.strip())
    prefix = parts.path.strip("/")
    if parts.scheme != "s3" or not parts.netloc:
        raise ValueError(f"{parameter}={s3_uri!r}: expected s3://<bucket>/<prefix>")
    if not _BUCKET.match(parts.netloc):
        raise ValueError(f"{parameter}={s3_uri!r}: {parts.netloc!r} is not a valid S3 bucket name")
    if not prefix or ".." in prefix.split("/"):
        raise ValueError(
            f"{parameter}={s3_uri!r}: give a key prefix without '..' (e.g. s3://bucket/models/my-model/v1); "
            "uploading to the root of a bucket is refused"
        )
    return parts.netloc, prefix


def validate_serving_uri(uri: str, parameter: str) -> str:
    """``uri`` stripped, checked to be a storage URI a serving runtime can use (``parameter``: named in errors).

    Raises:
        ValueError: A local path, an unknown scheme, or a malformed ``pvc://``/``s3://`` URI.
    """
    uri = uri.strip()
    parts = urlsplit(uri)
    if parts.username is not None or parts.password is not None or mask_url(uri) != uri:
        raise ValueError(
            f"{parameter}={mask_url(_without_userinfo(uri))!r}: carries credentials (user info or a signed query); "
            "a registered URI is stored and shown in plain text: give the location without them (the serving "
            "runtime reads storage credentials from the data connection named by storage_key)"
        )
    if parts.scheme not in SERVING_SCHEMES:
        raise ValueError(
            f"{parameter}={uri!r}: not a serving URI; expected one of "
            + ", ".join(f"{s}://" for s in SERVING_SCHEMES)
            + " (a path inside the pipeline's container cannot be served)"
        )
    if not parts.netloc:
        raise ValueError(f"{parameter}={uri!r}: missing the {'claim' if parts.scheme == 'pvc' else 'host/bucket'}")
    if parts.scheme == "pvc" and not _CLAIM.match(parts.netloc):
        raise ValueError(f"{parameter}={uri!r}: {parts.netloc!r} is not a valid PVC name")
    if parts.scheme == "s3":
        parse_s3_uri(uri, parameter)
    return uri


def _without_userinfo(uri: str) -> str:
    """``uri`` with any ``user:password@`` replaced by ``***@`` (shown in errors)."""
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    return parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]).geturl()


def pvc_uri(checkpoint_path: str, claim: str, mount_path: str, where: str) -> str:
    """``checkpoint_path`` on PVC ``claim`` mounted at ``mount_path`` as ``pvc://<claim>/<path in the claim>``.

    Raises:
        ValueError: The path is not absolute, escapes the mount, or the claim name is invalid.
    """
    path = posixpath.normpath(checkpoint_path)
    mount = posixpath.normpath(mount_path)
    if not posixpath.isabs(path) or ".." in checkpoint_path.split("/"):
        raise ValueError(f"{where}={checkpoint_path!r}: expected an absolute path without '..'")
    if not _CLAIM.match(claim):
        raise ValueError(f"PVC claim {claim!r} is not a valid PVC name")
    relative = posixpath.relpath(path, mount)
    if relative == "." or relative.startswith(".."):
        raise ValueError(
            f"{where}={checkpoint_path!r} is not inside the PVC mount path {mount_path!r}; set pvc_mount_path in the "
            f"model metadata or ${PVC_MOUNT_PATH_ENV}"
        )
    return f"pvc://{claim}/{relative}"


def run_workspace_refusal(where: str) -> str:
    """The one line refusing to register ``where``, a location on the run's workspace PVC, which the run deletes."""
    return (
        f"{where} is on the run's workspace PVC, which KFP deletes when the run succeeds (Argo's default "
        "volumeClaimGC OnWorkflowSuccess; README: *What outlives the run*): registering it would point the registry "
        "at nothing; set modelcar_uri (an oci://...@sha256 image) or s3_upload_prefix (one streamed copy to S3), "
        "or give model_uri=pvc://<your claim>/<path> for a copy on a claim of your own"
    )


def _refuse_run_workspace(uri: str, parameter: str) -> str:
    """``uri``, unless it is a ``pvc://`` of a run's workspace claim (refused: :func:`run_workspace_refusal`)."""
    parts = urlsplit(uri)
    if parts.scheme == "pvc" and parts.netloc.endswith(WORKSPACE_CLAIM_SUFFIX):
        raise ValueError(run_workspace_refusal(f"{parameter}={uri!r}"))
    return uri


def weights_in_artifact(model: ArtifactInfo) -> bool:
    """Whether the ``Model`` artifact holds the model files (no manifest, or one with the opt-in copy)."""
    manifest = read_manifest(model.path) if model.path else None
    if manifest is not None:
        return manifest.in_artifact
    return model.metadata.get("weights_in_artifact", True) is not False


def resolve_serving_uri(
    model: ArtifactInfo,
    model_uri: str = "",
    s3_upload_uri: str = "",
    environ: Mapping[str, str] | None = None,
) -> ServingUri:
    """Chooses the URI to register, in the order of the README's *Which URI is registered*.

    Raises:
        ValueError: No serving URI can be derived, or the one given/derived is not one.
    """
    environ = os.environ if environ is None else environ
    if model_uri.strip():
        uri = _refuse_run_workspace(validate_serving_uri(model_uri, "model_uri"), "model_uri")
        return ServingUri(uri, "parameter model_uri")
    if s3_upload_uri:
        return ServingUri(validate_serving_uri(s3_upload_uri, "s3_upload_prefix"), "S3 upload (s3_upload_prefix)")
    checkpoint = str(model.metadata.get("checkpoint_path") or "").strip()
    if urlsplit(checkpoint).scheme in SERVING_SCHEMES:
        where = "model metadata checkpoint_path"
        return ServingUri(_refuse_run_workspace(validate_serving_uri(checkpoint, where), where), where)
    on_workspace = str(model.metadata.get("weights_storage") or "") == STORAGE_WORKSPACE
    if on_workspace and not weights_in_artifact(model):
        raise ValueError(run_workspace_refusal(f"the model (weights at {checkpoint or '?'})"))
    claim = str(model.metadata.get("pvc_claim") or environ.get(PVC_CLAIM_ENV, "")).strip()
    if checkpoint.startswith("/") and claim:
        mount = str(
            model.metadata.get("pvc_mount_path") or environ.get(PVC_MOUNT_PATH_ENV, "") or KFP_WORKSPACE_MOUNT_PATH
        )
        uri = pvc_uri(checkpoint, claim, mount, "model metadata checkpoint_path")
        uri = _refuse_run_workspace(uri, f"the URI derived from PVC {claim}")
        return ServingUri(uri, f"model metadata checkpoint_path on PVC {claim} (mounted at {mount})")
    if urlsplit(model.uri).scheme in ("s3", "gs") and weights_in_artifact(model):
        return ServingUri(validate_serving_uri(model.uri, "model artifact uri"), "model artifact uri")
    if not checkpoint:
        why = "its metadata has no checkpoint_path"
    elif not checkpoint.startswith("/"):
        why = f"model metadata checkpoint_path={checkpoint!r} is not served storage either"
    else:
        why = (
            f"model metadata checkpoint_path={checkpoint!r} has no PVC claim (set pvc_claim in the metadata or "
            f"${PVC_CLAIM_ENV})"
        )
    raise ValueError(
        f"cannot derive a serving URI for the model: its artifact URI {model.uri!r} is not served storage and {why}. "
        "Give model_uri (pvc://claim/path, s3://...) or s3_upload_prefix to upload the files."
    )


def model_files_dir(model: ArtifactInfo) -> Path:
    """The model's local files: the manifest's checked weights, else ``checkpoint_path``, else the artifact.

    Raises:
        ValueError: Neither exists in this container, or the manifest's weights are missing or changed.
    """
    if model.path and read_manifest(model.path) is not None:
        return resolve_model_dir(model.path)
    candidates = []
    checkpoint = str(model.metadata.get("checkpoint_path") or "")
    if checkpoint and not urlsplit(checkpoint).scheme:
        candidates.append(Path(checkpoint))
    if model.path:
        candidates.append(Path(model.path))
    for candidate in candidates:
        if candidate.exists():
            return candidate
    raise ValueError(
        f"no model files to upload: neither model metadata checkpoint_path={checkpoint!r} nor the model artifact path "
        f"{model.path!r} exists in this container"
    )


def files_to_upload(source: Path) -> list[tuple[Path, str]]:
    """The files under ``source`` (or ``source`` itself) with their keys relative to the upload prefix.

    Raises:
        ValueError: There is no file to upload.
    """
    if source.is_file():
        return [(source, source.name)]
    files = sorted(p for p in source.rglob("*") if p.is_file())
    if not files:
        raise ValueError(f"no model files to upload: {source} is empty")
    return [(p, p.relative_to(source).as_posix()) for p in files]


def upload_model_files(source: Path, s3_upload_prefix: str, log: Callable[[str], None], client: Any) -> None:
    """Uploads the model files under ``s3://bucket/prefix/`` and checks every object landed with its size.

    Raises:
        ValueError: Bad prefix, nothing to upload, or no credentials.
        RuntimeError: The upload failed or an object is missing/short afterwards.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = parse_s3_uri(s3_upload_prefix)
    files = files_to_upload(source)
    total = 0
    try:
        for path, relative in files:
            client.upload_file(str(path), bucket, f"{prefix}/{relative}")
            total += path.stat().st_size
        stored = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
            stored.update({obj["Key"]: obj["Size"] for obj in page.get("Contents", [])})
    except (BotoCoreError, ClientError) as exc:
        raise RuntimeError(f"upload of {source} to s3://{bucket}/{prefix}/ failed: {exc}") from exc
    for path, relative in files:
        if stored.get(f"{prefix}/{relative}") != path.stat().st_size:
            raise RuntimeError(f"after upload, s3://{bucket}/{prefix}/{relative} is missing or has the wrong size")
    log(f"uploaded {len(files)} files ({total} bytes) from {source} to s3://{bucket}/{prefix}")
