"""The HTTP file server fixture: files, 404s, scripted statuses and delays, as seen by urllib."""

import urllib.error
import urllib.request

import pytest

from tests.harness.http_server import ScriptedResponse


def _get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, dict(response.headers), response.read()


def test_serves_files_with_length_and_etag(http_file_server):
    (http_file_server.root / "sub").mkdir()
    (http_file_server.root / "sub" / "a.jsonl").write_bytes(b'{"x": 1}\n')
    status, headers, body = _get(http_file_server.url_for("sub/a.jsonl"))
    assert (status, body) == (200, b'{"x": 1}\n')
    assert headers["Content-Length"] == "9"
    assert headers["ETag"].startswith('"') and len(headers["ETag"]) == 18
    assert [(r.method, r.path) for r in http_file_server.requests] == [("GET", "/sub/a.jsonl")]


def test_missing_file_and_path_escape_are_404(http_file_server):
    (http_file_server.root.parent / "secret.txt").write_text("no")
    for relative in ("absent.jsonl", "../secret.txt", "%2e%2e/secret.txt"):
        with pytest.raises(urllib.error.HTTPError) as error:
            _get(http_file_server.url_for(relative))
        assert error.value.code == 404


def test_scripted_responses_come_first_then_the_file(http_file_server):
    (http_file_server.root / "a.jsonl").write_bytes(b"data\n")
    http_file_server.script("/a.jsonl", 503, ScriptedResponse(403, b"denied", {"X-Reason": "test"}))
    with pytest.raises(urllib.error.HTTPError) as first:
        _get(http_file_server.url_for("a.jsonl"))
    with pytest.raises(urllib.error.HTTPError) as second:
        _get(http_file_server.url_for("a.jsonl"))
    assert (first.value.code, second.value.code) == (503, 403)
    assert second.value.read() == b"denied" and second.value.headers["X-Reason"] == "test"
    assert _get(http_file_server.url_for("a.jsonl"))[2] == b"data\n"
    assert len(http_file_server.requests) == 3


def test_scripted_delay_triggers_a_client_timeout(http_file_server):
    (http_file_server.root / "slow.jsonl").write_bytes(b"x\n")
    http_file_server.script("/slow.jsonl", ScriptedResponse(200, b"late\n", delay_s=1.0))
    with pytest.raises((TimeoutError, urllib.error.URLError)) as error:
        _get(http_file_server.url_for("slow.jsonl"), timeout=0.2)
    assert "timed out" in str(error.value)
    assert _get(http_file_server.url_for("slow.jsonl"))[2] == b"x\n"
