"""Time limits and retries of downloads: the options, the retries of the calls whose client has none, the deadline.

Each client retries with its own settings where it has them (``huggingface_hub``'s file downloads, botocore);
:func:`retried` covers the others (``dataset_info``, urllib). A per-read (*stall*) timeout cannot bound a server that
sends one byte just often enough: the one overall *deadline* needs a clock outside the read (:class:`Watchdog` for
sockets, :func:`hub_deadline` for ``huggingface_hub``).
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import logging
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from components._common.masking import mask_url
from components._common.retry import RetryPolicy, call_with_retries, describe

from .locations import DatasetSourceError

T = TypeVar("T")
LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class HttpOptions:
    """How downloads behave: overall deadline, stall timeout, attempts, backoff between them (doubling).

    Attributes:
        deadline_s: Overall deadline of the fetch, every attempt and file included (``download_deadline_s``).
        timeout_s: Stall timeout: an attempt fails when no byte arrives for this long (connect included).
        attempts: Attempts of each request or body (botocore's ``max_attempts`` too).
        backoff_s: First pause between attempts, doubled after each.
        max_retry_after_s: The longest ``Retry-After`` a server may ask for.
    """

    deadline_s: float
    timeout_s: float = 60.0
    attempts: int = 4
    backoff_s: float = 1.0
    max_retry_after_s: float = 60.0


def check_deadline(download_deadline_s: float) -> float:
    """Returns ``download_deadline_s`` as a float, or raises ``ValueError`` naming it when it is not positive."""
    if isinstance(download_deadline_s, bool) or not isinstance(download_deadline_s, (int, float)):
        raise ValueError(f"download_deadline_s={download_deadline_s!r} must be a number of seconds")
    if not download_deadline_s > 0:
        raise ValueError(f"download_deadline_s={download_deadline_s!r} must be > 0 (seconds for the whole download)")
    return float(download_deadline_s)


def retried(
    call: Callable[[], T], options: HttpOptions, deadline: float, retryable: Callable[[BaseException], bool], what: str
) -> T:
    """``call()`` under the options' retry policy and the overall deadline, logging each retry with ``what`` it was.

    Raises:
        GaveUp: Every attempt failed transiently, or the next wait would pass the deadline.
    """

    def log(attempt: int, wait_s: float, error: BaseException) -> None:
        LOG.warning("%s: attempt %d failed (%s); retrying in %.1f s", what, attempt, describe(error), wait_s)

    policy = RetryPolicy(options.attempts, options.backoff_s, max_retry_after_s=options.max_retry_after_s)
    return call_with_retries(call, policy, retryable=retryable, on_retry=log, deadline=deadline)


class DownloadDeadlineExceeded(DatasetSourceError):
    """The fetch outlived :attr:`HttpOptions.deadline_s` (a slow or trickling server); never retried."""


class Watchdog:
    """Shuts down the streams of a download at its deadline, waking up any read blocked on them.

    :attr:`expired` tells the reader why its stream ended.
    """

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.expired = False
        self._shutdowns: list[Callable[[], object]] = []
        self._lock = threading.Lock()
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
            if self.expired:
                with contextlib.suppress(OSError):
                    shutdown()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for shutdown in self._shutdowns:
                with contextlib.suppress(OSError):
                    shutdown()


class _Watched:
    """Mixed into an ``http.client`` connection: registers its socket (TLS-wrapped for HTTPS) with a watchdog."""

    def __init__(self, *args, watchdog: Watchdog, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._watchdog = watchdog

    def connect(self) -> None:
        super().connect()
        self._watchdog.watch(functools.partial(self.sock.shutdown, socket.SHUT_RDWR))


class _WatchedHTTPConnection(_Watched, http.client.HTTPConnection):
    pass


class _WatchedHTTPSConnection(_Watched, http.client.HTTPSConnection):
    pass


class WatchedHandler(urllib.request.HTTPHandler, urllib.request.HTTPSHandler):
    """A ``urllib`` handler whose HTTP and HTTPS connections (a redirect may cross) register with a watchdog."""

    def __init__(self, watchdog: Watchdog, context: ssl.SSLContext) -> None:
        urllib.request.HTTPSHandler.__init__(self, context=context)
        self._watchdog = watchdog
        self._ssl_context = context

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        """Opens ``req`` on a watched connection."""
        return self.do_open(functools.partial(_WatchedHTTPConnection, watchdog=self._watchdog), req)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        """Opens ``req`` on a watched TLS connection."""
        connection = functools.partial(_WatchedHTTPSConnection, watchdog=self._watchdog)
        return self.do_open(connection, req, context=self._ssl_context)


def deadline_error(uri: str, deadline_s: float, size: int) -> DownloadDeadlineExceeded:
    """The one-line error of a fetch that outlived its deadline."""
    return DownloadDeadlineExceeded(
        f"dataset_uri={mask_url(uri)!r}: download deadline of {deadline_s:g} s exceeded after {size} bytes "
        "(the server is too slow or stalls); retry later, or copy the file to S3 or a PVC"
    )


@contextlib.contextmanager
def hub_deadline(uri: str, deadline: float, deadline_s: float, stall_timeout_s: float) -> Iterator[None]:
    """Bounds ``huggingface_hub``'s requests within the block: by a stall timeout and by an overall deadline.

    Once ``deadline`` (``time.monotonic()``) has passed, the next request or received chunk raises
    :class:`DownloadDeadlineExceeded`.
    """
    import httpx2
    from huggingface_hub.utils import _http as hub_http

    class DeadlineStream(httpx2.SyncByteStream):
        def __init__(self, inner: httpx2.SyncByteStream) -> None:
            self._inner = inner
            self.size = 0

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self._inner:
                self.size += len(chunk)
                if time.monotonic() > deadline:
                    raise deadline_error(uri, deadline_s, self.size)
                yield chunk

        def close(self) -> None:
            self._inner.close()

    def before(request: httpx2.Request) -> None:
        if time.monotonic() > deadline:
            raise deadline_error(uri, deadline_s, 0)

    def watched(response: httpx2.Response) -> None:
        response.stream = DeadlineStream(response.stream)

    def factory() -> httpx2.Client:
        hooks = {"request": [hub_http.hf_request_event_hook, before], "response": [watched]}
        return httpx2.Client(event_hooks=hooks, follow_redirects=True, timeout=httpx2.Timeout(stall_timeout_s))

    hub_http.set_client_factory(factory)
    try:
        yield
    finally:
        hub_http.set_client_factory(hub_http.default_client_factory)
