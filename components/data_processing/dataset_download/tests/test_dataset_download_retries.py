"""Retries and resumes against real loopback servers (Hub 429/503, bodies cut over HTTP and S3), the deadline; a resume
never splices two versions, redirects never leave http(s), a full scratch disk is one line."""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import threading
import time
from pathlib import Path

import pytest

from components.data_processing.dataset_download.download import DownloadDeadlineExceeded, HttpOptions
from components.data_processing.dataset_download.locations import DatasetSourceError
from tests.harness.http_server import ScriptedResponse
from tests.harness.requests import fetch_dataset, run_dataset_step

ROW = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}
LINE = json.dumps(ROW).encode() + b"\n"
FAST = HttpOptions(timeout_s=5.0, attempts=4, backoff_s=0.01)


def _no_partial_files(root: Path) -> None:
    leftovers = [p for p in root.rglob("*") if p.suffix in (".part", ".incomplete", ".tmp") and p.is_file()]
    assert not leftovers, leftovers


def test_hub_metadata_and_file_calls_retry_429_and_503_honouring_retry_after(hub_stub, tmp_path):
    hub_stub.add("org/chat", {"train.jsonl": LINE * 3})
    hub_stub.fail_next("info", (429, {"Retry-After": "1"}), (503, {"Retry-After": "1"}))
    hub_stub.fail_next("train.jsonl", (503, {}))
    started = time.monotonic()
    fetched = fetch_dataset("org/chat", tmp_path / "dl", http=FAST)
    elapsed = time.monotonic() - started
    assert [path.read_bytes() for path in fetched.files] == [LINE * 3]
    info_calls = [r for r in hub_stub.requests if r[1].startswith("/api/datasets/")]
    assert len(info_calls) == 3
    assert 2.0 <= elapsed < 15, elapsed  # two Retry-After: 1 waits honoured (the backoff alone is 0.01 s)
    _no_partial_files(tmp_path / "dl")


def test_hub_retry_after_is_bounded_and_attempts_end_in_one_line(hub_stub, tmp_path):
    hub_stub.add("org/chat", {"train.jsonl": LINE})
    hub_stub.fail_next("info", *[(429, {"Retry-After": "3600"})] * 3)
    options = HttpOptions(timeout_s=5.0, attempts=3, backoff_s=0.01, max_retry_after_s=0.2)
    started = time.monotonic()
    with pytest.raises(DatasetSourceError) as error:
        fetch_dataset("org/chat", tmp_path / "dl", http=options)
    assert time.monotonic() - started < 5
    message = str(error.value)
    assert "\n" not in message and "'org/chat'" in message and "HTTP 429" in message and "after 3 attempts" in message
    hub_stub.requests.clear()
    with pytest.raises(DatasetSourceError, match=r"not found \(404\)"):
        fetch_dataset("org/absent", tmp_path / "dl", http=options)
    assert len([r for r in hub_stub.requests if r[1].startswith("/api/datasets/")]) == 1  # a 404 is final


@pytest.mark.parametrize("ranges", [True, False])
def test_an_http_body_cut_short_is_resumed_with_a_range_or_fetched_again(cutting_server, tmp_path, ranges):
    data = LINE * 4000
    server = cutting_server([(data, '"v1"')], ranges)
    fetched = fetch_dataset(server.url, tmp_path / "dl", http=FAST)
    assert fetched.files[0].read_bytes() == data and fetched.revision == "v1"
    assert len(server.requests) == 2
    resumed = server.requests[1].get("Range")
    assert resumed == (f"bytes={len(data) // 2}-" if ranges else None)
    _no_partial_files(tmp_path / "dl")


