"""Upload of the model files to an S3 data connection (credentials from the data-connection env vars)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .model_uri import parse_s3_uri


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
