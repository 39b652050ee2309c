"""An OpenAI-compatible completions server on 127.0.0.1: what a vLLM predictor answers a smoke request with.

Fixture ``openai_stub``: a :class:`CompletionServer` on a free loopback port answering ``POST /v1/completions`` as
vLLM's ``api_server`` does (``{"object": "text_completion", "choices": [{"index": 0, "text": ...}], ...}``) for the
served model name it was given, ``404`` with vLLM's error body for any other model; ``.requests`` records every body.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from tests.harness.http_server import LoopbackServer, QuietHandler


class CompletionServer:
    """A running stub; ``url`` is its base URL, ``served_name`` the model it serves, ``answer`` the text it returns."""

    def __init__(self, served_name: str = "tiny-chat", answer: str = " Hello! How can I help?") -> None:
        self.served_name, self.answer = served_name, answer
        self.requests: list[dict] = []
        #: Seconds between the bytes of an answer's body (0: sent at once): a server that trickles its answer.
        self.trickle_s = 0.0
        self._server = LoopbackServer(self._handler(), "openai-stub")
        self.url = self._server.url

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.0"

            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                body = json.loads(self.body() or b"{}")
                stub.requests.append({"path": self.path, "body": body})
                if self.path != "/v1/completions":
                    status, answer = 404, {"detail": "Not Found"}
                elif body.get("model") != stub.served_name:
                    message = f"The model `{body.get('model')}` does not exist."
                    status, answer = 404, {"object": "error", "message": message, "type": "NotFoundError", "code": 404}
                else:
                    status = 200
                    answer = {
                        "id": "cmpl-test",
                        "object": "text_completion",
                        "model": stub.served_name,
                        "choices": [{"index": 0, "text": stub.answer, "finish_reason": "length", "logprobs": None}],
                        "usage": {"prompt_tokens": 4, "completion_tokens": 8, "total_tokens": 12},
                    }
                data = json.dumps(answer).encode()
                self.reply(status, data, {"Content-Type": "application/json"}, send_body=not stub.trickle_s)
                for index in range(len(data) if stub.trickle_s else 0):  # one byte at a time, until the client gives up
                    try:
                        self.wfile.write(data[index : index + 1])
                        self.wfile.flush()
                    except OSError:
                        return
                    time.sleep(stub.trickle_s)

        return Handler

    def stop(self) -> None:
        """Stops the server."""
        self._server.stop()


@pytest.fixture
def openai_stub() -> Iterator[CompletionServer]:
    """A :class:`CompletionServer` serving ``tiny-chat``; stopped after the test."""
    server = CompletionServer()
    try:
        yield server
    finally:
        server.stop()
