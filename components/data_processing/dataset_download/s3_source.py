"""S3 sources: one object or every data file under a prefix, through the RHOAI data connection.

Requests are retried by botocore itself (standard mode: connection errors, 5xx, throttling, ``attempts`` tries; its
connect and read timeouts are the stall timeout), each send checked against the overall deadline. A body cut short
is resumed here with a ranged GET, ``If-Match`` its ETag so that a changed object is never stitched: boto3's managed
download (``s3transfer``) fetches the whole object again instead (measured in the README).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path, PurePosixPath

from components._common.s3 import S3CredentialsMissing, s3_client

from .deadlines import HttpOptions, Watchdog, deadline_error
from .locations import DatasetSourceError, FetchedData, is_disk_full, parse_s3_uri, scratch_full_error
from .readers import data_format

_COPY_CHUNK = 1 << 20


def s3_error(uri: str, error: Exception) -> DatasetSourceError:
    """The one-line error of an S3 answer: access denied, not found, changed while downloaded, or its code."""
    response = getattr(error, "response", {}) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if status == 403 or code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        shown = code if code not in ("", "403") else "AccessDenied"
        return DatasetSourceError(
            f"dataset_uri={uri!r}: access denied ({shown}, 403 Forbidden): the data connection's "
            "credentials may not read it; put valid AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_S3_ENDPOINT "
            "for a non-AWS store) in the s3-secret"
        )
    if status == 404 or code in ("NoSuchBucket", "NoSuchKey", "404"):
        return DatasetSourceError(f"dataset_uri={uri!r}: not found (404, {code})")
    if status == 412 or code == "PreconditionFailed":
        return DatasetSourceError(f"dataset_uri={uri!r}: the object changed while it was downloaded; run again")
    return DatasetSourceError(f"dataset_uri={uri!r}: S3 error {code or type(error).__name__}")


def _s3_objects(client, uri: str, bucket: str, key: str) -> tuple[str, list[tuple[str, int, str]]]:
    """The object ``key`` or the data files under prefix ``key``: ``(prefix or "", [(key, size, etag), ...])``."""
    from botocore.exceptions import ClientError

    if key and not key.endswith("/"):
        try:
            head = client.head_object(Bucket=bucket, Key=key)
            return "", [(key, head["ContentLength"], head["ETag"].strip('"'))]
        except ClientError as error:
            if error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") != 404:
                raise
        key += "/"
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key)
    found = [
        (item["Key"], item["Size"], item["ETag"].strip('"'))
        for page in pages
        for item in page.get("Contents", [])
        if data_format(PurePosixPath(item["Key"]))
    ]
    if not found:
        raise DatasetSourceError(f"dataset_uri={uri!r}: not found (404): no object and no data files under the prefix")
    return key, sorted(found)


def _s3_target(download_dir: Path, prefix: str, key: str, uri: str) -> Path:
    """Where an object lands: its path below the prefix (its base name for a single object), confined."""
    relative = key[len(prefix) :] if prefix else PurePosixPath(key).name
    target = download_dir / relative
    if not relative or ".." in PurePosixPath(relative).parts or download_dir not in target.parents:
        raise DatasetSourceError(f"dataset_uri={uri!r}: object key {key!r} cannot be stored safely")
    return target


def _s3_download(
    client, bucket: str, key: str, etag: str, size: int, target: Path, uri: str, options: HttpOptions, deadline: float
) -> None:
    """Streams one object into ``target`` through a ``.part`` file; a body cut short is resumed where it stopped.

    Each GET (botocore retries it) asks only for the bytes still missing (``Range``, ``If-Match`` the listed ETag).
    """
    from botocore.exceptions import BotoCoreError

    partial = target.with_name(f".{target.name}.part")
    attempts = options.attempts
    try:
        for attempt in range(1, attempts + 1):
            offset = partial.stat().st_size if partial.exists() else 0
            request = {"Bucket": bucket, "Key": key}
            if offset:
                request.update(Range=f"bytes={offset}-", IfMatch=f'"{etag}"')
            response = client.get_object(**request)
            if offset and not str(response.get("ContentRange", "")).startswith(f"bytes {offset}-"):
                offset = 0  # the whole object came back
            try:
                _stream(response["Body"], partial, offset, uri, (deadline, options.deadline_s))
            except (BotoCoreError, OSError) as error:  # the body broke off: the next GET resumes it
                if is_disk_full(error) or attempt == attempts:
                    raise
            if partial.stat().st_size == size:
                os.replace(partial, target)
                return
        received = partial.stat().st_size
        raise DatasetSourceError(f"dataset_uri={uri!r}: object {key!r} ended after {received} of {size} bytes")
    except (BotoCoreError, OSError) as error:
        written = partial.stat().st_size if partial.exists() else 0
        if is_disk_full(error):
            raise scratch_full_error(uri, target.parent, size, written) from None
        raise DatasetSourceError(
            f"dataset_uri={uri!r}: object {key!r}: {type(error).__name__} after {attempts} attempts ({written} bytes)"
        ) from None
    finally:
        partial.unlink(missing_ok=True)


def _stream(body, partial: Path, offset: int, uri: str, limit: tuple[float, float]) -> None:
    """Writes a body into ``partial`` from ``offset``, ended at the deadline (``limit``: its monotonic time, length)."""
    raw = getattr(body, "_raw_stream", body)
    deadline, written = limit[0], 0
    try:
        with Watchdog(deadline) as watchdog, open(partial, "r+b" if offset else "wb") as handle:
            watchdog.watch(getattr(raw, "shutdown", raw.close))
            handle.seek(offset)
            handle.truncate()
            for chunk in body.iter_chunks(_COPY_CHUNK):
                written += len(chunk)
                handle.write(chunk)
                if time.monotonic() > deadline:
                    break
    except Exception:
        if time.monotonic() < deadline:
            raise
    finally:
        body.close()
    if time.monotonic() > deadline:
        raise deadline_error(uri, limit[1], offset + written)


def fetch_s3(uri: str, download_dir: Path, max_bytes: int, options: HttpOptions) -> FetchedData:
    """Downloads an S3 object, or every data file under a prefix, through the data-connection endpoint."""
    from botocore.exceptions import BotoCoreError, ClientError

    location = parse_s3_uri(uri, os.environ.get("AWS_S3_BUCKET", ""))
    try:
        client = s3_client(stall_timeout_s=options.timeout_s, attempts=options.attempts)
    except S3CredentialsMissing as error:
        raise DatasetSourceError(str(error)) from None
    deadline = time.monotonic() + options.deadline_s

    def before_send(**_: object) -> None:  # every request botocore sends, its own retries included
        if time.monotonic() > deadline:
            raise deadline_error(uri, options.deadline_s, 0)

    client.meta.events.register("before-send.s3", before_send)
    try:
        prefix, objects = _s3_objects(client, uri, location.bucket, location.key)
        total = sum(size for _, size, _ in objects)
        if total > max_bytes:
            raise DatasetSourceError(f"dataset_uri={uri!r}: {total} bytes exceed max_download_bytes={max_bytes}")
        files = []
        for key, size, etag in objects:
            target = _s3_target(download_dir, prefix, key, uri)
            target.parent.mkdir(parents=True, exist_ok=True)
            _s3_download(client, location.bucket, key, etag, size, target, uri, options, deadline)
            files.append(target)
    except ClientError as error:
        raise s3_error(uri, error) from None
    except BotoCoreError as error:
        attempts = f" after {options.attempts} attempts" if options.attempts > 1 else ""
        raise DatasetSourceError(
            f"dataset_uri={uri!r}: S3 endpoint error{attempts}: {type(error).__name__}: {error}"
        ) from None
    if not prefix:
        return FetchedData(files, objects[0][2])
    listing = "\n".join(f"{key}:{etag}" for key, _, etag in objects)
    return FetchedData(files, "sha256:" + hashlib.sha256(listing.encode()).hexdigest()[:16])
