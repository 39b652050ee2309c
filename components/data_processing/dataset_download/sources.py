"""Fetching a dataset from its source to local data files: Hub, S3, HTTP(S), PVC or a local path.

Secrets come only from the environment (``HF_TOKEN``; the RHOAI data-connection variables ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_S3_ENDPOINT``, ``AWS_DEFAULT_REGION``, ``AWS_S3_BUCKET``) and are never logged or
put in errors. Downloads land in a temporary name and are renamed when complete; remote sources are capped at
``max_bytes``.

Every download has two time limits (see :class:`HttpOptions`): a *stall* timeout (no byte for that long fails the
attempt) and an overall *deadline* for the whole fetch, retries included, enforced by a watchdog that shuts the socket
down (so a server trickling one byte a second fails at the deadline, not never). Partial files are removed on every
exit: errors, the deadline, and SIGTERM (the component turns SIGTERM into ``SystemExit``, see
:mod:`components._common.termination`, so that ``finally`` blocks run).
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from components._common.retry import GaveUp, RetryPolicy, call_with_retries, is_tls_error, is_transient
from components._common.s3 import S3CredentialsMissing, s3_client

from .deadlines import (
    Watchdog,
    WatchedHTTPHandler,
    WatchedHTTPSHandler,
    deadline_error,
    hub_deadline,
)
from .locations import (
    DatasetSourceError,
    local_data_files,
    local_revision,
    parse_hf_uri,
    parse_s3_uri,
    resolve_local_uri,
    resolve_pvc_uri,
    source_kind,
)
from .readers import data_format

#: HTTP statuses worth retrying (the server or a proxy may recover).
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_COPY_CHUNK = 1 << 20


@dataclass
class FetchedData:
    """Local data files of a dataset and the revision they were read at."""

    files: list[Path]
    revision: str


@dataclass(frozen=True)
class HttpOptions:
    """How downloads behave: stall timeout, overall deadline, attempts, backoff between them (doubling).

    Attributes:
        timeout_s: Stall timeout: an attempt fails when no byte arrives for this long (connect included).
        attempts: Attempts of an HTTP download (retryable statuses and connection errors).
        backoff_s: First pause between attempts, doubled after each.
        deadline_s: Overall deadline of the fetch, every attempt and file included; the default (3 h) lets 10 GiB
            (the default ``max_download_bytes``) arrive at 1 MB/s.
    """

    timeout_s: float = 60.0
    attempts: int = 4
    backoff_s: float = 1.0
    deadline_s: float = 3 * 3600.0


def fetch_dataset(
    uri: str,
    download_dir: Path,
    hf_split: str = "train",
    max_bytes: int = 10 * 1024**3,
    http: HttpOptions = HttpOptions(),
) -> FetchedData:
    """Makes a dataset's data files available locally.

    Args:
        uri: See :mod:`.locations` for the accepted forms.
        download_dir: Where remote files are downloaded (created if needed).
        hf_split: The split to read from a Hub dataset.
        max_bytes: Refuse to download more than this many bytes.
        http: HTTP(S) timeout and retry settings.

    Returns:
        The local files, in reading order, and the revision (HF commit, S3 ETag, HTTP ETag, mtime+size).

    Raises:
        DatasetSourceError: Unknown scheme, missing credentials, 401/403/404, size cap, or no data files.
    """
    kind = source_kind(uri)
    if max_bytes <= 0:
        raise DatasetSourceError(f"max_download_bytes={max_bytes} must be positive")
    if kind == "local":
        files = local_data_files(resolve_local_uri(uri), uri)
        return FetchedData(files, local_revision(files))
    if kind == "pvc":
        target, mount = resolve_pvc_uri(uri)
        files = local_data_files(target, uri, root=mount)
        return FetchedData(files, local_revision(files))
    download_dir.mkdir(parents=True, exist_ok=True)
    if kind == "s3":
        return fetch_s3(uri, download_dir, max_bytes, http)
    if kind == "http":
        return fetch_http(uri, download_dir, max_bytes, http)
    return fetch_hf(uri, download_dir, hf_split, max_bytes, http)


# --- HTTP(S) -----------------------------------------------------------------------------------------------------


def tls_context() -> ssl.SSLContext:
    """A verifying TLS context; ``SSL_CERT_FILE`` or ``REQUESTS_CA_BUNDLE`` adds a CA bundle (e.g. a cluster CA)."""
    bundle = os.environ.get("SSL_CERT_FILE") or os.environ.get("REQUESTS_CA_BUNDLE")
    return ssl.create_default_context(cafile=bundle or None)


def _http_file_name(url: str) -> str:
    name = PurePosixPath(urllib.parse.urlsplit(url).path).name
    if not name or data_format(PurePosixPath(name)) is None:
        raise DatasetSourceError(
            f"dataset_uri={url!r}: the URL path must end in a .jsonl/.json/.parquet/.csv(.gz) file name"
        )
    return name


def _http_error(url: str, status: int, reason: str) -> DatasetSourceError:
    meaning = {401: "authentication required", 403: "access denied", 404: "not found"}.get(status, reason)
    return DatasetSourceError(f"dataset_uri={url!r}: HTTP {status} ({meaning})")


def _download_once(url: str, target: Path, max_bytes: int, options: HttpOptions, deadline: float) -> str:
    """One GET into ``target`` (a temporary name); returns the revision (ETag, Last-Modified or content sha256).

    ``timeout_s`` bounds each wait for bytes (the stall timeout); ``deadline`` (``time.monotonic()``) the whole
    attempt, headers included, through a :class:`~.deadlines.Watchdog`.
    """
    request = urllib.request.Request(url, headers={"User-Agent": "kfp-finetune-dataset-download"})
    size = 0
    with Watchdog(deadline) as watchdog:
        if url.lower().startswith("https://"):
            opener = urllib.request.build_opener(WatchedHTTPSHandler(watchdog, tls_context()))
        else:
            opener = urllib.request.build_opener(WatchedHTTPHandler(watchdog))
        stall = max(0.001, min(options.timeout_s, deadline - time.monotonic()))
        try:
            response = opener.open(request, timeout=stall)
        except (OSError, http.client.HTTPException):
            if watchdog.expired:
                raise deadline_error(url, options.deadline_s, size) from None
            raise
        with response:
            declared = response.headers.get("Content-Length")
            if declared is not None and int(declared) > max_bytes:
                raise DatasetSourceError(f"dataset_uri={url!r}: {declared} bytes exceed max_download_bytes={max_bytes}")
            digest = hashlib.sha256()
            with open(target, "wb") as handle:
                try:
                    while chunk := response.read1(_COPY_CHUNK):  # read1: whatever arrived, never waits to fill
                        size += len(chunk)
                        if size > max_bytes:
                            raise DatasetSourceError(
                                f"dataset_uri={url!r}: more than max_download_bytes={max_bytes} bytes"
                            )
                        digest.update(chunk)
                        handle.write(chunk)
                        if time.monotonic() > deadline:
                            raise deadline_error(url, options.deadline_s, size)
                except (OSError, http.client.HTTPException):
                    if watchdog.expired:
                        raise deadline_error(url, options.deadline_s, size) from None
                    raise
            if watchdog.expired:
                raise deadline_error(url, options.deadline_s, size)
            if declared is not None and size != int(declared):
                raise ConnectionError(f"the connection closed after {size} of {declared} bytes")
        etag = response.headers.get("ETag") or response.headers.get("Last-Modified")
        return etag.strip('"') if etag else "sha256:" + digest.hexdigest()


def fetch_http(url: str, download_dir: Path, max_bytes: int, options: HttpOptions = HttpOptions()) -> FetchedData:
    """Downloads one file over HTTP(S) with TLS verification, a timeout, retries with backoff and a size cap."""
    name = _http_file_name(url)
    target = download_dir / name
    partial = download_dir / f".{name}.part"
    policy = RetryPolicy(attempts=options.attempts, initial_delay_s=options.backoff_s, max_delay_s=30.0)
    deadline = time.monotonic() + options.deadline_s

    def download() -> FetchedData:
        revision = _download_once(url, partial, max_bytes, options, deadline)
        os.replace(partial, target)
        return FetchedData([target], revision)

    try:
        return call_with_retries(
            download, policy, retryable=lambda error: is_transient(error, RETRY_STATUSES), deadline=deadline
        )
    except urllib.error.HTTPError as error:
        raise _http_error(url, error.code, str(error.reason)) from None
    except GaveUp as gave_up:
        if gave_up.reason == "deadline":
            raise deadline_error(url, options.deadline_s, 0) from None
        raise _http_failure(url, gave_up.last, gave_up.attempts) from None
    except urllib.error.URLError as error:
        raise _http_failure(url, error, 1) from None
    finally:
        partial.unlink(missing_ok=True)


def _http_failure(url: str, error: BaseException, attempts: int) -> DatasetSourceError:
    """The one-line error of a download that got no usable answer (after ``attempts`` tries)."""
    if isinstance(error, urllib.error.HTTPError):
        return _http_error(url, error.code, str(error.reason))
    if is_tls_error(error):
        return DatasetSourceError(f"dataset_uri={url!r}: TLS verification failed: {getattr(error, 'reason', error)}")
    if isinstance(error, urllib.error.URLError):
        return DatasetSourceError(f"dataset_uri={url!r}: cannot connect after {attempts} attempts: {error.reason}")
    return DatasetSourceError(f"dataset_uri={url!r}: {error!r} after {attempts} attempts")


# --- S3 ----------------------------------------------------------------------------------------------------------


def _s3_error(uri: str, error: Exception) -> DatasetSourceError:
    response = getattr(error, "response", {}) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if status == 403 or code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        return DatasetSourceError(f"dataset_uri={uri!r}: access denied (403, {code}); check the data connection")
    if status == 404 or code in ("NoSuchBucket", "NoSuchKey", "404"):
        return DatasetSourceError(f"dataset_uri={uri!r}: not found (404, {code})")
    return DatasetSourceError(f"dataset_uri={uri!r}: S3 error {code or type(error).__name__}")


def _s3_objects(client, uri: str, bucket: str, key: str) -> tuple[str, list[tuple[str, int, str]]]:
    """The object ``key`` or the data files under prefix ``key``: ``(prefix, [(key, size, etag), ...])``.

    ``prefix`` is ``""`` for a single object.
    """
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


def _s3_download(client, bucket: str, key: str, target: Path, uri: str, options: HttpOptions, deadline: float) -> None:
    """Streams one object into ``target`` through a ``.part`` file (removed on any exit), within ``deadline``."""
    partial = target.with_name(f".{target.name}.part")
    size = 0
    try:
        body = client.get_object(Bucket=bucket, Key=key)["Body"]
        raw = getattr(body, "_raw_stream", body)
        timer = threading.Timer(max(0.0, deadline - time.monotonic()), getattr(raw, "shutdown", raw.close))
        timer.daemon = True
        timer.start()
        try:
            with open(partial, "wb") as handle:
                for chunk in body.iter_chunks(_COPY_CHUNK):
                    size += len(chunk)
                    handle.write(chunk)
                    if time.monotonic() > deadline:
                        break
        except Exception:
            if time.monotonic() < deadline:
                raise
        finally:
            timer.cancel()
            body.close()
        if time.monotonic() > deadline:
            raise deadline_error(uri, options.deadline_s, size)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def fetch_s3(uri: str, download_dir: Path, max_bytes: int, options: HttpOptions = HttpOptions()) -> FetchedData:
    """Downloads an S3 object, or every data file under a prefix, through the data-connection endpoint.

    ``options.timeout_s`` is the stall timeout of each read and ``options.deadline_s`` the deadline of the whole fetch.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    location = parse_s3_uri(uri, os.environ.get("AWS_S3_BUCKET", ""))
    try:
        client = s3_client(stall_timeout_s=options.timeout_s)
    except S3CredentialsMissing as error:
        raise DatasetSourceError(str(error)) from None
    deadline = time.monotonic() + options.deadline_s
    try:
        prefix, objects = _s3_objects(client, uri, location.bucket, location.key)
        total = sum(size for _, size, _ in objects)
        if total > max_bytes:
            raise DatasetSourceError(f"dataset_uri={uri!r}: {total} bytes exceed max_download_bytes={max_bytes}")
        files = []
        for key, _, _ in objects:
            target = _s3_target(download_dir, prefix, key, uri)
            target.parent.mkdir(parents=True, exist_ok=True)
            _s3_download(client, location.bucket, key, target, uri, options, deadline)
            files.append(target)
    except ClientError as error:
        raise _s3_error(uri, error) from None
    except BotoCoreError as error:
        raise DatasetSourceError(f"dataset_uri={uri!r}: S3 endpoint error: {type(error).__name__}: {error}") from None
    if not prefix:
        return FetchedData(files, objects[0][2])
    listing = "\n".join(f"{key}:{etag}" for key, _, etag in objects)
    return FetchedData(files, "sha256:" + hashlib.sha256(listing.encode()).hexdigest()[:16])


