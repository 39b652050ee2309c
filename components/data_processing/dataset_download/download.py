"""One fetch's bounds, shared by the sources: size cap, overall deadline, retries, one-line errors.

README, "Time limits and retries": why a :class:`Watchdog` shuts the sockets at the deadline.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from components._common import retry
from components._common.masking import mask_url

from .locations import DatasetSourceError, free_space, is_disk_full
from .request import SourceOptions

T = TypeVar("T")
LOG = logging.getLogger(__name__)
#: Redirects are followed only to these schemes (never ``ftp://``, ``file://``), at most this many times.
REDIRECT_SCHEMES = ("http", "https")
MAX_REDIRECTS = 5


@dataclass(frozen=True)
class HttpOptions:
    """How each request behaves: stall timeout, attempts, first backoff (doubling), longest ``Retry-After`` obeyed."""

    timeout_s: float = 60.0
    attempts: int = 4
    backoff_s: float = 1.0
    max_retry_after_s: float = 60.0


class DownloadDeadlineExceeded(DatasetSourceError):
    """The fetch outlived ``download_deadline_s`` (a slow or trickling server); never retried."""


class Download:
    """One fetch of ``source`` into ``folder``: its one-line errors, its size cap and its deadline."""

    def __init__(self, source: SourceOptions, folder: Path, http: HttpOptions) -> None:
        self.source, self.folder, self.http = source, folder, http
        self.uri = source.dataset_uri
        self.deadline = time.monotonic() + source.download_deadline_s

    def error(self, text: str) -> DatasetSourceError:
        """``dataset_uri='<the URI, masked>': text``."""
        return DatasetSourceError(f"dataset_uri={mask_url(self.uri)!r}: {text}")

    def check_size(self, size: int) -> None:
        """Refuses ``size`` bytes over ``max_download_bytes``."""
        if size > self.source.max_download_bytes:
            raise self.error(f"{size} bytes exceed max_download_bytes={self.source.max_download_bytes}")

    def deadline_error(self) -> DownloadDeadlineExceeded:
        """The one line of a fetch that outlived its deadline."""
        return DownloadDeadlineExceeded(
            f"dataset_uri={mask_url(self.uri)!r}: download deadline of {self.source.download_deadline_s:g} s "
            "exceeded (the server is too slow or stalls); retry later, or copy the file to S3 or a PVC"
        )

    def check_deadline(self) -> None:
        """Raises :meth:`deadline_error` once the deadline has passed."""
        if time.monotonic() > self.deadline:
            raise self.deadline_error()

    def retried(self, call: Callable[[], T], retryable: Callable[[BaseException], bool], what: str) -> T:
        """``call()`` under the retry policy and the deadline (``GaveUp`` after the last attempt), retries logged."""

        def log(attempt: int, wait_s: float, error: BaseException) -> None:
            LOG.warning("%s: attempt %d failed (%s); retrying in %.1f s", what, attempt, retry.describe(error), wait_s)

        options = self.http
        policy = retry.RetryPolicy(options.attempts, options.backoff_s, max_retry_after_s=options.max_retry_after_s)
        try:
            return retry.call_with_retries(call, policy, retryable=retryable, on_retry=log, deadline=self.deadline)
        except retry.GaveUp as gave_up:
            if gave_up.reason == "deadline":
                raise self.deadline_error() from None
            raise

    def write_body(self, chunks: Iterable[bytes], partial: Path, offset: int, needed: int | None) -> None:
        """Writes ``chunks`` into ``partial`` from ``offset`` within the cap and the deadline (``needed``: bytes)."""
        written = offset
        try:
            with open(partial, "r+b" if offset else "wb") as handle:
                handle.seek(offset)
                handle.truncate()
                for chunk in chunks:
                    written += len(chunk)
                    self.check_size(written)
                    handle.write(chunk)
                    self.check_deadline()
        except DatasetSourceError:
            raise
        except Exception as error:  # the stream broke off (the watchdog's doing at the deadline), or the disk is full
            if is_disk_full(error):
                raise self.disk_full(partial.parent, needed, written) from None
            if time.monotonic() > self.deadline:
                raise self.deadline_error() from None
            raise

    def disk_full(self, folder: Path, needed: int | None, written: int | None) -> DatasetSourceError:
        """The one line for a download that filled its scratch folder (``None``: unknown)."""
        need = f"needs {needed} bytes" if needed is not None else "needs more (size unknown)"
        after = f" after {written} bytes" if written is not None else ""
        return self.error(
            f"the scratch folder {folder} is full (No space left on device){after}; the download {need} "
            f"({free_space(folder)} there); nothing was kept: give the step more ephemeral storage, or set TMPDIR to "
            "a folder on a larger volume (e.g. the workspace PVC), or lower max_download_bytes"
        )


def is_retryable(error: BaseException, final: tuple[type[BaseException], ...] = ()) -> bool:
    """Whether a request is worth another try: 408/429/5xx or no answer; never a TLS failure, nor ours or ``final``."""
    import httpx2

    if retry.is_tls_error(error):
        return False
    for cause in retry.error_chain(error):
        if isinstance(cause, (DatasetSourceError, *final)):
            return False
        if retry.status_of(cause) is not None:
            return retry.status_of(cause) in retry.TRANSIENT_STATUSES
        if isinstance(cause, (httpx2.TransportError, ConnectionError, TimeoutError)):
            return True
    return False


class Watchdog:
    """Shuts down the streams of a download at its deadline (:meth:`watch`), waking any read blocked on them."""

    def __init__(self, deadline: float) -> None:
        self._shutdowns: list[Callable[[], object]] = []
        self._lock = threading.Lock()
        self._expired = False
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()

    def watch(self, shutdown: Callable[[], object]) -> None:
        """Adds a stream's ``shutdown`` to call at the deadline (at once if it has passed)."""
        with self._lock:
            self._shutdowns.append(shutdown)
        if self._expired:
            self._expire()

    def _expire(self) -> None:
        self._expired = True
        with self._lock:
            for shutdown in self._shutdowns:  # shutting a socket twice is harmless
                with contextlib.suppress(OSError):
                    shutdown()


