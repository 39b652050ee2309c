"""A stateful stub of the Hugging Face Hub API on 127.0.0.1 (fixture ``hub_stub``): datasets, gated, private."""

from __future__ import annotations

import hashlib
import json
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

import pytest

from tests.harness.http_server import LoopbackServer, QuietHandler

_INFO = re.compile(r"^/api/datasets/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^?]+))?$")
_RESOLVE = re.compile(r"^/datasets/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")


@dataclass
class StubRepo:
    """A dataset repository on the stub: one commit ``sha`` (also reachable as ``main``) and its files."""

    sha: str
    files: dict[str, bytes]
    gated: bool = False


@dataclass
class HubStub:
    """The Hub endpoints ``huggingface_hub`` calls for ``dataset_info`` and ``hf_hub_download``."""

    repos: dict[str, StubRepo] = field(default_factory=dict)
    required_token: str = ""
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    url: str = ""
    failures: dict[str, list[tuple[int, dict[str, str]]]] = field(default_factory=dict)

    def fail_next(self, what: str, *answers: tuple[int, dict[str, str]]) -> None:
        """Answers the next requests for ``what`` (``"info"`` or a file path) with these statuses and headers."""
        self.failures.setdefault(what, []).extend(answers)

    def add(self, repo_id: str, files: dict[str, bytes], gated: bool = False) -> StubRepo:
        """Adds a repository; its commit sha is derived from its content."""
        digest = hashlib.sha1(json.dumps(sorted((k, v.hex()) for k, v in files.items())).encode()).hexdigest()
        self.repos[repo_id] = StubRepo(digest, files, gated)
        return self.repos[repo_id]


def _handler(stub: HubStub) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def _error(self, status: int, code: str, head: bool) -> None:
            self.reply(status, json.dumps({"error": code}).encode(), {"X-Error-Code": code}, not head)

        def _answer(self, head: bool) -> None:
            path = urllib.parse.unquote(self.path.split("?", 1)[0])
            stub.requests.append((self.command, path, self.headers.get("Authorization", "")))
            if stub.required_token and self.headers.get("Authorization") != f"Bearer {stub.required_token}":
                return self._error(401, "RepoNotFound", head)
            match = _INFO.match(path) or _RESOLVE.match(path)
            what = "info" if match and match.re is _INFO else match["path"] if match else ""
            if stub.failures.get(what):
                status, headers = stub.failures[what].pop(0)
                return self.reply(status, json.dumps({"error": "scripted"}).encode(), headers, not head)
            repo = stub.repos.get(match["repo"]) if match else None
            if repo is None:
                return self._error(404, "RepoNotFound", head)
            if repo.gated:
                return self._error(403, "GatedRepo", head)
            revision = match["rev"] or "main"
            if revision not in (repo.sha, "main"):
                return self._error(404, "RevisionNotFound", head)
            if match.re is _INFO:
                siblings = [{"rfilename": name, "size": len(data)} for name, data in sorted(repo.files.items())]
                info = {"id": match["repo"], "sha": repo.sha, "siblings": siblings, "private": False}
                return self.reply(200, info, send_body=not head)
            data = repo.files.get(match["path"])
            if data is None:
                return self._error(404, "EntryNotFound", head)
            etag = f'"{hashlib.sha256(data).hexdigest()[:32]}"'
            self.reply(200, data, {"X-Repo-Commit": repo.sha, "ETag": etag}, not head)

        def do_GET(self) -> None:  # noqa: N802
            self._answer(head=False)

        def do_HEAD(self) -> None:  # noqa: N802
            self._answer(head=True)

    return Handler


@pytest.fixture
def hub_stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubStub]:
    """A Hub stub on 127.0.0.1; ``HF_ENDPOINT`` points at it and Hub offline mode is lifted for this test."""
    import huggingface_hub.constants

    stub = HubStub()
    server = LoopbackServer(_handler(stub), "hub-stub")
    stub.url = server.url
    monkeypatch.setenv("HF_ENDPOINT", stub.url)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    try:
        yield stub
    finally:
        server.stop()