# --- Hugging Face Hub --------------------------------------------------------------------------------------------


#: Top-level modules whose exceptions a Hub call may leak (the HTTP stack below ``huggingface_hub``).
_NETWORK_MODULES = ("httpx", "httpx2", "httpcore", "requests", "urllib3", "huggingface_hub")
#: What fixes each kind of Hub failure (the messages name the secret the token comes from).
HF_TOKEN_REMEDY = "put a token with read access in the hf-token secret (env HF_TOKEN)"


def hf_error(repo_id: str, revision: str, error: BaseException, endpoint: str = "") -> DatasetSourceError:
    """One line naming the repo, the revision and the remedy for any Hub failure (HTTP, offline, DNS, timeout).

    Args:
        repo_id: The dataset (``org/name``).
        revision: The revision asked for ("" = the default branch).
        error: What ``huggingface_hub`` (or the network below it) raised.
        endpoint: The Hub endpoint used ("" = huggingface.co).
    """
    from huggingface_hub import errors

    where = f"Hub dataset {repo_id!r} at revision {revision or 'main'!r}"
    host = endpoint or "https://huggingface.co"
    status = getattr(getattr(error, "response", None), "status_code", None)
    if isinstance(error, errors.GatedRepoError):
        text = (
            f"access denied (403, gated dataset): accept its conditions on {host}/datasets/{repo_id} with the account "
            f"whose token is in the hf-token secret (env HF_TOKEN)"
        )
    elif isinstance(error, errors.OfflineModeIsEnabled) or isinstance(error, errors.LocalEntryNotFoundError):
        text = (
            "the Hub is unreachable or offline mode is on (HF_HUB_OFFLINE=1): allow egress to the Hub, set HF_ENDPOINT "
            "to a mirror, or copy the dataset to s3:// or pvc:// and point dataset_uri there"
        )
    elif isinstance(error, errors.RevisionNotFoundError):
        text = "revision not found (404): use an existing branch, tag or commit after '@'"
    elif isinstance(error, errors.RepositoryNotFoundError):
        text = f"not found (404) or private without a valid HF_TOKEN: check the name, or {HF_TOKEN_REMEDY}"
    elif isinstance(error, errors.EntryNotFoundError):
        text = "file not found (404) in that revision"
    elif status == 401:
        text = f"authentication failed (401): the token is invalid or expired; {HF_TOKEN_REMEDY}"
    elif status == 403:
        text = f"access denied (403): the token lacks access to this dataset; {HF_TOKEN_REMEDY}"
    elif status is not None:
        text = f"Hub answered HTTP {status}; retry later or check {host}"
    else:
        text = (
            f"cannot reach {host} ({type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}): "
            "the cluster may be offline or block DNS/egress; set HF_ENDPOINT to a mirror, or copy the dataset to "
            "s3:// or pvc://"
        )
    return DatasetSourceError(f"dataset_uri: {where}: {text}")


