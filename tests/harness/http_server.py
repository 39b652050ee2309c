"""Loopback HTTP servers for download tests (a file server with scripted answers, a cutting server), and the other
loopback servers' plumbing: :class:`QuietHandler` and :class:`LoopbackServer`.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class ScriptedResponse:
    """A response served instead of the file: status, body, headers, and a delay before answering."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for servers that take a port rather than pick one)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class QuietHandler(BaseHTTPRequestHandler):
    """The loopback servers' request handler: HTTP/1.1, no log lines, :meth:`body` and :meth:`reply` helpers."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        """Silent: the servers record their requests themselves."""

    def body(self) -> bytes:
        """The request body (``Content-Length`` bytes)."""
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def reply(self, status: int, body: Any = b"", headers: dict[str, str] | None = None, send_body: bool = True):
        """Answers ``status`` with ``body`` (bytes as they are, ``None`` empty, anything else as JSON) and a length."""
        headers = dict(headers or {})
        if body is None:
            body = b""
        elif not isinstance(body, bytes):
            body = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        headers.setdefault("Content-Length", str(len(body)))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(body)


class LoopbackServer(ThreadingHTTPServer):
    """A threading HTTP server on a free 127.0.0.1 port, serving from a daemon thread from construction on."""

    daemon_threads = True

    def __init__(
        self, handler: type[BaseHTTPRequestHandler], name: str = "loopback-http", poll_s: float = 0.5, tls=None
    ) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        if tls is not None:  # an ssl.SSLContext: serve HTTPS
            self.socket = tls.wrap_socket(self.socket, server_side=True)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.thread = threading.Thread(target=self.serve_forever, args=(poll_s,), name=name, daemon=True)
        self.thread.start()

    def handle_error(self, request: object, client_address: object) -> None:
        """Ignores errors such as a client that hung up before a delayed response."""

    def stop(self) -> None:
        """Stops serving and closes the socket."""
        self.shutdown()
        self.server_close()
        self.thread.join(timeout=10)


class FileServer:
    """Serves files under :attr:`root` (``url_for``); :meth:`script`-ed answers come first, in order, per path.

    :attr:`requests` records every request in order.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.requests: list[RecordedRequest] = []
        self._scripts: dict[str, deque[ScriptedResponse]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._httpd = LoopbackServer(self._handler_class(), "http-file-server")
        self.url = self._httpd.url

    def url_for(self, relative: str) -> str:
        """The URL of ``root / relative``."""
        return f"{self.url}/{relative.lstrip('/')}"

    def script(self, path: str, *responses: ScriptedResponse | int) -> None:
        """Queues responses for ``path`` (``/a/b.jsonl``); ints are bare statuses."""
        with self._lock:
            for response in responses:
                self._scripts[path].append(
                    response if isinstance(response, ScriptedResponse) else ScriptedResponse(response)
                )

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(QuietHandler):
            def _answer(self, send_body: bool) -> None:
                path = self.path.split("?", 1)[0]
                with server._lock:
                    server.requests.append(RecordedRequest(self.command, path, dict(self.headers)))
                    queue = server._scripts.get(path)
                    scripted = queue.popleft() if queue else None
                if scripted is not None:
                    time.sleep(scripted.delay_s)
                    return self.reply(scripted.status, scripted.body, scripted.headers, send_body)
                file = (server.root / path.lstrip("/")).resolve()
                if server.root.resolve() not in file.parents or not file.is_file():
                    return self.reply(404, b"not found", send_body=send_body)
                body = file.read_bytes()
                headers = {
                    "ETag": f'"{hashlib.sha256(body).hexdigest()[:16]}"',
                    "Last-Modified": formatdate(file.stat().st_mtime, usegmt=True),
                    "Content-Type": "application/octet-stream",
                }
                self.reply(200, body, headers, send_body)

            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                self._answer(send_body=True)

            def do_HEAD(self) -> None:  # noqa: N802 - stdlib name
                self._answer(send_body=False)

        return Handler

    def stop(self) -> None:
        """Stops the server and closes its socket."""
        self._httpd.stop()


@pytest.fixture
def http_file_server(tmp_path: Path) -> Iterator[FileServer]:
    """A :class:`FileServer` on 127.0.0.1 serving ``tmp_path / "http-root"``."""
    root = tmp_path / "http-root"
    root.mkdir()
    server = FileServer(root)
    try:
        yield server
    finally:
        server.stop()


class CuttingServer:
    """Serves ``/chat.jsonl``; its first GET sends half the body and hangs up (``requests``: each GET's headers).

    Args:
        versions: ``(body, ETag)`` served by each GET in turn, the last one from then on (two: the file changed between
            the cut and the resume).
        ranges: Whether ``Range`` is honoured (and ``Accept-Ranges: bytes`` said).
        checks_if_range: Whether a ``Range`` counts only while ``If-Range`` names the ETag served now (a correct
            server); without, a changed file is answered ``206`` from the new version at the old offset.
    """

    def __init__(self, versions: list[tuple[bytes, str]], ranges: bool = True, checks_if_range: bool = True) -> None:
        self.requests: list[dict[str, str]] = []
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                served = len(server.requests)
                server.requests.append(dict(self.headers))
                data, etag = versions[min(served, len(versions) - 1)]
                wanted = self.headers.get("Range", "")
                start = 0
                if (
                    ranges
                    and wanted.startswith("bytes=")
                    and (not checks_if_range or self.headers.get("If-Range") == etag)
                ):
                    start = int(wanted[len("bytes=") :].rstrip("-"))
                self.send_response(206 if start else 200)
                self.send_header("ETag", etag)
                if ranges:
                    self.send_header("Accept-Ranges", "bytes")
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                if served == 0:
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                self.wfile.write(data[start:])

        self.httpd = LoopbackServer(Handler, "cutting-server")
        self.url = f"{self.httpd.url}/chat.jsonl"

    def close(self) -> None:
        """Stops the server and closes its socket."""
        self.httpd.stop()


@pytest.fixture
def cutting_server() -> Iterator:
    """Starts :class:`CuttingServer` s (``cutting_server(versions, ranges=..., checks_if_range=...)``), closed after."""
    servers: list[CuttingServer] = []

    def start(versions: list[tuple[bytes, str]], ranges: bool = True, checks_if_range: bool = True) -> CuttingServer:
        servers.append(CuttingServer(versions, ranges, checks_if_range))
        return servers[-1]

    yield start
    for server in servers:
        server.close()
