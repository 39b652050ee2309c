"""S3 sources: one object or every data file under a prefix, through the RHOAI data connection.

botocore retries each request itself (standard mode) with the stall timeout as its connect and read timeouts, each
send checked against the deadline. A body cut short is resumed here with a ranged GET, ``If-Match`` its ETag so that
a changed object is never stitched: boto3's managed download fetches it again from byte 0 (measured in the README).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from components._common.s3 import S3CredentialsMissing, s3_client

from .download import Download, Watchdog
from .locations import DatasetSourceError, FetchedData, listing_revision, parse_s3_uri
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


def _s3_objects(client, download: Download, bucket: str, key: str) -> tuple[str, list[tuple[str, int, str]]]:  # noqa: ANN001
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
        raise download.error("not found (404): no object and no data files under the prefix")
    return key, sorted(found)


def _s3_download(client, download: Download, bucket: str, prefix: str, item: tuple[str, int, str]) -> Path:  # noqa: ANN001
    """Streams one object to its place below the prefix through a ``.part`` file; a body cut short is resumed.

    Each GET (botocore retries it) asks only for the bytes still missing (``Range``, ``If-Match`` the listed ETag).
    """
    from botocore.exceptions import BotoCoreError

    key, size, etag = item
    relative = key[len(prefix) :] if prefix else PurePosixPath(key).name
    target = download.folder / relative
    if not relative or ".." in PurePosixPath(relative).parts or download.folder not in target.parents:
        raise download.error(f"object key {key!r} cannot be stored safely")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.part")
    attempts = download.http.attempts
    try:
        for attempt in range(1, attempts + 1):
            offset = partial.stat().st_size if partial.exists() else 0
            request = {"Bucket": bucket, "Key": key}
            if offset:
                request.update(Range=f"bytes={offset}-", IfMatch=f'"{etag}"')
            response = client.get_object(**request)
            if offset and not str(response.get("ContentRange", "")).startswith(f"bytes {offset}-"):
                offset = 0  # the whole object came back
            body = response["Body"]
            raw = getattr(body, "_raw_stream", body)
            try:
                with Watchdog(download.deadline) as watchdog:
                    watchdog.watch(getattr(raw, "shutdown", raw.close))
                    download.write_body(body.iter_chunks(_COPY_CHUNK), partial, offset, size)
            except (BotoCoreError, OSError):  # the body broke off: the next GET resumes it
                if attempt == attempts:
                    raise
            finally:
                body.close()
            if partial.stat().st_size == size:
                os.replace(partial, target)
                return target
        raise download.error(f"object {key!r} ended after {partial.stat().st_size} of {size} bytes")
    except (BotoCoreError, OSError) as error:
        written = partial.stat().st_size if partial.exists() else 0
        raise download.error(
            f"object {key!r}: {type(error).__name__} after {attempts} attempts ({written} bytes)"
        ) from None
    finally:
        partial.unlink(missing_ok=True)


def fetch_s3(download: Download) -> FetchedData:
    """Downloads an S3 object, or every data file under a prefix, through the data-connection endpoint."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = parse_s3_uri(download.uri, os.environ.get("AWS_S3_BUCKET", ""))
    try:
        client = s3_client(stall_timeout_s=download.http.timeout_s, attempts=download.http.attempts)
    except S3CredentialsMissing as error:
        raise DatasetSourceError(str(error)) from None
    client.meta.events.register("before-send.s3", lambda **_: download.check_deadline())  # botocore's retries too
    try:
        prefix, objects = _s3_objects(client, download, bucket, key)
        download.check_size(sum(size for _, size, _ in objects))
        files = [_s3_download(client, download, bucket, prefix, item) for item in objects]
    except ClientError as error:
        raise s3_error(download.uri, error) from None
    except BotoCoreError as error:
        attempts = f" after {download.http.attempts} attempts" if download.http.attempts > 1 else ""
        raise download.error(f"S3 endpoint error{attempts}: {type(error).__name__}: {error}") from None
    revision = listing_revision([f"{key}:{etag}" for key, _, etag in objects]) if prefix else objects[0][2]
    return FetchedData(files, revision)