class CuttingProxy:
    """A TCP proxy to moto that hangs up in the middle of the first response to a GET naming ``marker``."""

    def __init__(self, upstream: str, marker: bytes, cut_after: int) -> None:
        host, port = upstream.rsplit("//", 1)[1].split(":")
        self.upstream, self.marker, self.cut_after, self.cuts_left = (host, int(port)), marker, cut_after, 1
        self.gets: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.listener.accept()
                threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.upstream)
        state = {"cut": False, "sent": 0}

        def requests() -> None:
            with contextlib.suppress(OSError):
                while data := client.recv(65536):
                    head = data.split(b"\r\n\r\n", 1)[0]
                    if data.startswith(b"GET ") and self.marker in head.split(b"\r\n", 1)[0]:
                        self.gets.append(head)
                        if self.cuts_left and b"range:" not in head.lower():
                            self.cuts_left -= 1
                            state.update(cut=True, sent=0)
                    upstream.sendall(data)

        threading.Thread(target=requests, daemon=True).start()
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                if state["cut"]:
                    room = self.cut_after - state["sent"]
                    if len(data) >= room:
                        client.sendall(data[:room])
                        break
                    state["sent"] += len(data)
                client.sendall(data)
        for sock in (client, upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self.listener.close()


def test_an_s3_body_cut_mid_way_is_resumed_from_where_it_stopped(s3_data_connection, s3_server, tmp_path, monkeypatch):
    client, bucket = s3_data_connection
    data = LINE * 20000  # ~1.6 MiB
    client.put_object(Bucket=bucket, Key="sets/big.jsonl", Body=data)
    proxy = CuttingProxy(s3_server, b"/sets/big.jsonl", cut_after=300_000)
    monkeypatch.setenv("AWS_S3_ENDPOINT", proxy.url)
    try:
        fetched = fetch_dataset(f"s3://{bucket}/sets/big.jsonl", tmp_path / "dl", http=FAST)
    finally:
        proxy.close()
    assert hashlib.sha256(fetched.files[0].read_bytes()).digest() == hashlib.sha256(data).digest()
    assert len(proxy.gets) == 2
    assert b"range: bytes=" in proxy.gets[1].lower() and b"range: bytes=0-" not in proxy.gets[1].lower()
    _no_partial_files(tmp_path / "dl")


def test_the_download_deadline_is_a_component_parameter(tmp_path):
    from components.data_processing.dataset_download.tests.test_dataset_download_hostile import TricklingServer

    server = TricklingServer(interval_s=0.3)
    try:
        started = time.monotonic()
        with pytest.raises(DownloadDeadlineExceeded, match=r"download deadline of 1 s exceeded"):
            run_dataset_step(server.url, tmp_path / "out", download_deadline_s=1)
        assert time.monotonic() - started < 5
    finally:
        server.close()
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
    with pytest.raises(ValueError, match=r"download_deadline_s=0 must be > 0"):
        run_dataset_step(server.url, tmp_path, download_deadline_s=0)


def test_a_resume_answered_with_another_version_restarts_from_zero_never_splicing(cutting_server, tmp_path):
    first = LINE * 4000
    second = json.dumps({"messages": [{"role": "user", "content": "v2"}, {"role": "assistant", "content": "two"}]})
    second = (second.encode() + b"\n") * 3000
    server = cutting_server([(first, '"v1"'), (second, '"v2"')], checks_if_range=False)  # ignores If-Range
    fetched = fetch_dataset(server.url, tmp_path / "dl", http=FAST)
    assert fetched.files[0].read_bytes() == second and fetched.revision == "v2"  # all of v2, nothing of v1
    ranges = [request.get("Range") for request in server.requests]
    assert ranges == [None, f"bytes={len(first) // 2}-", None]  # the spliced 206 was thrown away, then from byte 0
    _no_partial_files(tmp_path / "dl")


@pytest.mark.parametrize(
    "location, problem",
    [
        ("ftp://files.example.com/chat.jsonl", "not ftp://"),
        ("file:///etc/passwd.jsonl", "not file://"),
    ],
)
def test_a_redirect_out_of_http_is_refused_in_one_line_naming_the_final_url(
    http_file_server, tmp_path, location, problem
):
    (http_file_server.root / "chat.jsonl").write_bytes(LINE)
    http_file_server.script("/chat.jsonl", ScriptedResponse(302, headers={"Location": location}))
    with pytest.raises(DatasetSourceError) as error:
        fetch_dataset(http_file_server.url_for("chat.jsonl"), tmp_path / "dl", http=FAST)
    message = str(error.value)
    assert "\n" not in message and f"redirected to '{location}'" in message and problem in message
    assert len(http_file_server.requests) == 1  # refused, not retried
    assert not (tmp_path / "dl").exists() or not list((tmp_path / "dl").iterdir())


def test_a_redirect_loop_ends_in_one_line(http_file_server, tmp_path):
    http_file_server.script("/a.jsonl", *[ScriptedResponse(302, headers={"Location": "/b.jsonl"})] * 20)
    http_file_server.script("/b.jsonl", *[ScriptedResponse(302, headers={"Location": "/a.jsonl"})] * 20)
    with pytest.raises(DatasetSourceError) as error:
        fetch_dataset(http_file_server.url_for("a.jsonl"), tmp_path / "dl", http=FAST)
    message = str(error.value)
    assert "\n" not in message and "more than 5 redirects" in message
    assert len(http_file_server.requests) == 6


def test_a_redirect_within_http_is_followed_and_an_error_after_it_names_the_final_url(http_file_server, tmp_path):
    (http_file_server.root / "moved").mkdir()
    (http_file_server.root / "moved" / "chat.jsonl").write_bytes(LINE * 2)
    for status in (307, 301):
        http_file_server.script("/chat.jsonl", ScriptedResponse(status, headers={"Location": "/moved/chat.jsonl"}))
    fetched = fetch_dataset(http_file_server.url_for("chat.jsonl"), tmp_path / "dl", http=FAST)
    assert fetched.files[0].read_bytes() == LINE * 2
    (http_file_server.root / "moved" / "chat.jsonl").unlink()
    with pytest.raises(DatasetSourceError) as error:
        fetch_dataset(http_file_server.url_for("chat.jsonl"), tmp_path / "dl", http=FAST)
    message = str(error.value)
    assert "HTTP 404 (not found)" in message and f"at '{http_file_server.url_for('moved/chat.jsonl')}'" in message


@pytest.mark.parametrize("source", ["s3", "http"])
def test_a_full_scratch_folder_names_the_folder_the_need_and_what_to_set(
    s3_data_connection, http_file_server, small_disk, source
):
    body = LINE * 40_000  # ~2.4 MiB: more than the 1 MiB scratch disk
    client, bucket = s3_data_connection
    client.put_object(Bucket=bucket, Key="sets/big.jsonl", Body=body)
    (http_file_server.root / "chat.jsonl").write_bytes(body)
    uri = f"s3://{bucket}/sets/big.jsonl" if source == "s3" else http_file_server.url_for("chat.jsonl")
    with pytest.raises(DatasetSourceError) as error:
        fetch_dataset(uri, small_disk / "dl", http=FAST)
    message = str(error.value)
    assert "\n" not in message and f"the scratch folder {small_disk / 'dl'}" in message
    assert "is full (No space left on device)" in message
    assert f"needs {len(body)} bytes" in message and "TMPDIR" in message
    assert len(http_file_server.requests) == (source == "http")  # a full disk is not retried
    assert [p for p in (small_disk / "dl").rglob("*") if p.is_file()] == []  # no partial file left


GOOD = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]}
LONE_SURROGATE_ROW = '{"messages":[{"role":"user","content":"hi \\ud800 there"},{"role":"assistant","content":"ok"}]}'
BAD_CSV_CELL = '"[{""role"": ""user"", ""content"": ""hi""}, {""role"": ""assistant"" ""content"": ""x""}]"'


