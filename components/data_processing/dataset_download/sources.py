"""Fetching a dataset to local data files: picks the source (:mod:`.locations`), and holds the HTTP(S) one.

Downloads land in a temporary name, renamed when complete; partial files are removed on every exit (errors, the
deadline, SIGTERM through :mod:`components._common.termination`).
"""

from __future__ import annotations

import hashlib
import os
import urllib.parse
from pathlib import Path, PurePosixPath

from components._common.masking import mask_url
from components._common.retry import GaveUp, describe, is_tls_error

from .download import MAX_REDIRECTS, Download, HttpOptions, Watchdog, http_client, is_retryable
from .hub_source import fetch_hf
from .locations import (
    DatasetSourceError,
    FetchedData,
    local_data_files,
    local_revision,
    resolve_local_uri,
    resolve_pvc_uri,
    source_kind,
)
from .readers import data_format
from .request import SourceOptions
from .s3_source import fetch_s3

#: The ``Content-Encoding`` values a body is accepted in: gzip is read as a ``.gz`` file (``max_decompressed_bytes``).
CONTENT_ENCODINGS = ("", "identity", "gzip", "x-gzip")


def fetch_dataset(source: SourceOptions, download_dir: Path, http: HttpOptions = HttpOptions()) -> FetchedData:
    """Makes a dataset's data files available locally, remote ones downloaded into ``download_dir``.

    Raises:
        DatasetSourceError: Unknown scheme, missing credentials, 401/403/404, size cap, deadline, or no data files.
    """
    uri = source.dataset_uri
    kind = source_kind(uri)
    if kind in ("local", "pvc"):
        target, mount = resolve_pvc_uri(uri) if kind == "pvc" else (resolve_local_uri(uri), None)
        files = local_data_files(target, uri, root=mount)
        return FetchedData(files, local_revision(files))
    download_dir.mkdir(parents=True, exist_ok=True)
    fetch = {"s3": fetch_s3, "http": fetch_http, "hf": fetch_hf}[kind]
    return fetch(Download(source, download_dir, http))


class SourceChanged(ConnectionError):
    """A resumed download's file changed on the server (another validator): the attempt restarts from byte 0."""


def fetch_http(download: Download) -> FetchedData:
    """Downloads one file over HTTP(S) (TLS verified), with retries and a ranged resume where the server allows it.

    When ``partial`` holds the start of the body and the server said it accepts ranges, a later attempt asks only for
    the rest (``Range``, ``If-Range`` the validator); a ``200`` answer starts again from byte 0. The revision: the
    validator (ETag, else Last-Modified), else the content's sha256.
    """
    import httpx2

    name = PurePosixPath(urllib.parse.urlsplit(download.uri).path).name
    if not name or data_format(PurePosixPath(name)) is None:
        raise download.error("the URL path must end in a .jsonl/.json/.parquet/.csv(.gz) file name")
    partial = download.folder / f".{name}.part"
    resume = ""  # the validator a later attempt resumes against ("": none, start from byte 0)

    def attempt(client) -> FetchedData:  # noqa: ANN001 - an httpx2.Client
        nonlocal resume
        offset = partial.stat().st_size if partial.exists() and resume else 0
        headers = {"User-Agent": "kfp-finetune-dataset-download"}
        if offset:
            headers.update({"Range": f"bytes={offset}-", "If-Range": resume})
        with client.stream("GET", download.uri, headers=headers) as response:
            response.raise_for_status()
            encoding = response.headers.get("Content-Encoding", "").strip()
            if encoding.lower() not in CONTENT_ENCODINGS:
                raise download.error(
                    f"the server sent the file with Content-Encoding: {encoding}, which this step does not decode "
                    "(only gzip); serve it uncompressed or gzip-compressed"
                )
            validator = response.headers.get("ETag") or response.headers.get("Last-Modified") or ""
            range_answer = response.headers.get("Content-Range", "").startswith(f"bytes {offset}-")
            if response.status_code != 206 or not range_answer:
                offset = 0
            elif offset and validator != resume:  # a server that ignores If-Range sent another version
                shown = f"{resume or '(none)'} then {validator or '(none)'}"
                resume = ""
                partial.unlink(missing_ok=True)
                raise SourceChanged(f"the file changed on the server (validator {shown}); starting again from byte 0")
            ranges = response.headers.get("Accept-Ranges", "").lower() == "bytes" or response.status_code == 206
            resume = validator if ranges and not validator.startswith("W/") else ""
            declared = response.headers.get("Content-Length")
            expected = None if declared is None else offset + int(declared)
            if expected is not None:
                download.check_size(expected)
            download.write_body(response.iter_raw(), partial, offset, expected)
        gzipped = "gzip" in encoding.lower() and not name.lower().endswith(".gz")  # decompressed by the readers
        stored = download.folder / (f"{name}.gz" if gzipped else name)
        os.replace(partial, stored)
        if validator:
            return FetchedData([stored], validator.strip('"'))
        with open(stored, "rb") as handle:
            return FetchedData([stored], "sha256:" + hashlib.file_digest(handle, "sha256").hexdigest())

    try:
        with Watchdog(download.deadline) as watchdog, http_client(download, watchdog) as client:
            return download.retried(lambda: attempt(client), is_retryable, f"GET {mask_url(download.uri)}")
    except GaveUp as gave_up:
        raise _http_failure(download, gave_up.last, gave_up.attempts) from None
    except httpx2.HTTPError as error:  # an answer that is not retried (401/403/404...), too many redirects
        raise _http_failure(download, error, 1) from None
    finally:
        partial.unlink(missing_ok=True)


def _http_failure(download: Download, error: BaseException, attempts: int) -> DatasetSourceError:
    """The one line of a download that got no usable answer (after ``attempts`` tries)."""
    import httpx2

    if isinstance(error, httpx2.HTTPStatusError):
        code = error.response.status_code
        meaning = {401: "authentication required", 403: "access denied", 404: "not found"}.get(code)
        final_url = str(error.response.url)
        where = f" at {mask_url(final_url)!r} (redirected)" if final_url != download.uri else ""
        return download.error(f"HTTP {code} ({meaning or error.response.reason_phrase}){where}")
    if isinstance(error, httpx2.TooManyRedirects):
        return download.error(f"more than {MAX_REDIRECTS} redirects (a loop?); use the final http(s) URL")
    if is_tls_error(error):
        return download.error(f"TLS verification failed: {error}")
    if isinstance(error, httpx2.ConnectError):
        return download.error(f"cannot connect after {attempts} attempts: {error}")
    return download.error(f"{describe(error)} after {attempts} attempts")