def tls_context() -> ssl.SSLContext:
    """A verifying TLS context; ``SSL_CERT_FILE`` or ``REQUESTS_CA_BUNDLE`` adds a CA bundle (e.g. a cluster CA)."""
    bundle = os.environ.get("SSL_CERT_FILE") or os.environ.get("REQUESTS_CA_BUNDLE")
    return ssl.create_default_context(cafile=bundle or None)


def http_client(download: Download, watchdog: Watchdog, *request_hooks: Callable[[Any], object]) -> Any:
    """An ``httpx2.Client`` bounded by ``download`` (plain HTTP, and ``huggingface_hub`` through its client factory).

    The stall timeout; the deadline checked before each request and on each chunk, each socket given to ``watchdog``;
    redirects only to :data:`REDIRECT_SCHEMES`, at most :data:`MAX_REDIRECTS` times.
    """
    import httpx2

    class Bounded(httpx2.SyncByteStream):
        def __init__(self, inner: httpx2.SyncByteStream) -> None:
            self._inner = inner

        def __iter__(self) -> Iterable[bytes]:
            for chunk in self._inner:
                download.check_deadline()
                yield chunk

        def close(self) -> None:
            self._inner.close()

    def trace(event: str, info: dict) -> None:
        if event == "connection.connect_tcp.complete":
            sock = info["return_value"].get_extra_info("socket")
            watchdog.watch(functools.partial(sock.shutdown, socket.SHUT_RDWR))

    def before(request: httpx2.Request) -> None:
        download.check_deadline()
        request.extensions["trace"] = trace

    def after(response: httpx2.Response) -> None:
        response.stream = Bounded(response.stream)
        if response.has_redirect_location:
            target = urllib.parse.urljoin(str(response.request.url), response.headers["Location"])
            scheme = urllib.parse.urlsplit(target).scheme.lower()
            if scheme not in REDIRECT_SCHEMES:
                raise download.error(
                    f"HTTP {response.status_code} redirected to {mask_url(target)!r}: only "
                    f"{'/'.join(REDIRECT_SCHEMES)} redirects are followed, not {scheme or '(no scheme)'}://; use the "
                    "final http(s) URL"
                )

    return httpx2.Client(
        event_hooks={"request": [*request_hooks, before], "response": [after]},
        follow_redirects=True,
        max_redirects=MAX_REDIRECTS,
        timeout=httpx2.Timeout(download.http.timeout_s),
        verify=tls_context(),
    )
