"""Fetching a dataset from its source to local data files: picks the source, and holds the HTTP(S) one.

Downloads land in a temporary name, renamed when complete; partial files are removed on every exit (errors, the
deadline, SIGTERM through :mod:`components._common.termination`).
"""

from __future__ import annotations

import hashlib
import http.client
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from components._common.masking import mask_url
from components._common.retry import GaveUp, describe, is_tls_error, is_transient

from .deadlines import HttpOptions, Watchdog, WatchedHandler, check_deadline, deadline_error, retried
from .hub_source import fetch_hf
from .locations import (
    DatasetSourceError,
    FetchedData,
    is_disk_full,
    local_data_files,
    local_revision,
    resolve_local_uri,
    resolve_pvc_uri,
    scratch_full_error,
    source_kind,
)
from .readers import data_format
from .s3_source import fetch_s3

__all__ = ["FetchedData", "HttpOptions", "check_deadline", "fetch_dataset", "fetch_http"]

_COPY_CHUNK = 1 << 20
#: Schemes a download may be redirected to (never ``ftp://``, ``file://``, ``data:``), and at most how many times.
REDIRECT_SCHEMES = ("http", "https")
MAX_REDIRECTS = 5


def fetch_dataset(
    uri: str,
    download_dir: Path,
    hf_split: str,
    max_bytes: int,
    http: HttpOptions,
) -> FetchedData:
    """Makes a dataset's data files (``uri``: :mod:`.locations`) available locally, remote ones in ``download_dir``.

    Raises:
        DatasetSourceError: Unknown scheme, missing credentials, 401/403/404, size cap, or no data files.
    """
    kind = source_kind(uri)
    if max_bytes <= 0:
        raise DatasetSourceError(f"max_download_bytes={max_bytes} must be positive")
    if kind in ("local", "pvc"):
        target, mount = resolve_pvc_uri(uri) if kind == "pvc" else (resolve_local_uri(uri), None)
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
            f"dataset_uri={mask_url(url)!r}: the URL path must end in a .jsonl/.json/.parquet/.csv(.gz) file name"
        )
    return name


class SourceChanged(ConnectionError):
    """A resumed download's file changed on the server (another validator): the attempt restarts from byte 0."""


class CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects only to :data:`REDIRECT_SCHEMES` (urllib's follows ``ftp://``), at most :data:`MAX_REDIRECTS`.

    Either refusal ends the download with one line naming the original and the final URL.
    """

    max_redirections = max_repeats = MAX_REDIRECTS + 1  # (this handler's own count ends a loop first)

    def __init__(self, url: str) -> None:
        self.url = url
        self.hops = 0

    def http_error_302(self, req, fp, code, msg, headers):  # noqa: D102 - urllib's hook, for 301/302/303/307/308
        location = headers.get("location") or headers.get("uri") or ""
        target = urllib.parse.urljoin(req.full_url, location)
        scheme = urllib.parse.urlsplit(target).scheme.lower()
        self.hops += 1
        problem = ""
        if scheme not in REDIRECT_SCHEMES:
            problem = f"only {'/'.join(REDIRECT_SCHEMES)} redirects are followed, not {scheme or '(no scheme)'}://"
        elif self.hops > MAX_REDIRECTS:
            problem = f"more than {MAX_REDIRECTS} redirects (a loop?)"
        if problem:
            fp.close()
            raise DatasetSourceError(
                f"dataset_uri={mask_url(self.url)!r}: HTTP {code} redirected to {mask_url(target)!r}: {problem}; "
                "use the final http(s) URL"
            )
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


@dataclass
class _Resume:
    """What a later attempt needs to ask for the rest of a body: its validator, when the server accepts ranges."""

    validator: str = ""
    #: The answer's ``Content-Encoding`` (lower case; ``""``: none or ``identity``).
    encoding: str = ""


def _download_once(
    url: str, target: Path, max_bytes: int, options: HttpOptions, deadline: float, resume: _Resume
) -> str:
    """One GET into ``target`` (a temporary name); returns the revision (ETag, Last-Modified or content sha256).

    When ``target`` holds the start of the body from an earlier attempt and the server said it accepts ranges, only
    the rest is asked for (``Range``, ``If-Range`` the validator); a ``200`` answer starts again from byte 0.
    """
    headers = {"User-Agent": "kfp-finetune-dataset-download"}
    offset = target.stat().st_size if target.exists() and resume.validator else 0
    if offset:
        headers.update({"Range": f"bytes={offset}-", "If-Range": resume.validator})
    request = urllib.request.Request(url, headers=headers)
    shown = mask_url(url)
    size = 0
    with Watchdog(deadline) as watchdog:
        opener = urllib.request.build_opener(WatchedHandler(watchdog, tls_context()), CheckedRedirects(url))
        stall = max(0.001, min(options.timeout_s, deadline - time.monotonic()))
        try:
            response = opener.open(request, timeout=stall)
        except (OSError, http.client.HTTPException):
            if watchdog.expired:
                raise deadline_error(url, options.deadline_s, size) from None
            raise
        with response:
            resume.encoding = _content_encoding(url, response.headers.get("Content-Encoding", ""))
            validator = response.headers.get("ETag") or response.headers.get("Last-Modified") or ""
            if response.status != 206 or not str(response.headers.get("Content-Range", "")).startswith(
                f"bytes {offset}-"
            ):
                offset = 0
            elif offset and validator != resume.validator:
                # A server that ignores If-Range sent the rest of another version: never splice the two.
                shown_validators = f"{resume.validator or '(none)'} then {validator or '(none)'}"
                resume.validator = ""
                target.unlink(missing_ok=True)
                raise SourceChanged(
                    f"the file changed on the server during the download (validator {shown_validators}); starting "
                    "again from byte 0"
                )
            ranges = response.headers.get("Accept-Ranges", "").lower() == "bytes" or response.status == 206
            resume.validator = validator if ranges and not validator.startswith("W/") else ""
            declared = response.headers.get("Content-Length")
            expected = None if declared is None else offset + int(declared)
            if expected is not None and expected > max_bytes:
                raise DatasetSourceError(
                    f"dataset_uri={shown!r}: {expected} bytes exceed max_download_bytes={max_bytes}"
                )
            size = offset
            digest = hashlib.sha256()
            with open(target, "r+b" if offset else "wb") as handle:
                handle.seek(offset)
                handle.truncate()
                try:
                    while chunk := response.read1(_COPY_CHUNK):  # read1: whatever arrived, never waits to fill
                        size += len(chunk)
                        if size > max_bytes:
                            raise DatasetSourceError(
                                f"dataset_uri={shown!r}: more than max_download_bytes={max_bytes} bytes"
                            )
                        digest.update(chunk)
                        handle.write(chunk)
                        if time.monotonic() > deadline:
                            raise deadline_error(url, options.deadline_s, size)
                except (OSError, http.client.HTTPException) as error:
                    if is_disk_full(error):
                        raise scratch_full_error(shown, target.parent, expected, size) from None
                    if watchdog.expired:
                        raise deadline_error(url, options.deadline_s, size) from None
                    if isinstance(error, http.client.HTTPException):  # IncompleteRead: cut short, worth another try
                        raise ConnectionError(f"the body broke off after {size} bytes: {error!r}") from error
                    raise
            if watchdog.expired:
                raise deadline_error(url, options.deadline_s, size)
            if expected is not None and size != expected:
                raise ConnectionError(f"the connection closed after {size} of {expected} bytes")
        return validator.strip('"') if validator else "sha256:" + digest.hexdigest()  # no validator: never resumed


def fetch_http(url: str, download_dir: Path, max_bytes: int, options: HttpOptions) -> FetchedData:
    """Downloads one file over HTTP(S) with TLS verification, a timeout, retries with backoff and a size cap.

    A body cut short is resumed with a ranged GET when the server accepts ranges, else fetched again.
    """
    name = _http_file_name(url)
    target = download_dir / name
    partial = download_dir / f".{name}.part"
    deadline = time.monotonic() + options.deadline_s
    resume = _Resume()

    def download() -> FetchedData:
        revision = _download_once(url, partial, max_bytes, options, deadline, resume)
        stored = target
        if resume.encoding == "gzip" and not name.lower().endswith(".gz"):  # decompressed by the readers, capped
            stored = download_dir / f"{name}.gz"
        os.replace(partial, stored)
        return FetchedData([stored], revision)

    try:
        return retried(download, options, deadline, is_transient, f"GET {mask_url(url)}")
    except GaveUp as gave_up:
        if gave_up.reason == "deadline":
            raise deadline_error(url, options.deadline_s, 0) from None
        raise _http_failure(url, gave_up.last, gave_up.attempts) from None
    except urllib.error.URLError as error:  # HTTPError included: an answer that is not retried
        raise _http_failure(url, error, 1) from None
    finally:
        partial.unlink(missing_ok=True)


#: The ``Content-Encoding`` values a body is accepted in: gzip is read as a ``.gz`` file (``max_decompressed_bytes``).
CONTENT_ENCODINGS = ("", "identity", "gzip", "x-gzip")


def _content_encoding(url: str, header: str) -> str:
    """``gzip`` or ``""`` for the answer's ``Content-Encoding``; any other encoding is refused in one line."""
    encoding = header.strip().lower()
    if encoding not in CONTENT_ENCODINGS:
        raise DatasetSourceError(
            f"dataset_uri={mask_url(url)!r}: the server sent the file with Content-Encoding: {header.strip()}, which "
            "this step does not decode (only gzip); serve it uncompressed or gzip-compressed"
        )
    return "gzip" if encoding in ("gzip", "x-gzip") else ""


def _http_failure(url: str, error: BaseException, attempts: int) -> DatasetSourceError:
    """The one-line error of a download that got no usable answer (after ``attempts`` tries)."""
    shown = mask_url(url)
    if isinstance(error, urllib.error.HTTPError):
        meaning = {401: "authentication required", 403: "access denied", 404: "not found"}.get(error.code, error.reason)
        final_url = error.geturl() or ""
        where = f" at {mask_url(final_url)!r} (redirected)" if final_url and final_url != url else ""
        return DatasetSourceError(f"dataset_uri={shown!r}: HTTP {error.code} ({meaning}){where}")
    if is_tls_error(error):
        return DatasetSourceError(f"dataset_uri={shown!r}: TLS verification failed: {getattr(error, 'reason', error)}")
    if isinstance(error, urllib.error.URLError):
        return DatasetSourceError(f"dataset_uri={shown!r}: cannot connect after {attempts} attempts: {error.reason}")
    return DatasetSourceError(f"dataset_uri={shown!r}: {describe(error)} after {attempts} attempts")