def _bad_files(folder: Path) -> dict[str, tuple[str, str]]:
    """name -> (where the bad row is, what the line says about it)."""
    good = json.dumps(GOOD)
    (folder / "rows.json").write_text(f"[{LONE_SURROGATE_ROW},\n{good}]")
    cell = json.dumps(GOOD["messages"]).replace('"', '""')
    (folder / "rows.csv").write_text(f'messages\n{BAD_CSV_CELL}\n"{cell}"\n')
    return {
        "rows.json": ("rows.json row 0 [invalid_json]", "lone UTF-16 surrogate"),
        "rows.csv": ("rows.csv:2 [invalid_json]", "the CSV column 'messages' holds invalid JSON"),
    }


@pytest.mark.parametrize("name", ["rows.json", "rows.csv"])
def test_a_bad_row_is_named_with_its_file_row_and_rule_and_can_be_dropped(tmp_path, name):
    from components.data_processing.dataset_download.validation_report import DatasetValidationError

    where, what = _bad_files(tmp_path)[name]
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(DatasetValidationError) as error:
        run_dataset_step(str(tmp_path / name), out)
    first = str(error.value).splitlines()[0]
    assert where in first and what in first
    assert list(out.iterdir()) == []  # nothing half-written
    result = run_dataset_step(
        str(tmp_path / name), out, on_invalid="drop", max_invalid_fraction=0.5, train_split_ratio=1.0
    )
    assert result.validation.rows_valid == 1
    assert [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()] == [GOOD]