def fetch_hf(
    uri: str, download_dir: Path, split: str, max_bytes: int, options: HttpOptions = HttpOptions()
) -> FetchedData:
    """Downloads the files of one subset/split of a Hub dataset at a pinned commit (token from ``HF_TOKEN``).

    The endpoint is ``HF_ENDPOINT`` read at call time (a mirror, or a local stub in tests). ``options.timeout_s`` is
    the stall timeout of each request and ``options.deadline_s`` the deadline of the whole fetch.
    """
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError

    from .hf_files import card_configs, select_hf_files

    ref = parse_hf_uri(uri)
    endpoint = os.environ.get("HF_ENDPOINT") or None
    token = os.environ.get("HF_TOKEN") or False
    local_dir = download_dir / "hf"

    def download(filename: str, commit: str) -> Path:
        return Path(
            hf_hub_download(
                ref.repo_id,
                filename,
                repo_type="dataset",
                revision=commit,
                local_dir=local_dir,
                endpoint=endpoint,
                token=token,
            )
        )

    deadline = time.monotonic() + options.deadline_s
    try:
        with hub_deadline(uri, deadline, options.deadline_s, options.timeout_s):
            info = HfApi(endpoint=endpoint, token=token).dataset_info(
                ref.repo_id, revision=ref.revision or None, files_metadata=True
            )
            sizes = {sibling.rfilename: sibling.size or 0 for sibling in info.siblings or []}
            configs = card_configs(download("README.md", info.sha).read_text("utf-8")) if "README.md" in sizes else []
            selected = select_hf_files(sorted(sizes), ref.subset, split, configs, uri)
            total = sum(sizes[name] for name in selected)
            if total > max_bytes:
                raise DatasetSourceError(f"dataset_uri={uri!r}: {total} bytes exceed max_download_bytes={max_bytes}")
            files = [download(name, info.sha) for name in selected]
    except DatasetSourceError:
        raise
    except (HfHubHTTPError, OSError, ValueError) as error:  # ValueError: huggingface_hub's offline/entry errors
        raise hf_error(ref.repo_id, ref.revision, error, endpoint or "") from None
    except Exception as error:  # the network library's own errors (httpx.ConnectError, timeouts...)
        if type(error).__module__.split(".")[0] not in _NETWORK_MODULES:
            raise
        raise hf_error(ref.repo_id, ref.revision, error, endpoint or "") from None
    downloaded = sum(file.stat().st_size for file in files)
    if downloaded > max_bytes:
        shutil.rmtree(local_dir, ignore_errors=True)
        raise DatasetSourceError(f"dataset_uri={uri!r}: {downloaded} bytes exceed max_download_bytes={max_bytes}")
    return FetchedData(files, info.sha)
