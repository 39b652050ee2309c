"""A TCP proxy on 127.0.0.1 that fails the way networks and API servers do, switchable while a test runs.

Modes: ``forward`` (each answer optionally held back ``latency`` seconds), ``blackhole`` (reads, never answers),
``refuse`` (nothing listens) and ``status`` (answers every request with a Kubernetes ``Status``). Switching to
``refuse`` or ``status`` closes the open connections, as a restarting server does; ``blackhole`` stalls them.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

MODES = ("forward", "blackhole", "refuse", "status")
_REASONS = {403: "Forbidden", 404: "NotFound", 409: "AlreadyExists", 410: "Gone", 429: "TooManyRequests"}


class TcpProxy:
    """A proxy to ``upstream`` (``(host, port)``; ``None``: the failing modes only) in one of :data:`MODES`."""

    def __init__(
        self, upstream: tuple[str, int] | None = None, mode: str = "forward", status: int = 503, latency: float = 0.0
    ) -> None:
        self.upstream = upstream
        self.mode = mode
        self.status = status
        self.latency = latency
        self.connections = 0
        self.answered = 0
        self.port = 0
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> TcpProxy:  # on a free port, kept across ``refuse``
        self._listen()
        self._thread = threading.Thread(target=self._accept_loop, name="tcp-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._close_listener()
        self._drop_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def set_mode(self, mode: str, status: int | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}: must be one of {MODES}")
        with self._lock:
            previous, self.mode = self.mode, mode
            if status is not None:
                self.status = status
        if mode != "blackhole" or previous != "forward":
            self._drop_connections()
        if mode == "refuse":
            self._close_listener()
        elif self._listener is None:
            self._listen()

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.05)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener

    def _close_listener(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes an accept() blocked on it
            listener.close()
            self._stopped.wait(0.1)  # let the accept loop leave the closed socket: from now on connects are refused

    def _drop_connections(self) -> None:
        with self._lock:
            sockets, self._open = list(self._open), set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            listener = self._listener
            if listener is None:
                self._stopped.wait(0.02)
                continue
            try:
                client, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            client.settimeout(None)
            self.connections += 1
            self._track(client)
            mode = self.mode
            target = {"forward": self._forward, "blackhole": self._blackhole, "status": self._answer}.get(mode)
            if target is None:
                client.close()
                continue
            threading.Thread(target=target, args=(client,), name=f"tcp-proxy-{mode}", daemon=True).start()

    def _blackhole(self, client: socket.socket) -> None:
        with contextlib.suppress(OSError), client:
            while client.recv(65536):
                pass

    def _forward(self, client: socket.socket) -> None:
        assert self.upstream is not None, "forward mode needs an upstream"
        try:
            server = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            client.close()
            return
        server.settimeout(None)
        self._track(server)

        def pump(source: socket.socket, sink: socket.socket, requests: bool) -> None:
            with contextlib.suppress(OSError):
                while data := source.recv(65536):
                    if self.latency and not requests:
                        time.sleep(self.latency)
                    if self.mode == "forward" or not requests:
                        sink.sendall(data)  # else: the hung server never sees the request
            if self.mode != "forward":
                return  # a hung server does not close the connection either
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=pump, args=(server, client, False), daemon=True).start()
        pump(client, server, True)

    def _answer(self, client: socket.socket) -> None:
        with contextlib.suppress(OSError), client, client.makefile("rb") as reader:
            while reader.readline():  # the request line; then its headers and body are read past
                length = int(http.client.parse_headers(reader).get("Content-Length") or 0)
                reader.read(length)
                status = self.status
                reason = _REASONS.get(status, "InternalError" if status >= 500 else "BadRequest")
                message = f"proxy answers {status} to every request"
                status_object = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status}
                body = json.dumps({**status_object, "message": message, "reason": reason}).encode()
                self.answered += 1  # counted before the answer leaves, so a client that has it sees the count
                client.sendall(
                    f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )


@contextlib.contextmanager
def tcp_proxy(
    upstream: tuple[str, int] | None = None, mode: str = "forward", status: int = 503, latency: float = 0.0
) -> Iterator[TcpProxy]:
    proxy = TcpProxy(upstream, mode, status, latency).start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture
def blackhole() -> Iterator[TcpProxy]:
    with tcp_proxy(mode="blackhole") as proxy:
        yield proxy


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
