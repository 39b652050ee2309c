"""Hostile files and servers (trickling, SIGTERM, Hub failures): every case ends in one line naming the rule."""

from __future__ import annotations

import csv
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from components._common.chat_errors import ChatFormatError
from components.data_processing.dataset_download.download import DownloadDeadlineExceeded, HttpOptions
from components.data_processing.dataset_download.locations import DatasetSourceError
from tests.harness.http_server import LoopbackServer, QuietHandler
from tests.harness.requests import (
    fetch_dataset,
    run_dataset_step,
    validate_local_files,
)

ROW = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}
LINE = json.dumps(ROW).encode() + b"\n"
DEEP = b'{"messages": ' + b"[" * 10_000 + b"]" * 10_000 + b"}\n"
REPO_ROOT = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize("on_invalid", ["fail", "drop"])
def test_deeply_nested_json_is_a_reject_naming_the_rule(tmp_path, on_invalid):
    path = tmp_path / "deep.jsonl"
    path.write_bytes(LINE + DEEP + LINE)
    report = validate_local_files([path], "x", on_invalid=on_invalid, max_invalid_fraction=0.5)
    assert (report.rows_read, report.rows_valid, report.rejects_by_rule) == (3, 2, {"nesting_too_deep": 1})
    assert report.first_rejects[0].location == "deep.jsonl:2"
    assert report.passed is (on_invalid == "drop")
    (tmp_path / "deep.json").write_bytes(b"[" + LINE + b"," + DEEP + b"]")
    array = validate_local_files([tmp_path / "deep.json"], "x", on_invalid="drop", max_invalid_fraction=0.5)
    assert array.rejects_by_rule == {"nesting_too_deep": 1} and array.rows_valid == 1


def test_truncated_and_fake_gzip_name_the_file_and_the_rule(tmp_path):
    whole = gzip.compress(LINE * 2000)
    (tmp_path / "cut.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "fake.jsonl.gz").write_bytes(LINE)
    (tmp_path / "fake.json.gz").write_bytes(b"[" + LINE + b"]")
    (tmp_path / "fake.csv.gz").write_bytes(b"messages\n[]\n")
    for name in ("cut.jsonl.gz", "fake.jsonl.gz", "fake.json.gz", "fake.csv.gz"):
        with pytest.raises(ChatFormatError) as error:
            validate_local_files([tmp_path / name], "x", input_format="messages")
        message = str(error.value)
        assert message.startswith(f"{name} [bad_compression] the gzip stream breaks") and "\n" not in message
        assert "re-create or re-download" in message


def test_fake_and_truncated_parquet_name_the_file_and_the_rule(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([ROW] * 50), tmp_path / "whole.parquet")
    data = (tmp_path / "whole.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    (tmp_path / "fake.parquet").write_bytes(LINE)
    for name in ("cut.parquet", "fake.parquet"):
        with pytest.raises(ChatFormatError) as error:
            validate_local_files([tmp_path / name], "x", input_format="messages")
        assert str(error.value).startswith(f"{name} [bad_parquet] unreadable") and "\n" not in str(error.value)


def test_invalid_utf8_is_a_reject_per_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(LINE + '{"messages": [{"role": "user", "content": "café"}]}\n'.encode("latin-1") + LINE)
    report = validate_local_files([path], "x", on_invalid="drop", max_invalid_fraction=0.5)
    assert report.rejects_by_rule == {"invalid_utf8": 1} and report.rows_valid == 2
    assert report.first_rejects[0].location == "latin1.jsonl:2"
    (tmp_path / "latin1.csv").write_bytes(b'messages\n"[]"\n"caf\xe9"\n')
    rejected = validate_local_files([tmp_path / "latin1.csv"], "x", input_format="messages", on_invalid="drop")
    assert rejected.rejects_by_rule.get("invalid_utf8") == 1


def test_byte_order_marks_are_accepted_in_every_text_format(tmp_path):
    bom = b"\xef\xbb\xbf"
    (tmp_path / "a.jsonl").write_bytes(bom + LINE * 2)
    (tmp_path / "b.json").write_bytes(bom + json.dumps([ROW, ROW]).encode())
    with open(tmp_path / "c.csv", "w", encoding="utf-8-sig", newline="") as handle:
        csv.writer(handle).writerows([["messages"], [json.dumps(ROW["messages"])]])
    for name, rows in (("a.jsonl", 2), ("b.json", 2), ("c.csv", 1)):
        kept: list[bytes] = []
        report = validate_local_files([tmp_path / name], name, sink=kept.extend)
        assert (report.input_format, report.rows_valid, report.rows_rejected) == ("messages", rows, 0), name
        assert all(not line.startswith(bom) and json.loads(line)["messages"] == ROW["messages"] for line in kept)


def test_a_file_with_no_parseable_line_lists_its_bad_lines(tmp_path):
    path = tmp_path / "junk.jsonl"
    path.write_bytes(b"not json\n" + b"\xff\xfe\n" + DEEP)
    with pytest.raises(ValueError) as error:
        validate_local_files([path], "junk")
    message = str(error.value)
    assert "no readable row in the first 3 records of junk" in message and "empty" not in message
    assert "junk.jsonl:1 [invalid_json]" in message and "junk.jsonl:2 [invalid_utf8]" in message
    assert "junk.jsonl:3 [nesting_too_deep]" in message


@pytest.mark.parametrize("uri", ["", "   ", "\t\n", " ./data.jsonl"])
def test_blank_dataset_uri_is_refused_before_anything_is_read(tmp_path, monkeypatch, uri):
    (tmp_path / "data.jsonl").write_bytes(LINE * 3)  # what an empty URI would otherwise read: the working directory
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DatasetSourceError, match="is empty|leading or trailing whitespace") as error:
        run_dataset_step(uri, tmp_path / "out")
    assert repr(uri) in str(error.value)
    assert not (tmp_path / "out").exists()
    with pytest.raises(DatasetSourceError):
        fetch_dataset(uri, tmp_path / "dl")
    assert not (tmp_path / "dl").exists()


def test_list_of_parts_content_is_accepted_and_written_as_text(tmp_path):
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "2+2?"}]}, ROW["messages"][1]]}
    image = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}, ROW["messages"][1]]}
    path = tmp_path / "parts.jsonl"
    path.write_text(json.dumps(parts) + "\n" + json.dumps(image) + "\n")
    kept: list[bytes] = []
    report = validate_local_files([path], "x", on_invalid="drop", max_invalid_fraction=0.5, sink=kept.extend)
    assert report.rejects_by_rule == {"content_part_invalid": 1}
    assert [json.loads(line) for line in kept] == [ROW]


class TricklingServer:
    """Answers every request with a 200 whose body (or, with ``slow_headers``, headers) arrives a byte at a time."""

    def __init__(self, interval_s: float = 1.0, slow_headers: bool = False) -> None:
        self.stopped = threading.Event()
        stopped = self.stopped

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                body = LINE * 1000
                head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                if not slow_headers:
                    self.wfile.write(head)
                for byte in (head if slow_headers else b"") + body:
                    if stopped.wait(interval_s):
                        break
                    self.wfile.write(bytes([byte]))

        self.httpd = LoopbackServer(Handler, "trickling-server")
        self.url = f"{self.httpd.url}/chat.jsonl"

    def close(self) -> None:
        self.stopped.set()
        self.httpd.stop()


@pytest.fixture
def trickling_server():
    servers: list[TricklingServer] = []

    def start(**kwargs: object) -> TricklingServer:
        servers.append(TricklingServer(**kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("slow_headers", [False, True])
def test_a_trickling_server_fails_at_the_overall_deadline(trickling_server, tmp_path, slow_headers):
    server = trickling_server(interval_s=0.5, slow_headers=slow_headers)
    options = HttpOptions(timeout_s=5.0, attempts=3, backoff_s=0.01)
    started = time.monotonic()
    with pytest.raises(DownloadDeadlineExceeded, match=r"download deadline of 2 s exceeded") as error:
        fetch_dataset(server.url, tmp_path / "dl", http=options, download_deadline_s=2.0)
    elapsed = time.monotonic() - started
    assert 1.9 < elapsed < 4.0, elapsed  # bytes keep coming well within the stall timeout: only the deadline stops it
    assert "\n" not in str(error.value)
    assert list((tmp_path / "dl").iterdir()) == []


_SIGTERM_CHILD = """
import sys
from pathlib import Path
from components._common.termination import sigterm_raises_exit
from components.data_processing.dataset_download.download import HttpOptions
from tests.harness.requests import fetch_dataset

with sigterm_raises_exit():
    fetch_dataset(sys.argv[1], Path(sys.argv[2]), http=HttpOptions(timeout_s=30), download_deadline_s=300)
"""


def test_sigterm_during_a_download_leaves_no_partial_file(trickling_server, tmp_path):
    server = trickling_server(interval_s=0.05)
    download_dir = tmp_path / "dl"
    child = subprocess.Popen(
        [sys.executable, "-c", _SIGTERM_CHILD, server.url, str(download_dir)],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not any(download_dir.glob(".*.part")):
            assert child.poll() is None and time.monotonic() < deadline, "the download never started"
            time.sleep(0.05)
        time.sleep(0.3)  # bytes are arriving
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    assert child.returncode == 143, stderr.decode()
    assert list(download_dir.iterdir()) == []
    assert b"Traceback" not in stderr


def _one_line_naming(error: pytest.ExceptionInfo, *parts: str) -> str:
    message = str(error.value)
    assert "\n" not in message and "Traceback" not in message
    for part in parts:
        assert part in message, (part, message)
    return message


def test_hub_failures_name_repo_revision_and_remedy(hub_stub, tmp_path, monkeypatch):
    import huggingface_hub.constants

    hub_stub.add("org/gated", {"train.jsonl": LINE}, gated=True)
    hub_stub.add("org/chat", {"train.jsonl": LINE})
    with pytest.raises(DatasetSourceError) as error:
        fetch_dataset("org/absent@v2", tmp_path / "dl")
    _one_line_naming(error, "'org/absent'", "'v2'", "not found (404)", "hf-token secret")
    with pytest.raises(DatasetSourceError) as error:
        fetch_dataset("org/gated", tmp_path / "dl")
    gated = "access denied, gated repo (403 Forbidden)"
    _one_line_naming(error, "'org/gated'", "'main'", gated, "accept its conditions", "hf-token secret")
    hub_stub.required_token = "hf_right"
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    with pytest.raises(DatasetSourceError) as error:
        fetch_dataset("org/chat", tmp_path / "dl")
    # The guide's troubleshooting string, beside what to do and where the token comes from.
    _one_line_naming(error, "'org/chat'", "401 Unauthorized", "check the name", "hf-token secret", "HF_TOKEN")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(DatasetSourceError) as error:
        fetch_dataset("org/chat", tmp_path / "dl")
    _one_line_naming(error, "'org/chat'", "offline", "HF_ENDPOINT", "s3:// or pvc://")


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:9", "http://hub.invalid"])
def test_unreachable_hub_is_one_line(hub_stub, tmp_path, monkeypatch, endpoint):
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    started = time.monotonic()
    with pytest.raises(DatasetSourceError) as error:
        fetch_dataset("org/chat@abc", tmp_path / "dl", http=HttpOptions(attempts=3, backoff_s=0.01))
    _one_line_naming(error, "'org/chat'", "'abc'", f"cannot reach {endpoint}", "HF_ENDPOINT", "after 3 attempts")
    assert time.monotonic() - started < 60


def test_a_trickling_hub_fails_at_the_overall_deadline(trickling_server, tmp_path, monkeypatch):
    import huggingface_hub.constants

    server = trickling_server(interval_s=0.5)
    monkeypatch.setenv("HF_ENDPOINT", server.url.rsplit("/", 1)[0])
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    started = time.monotonic()
    with pytest.raises(DownloadDeadlineExceeded, match=r"download deadline of 2 s exceeded"):
        fetch_dataset("org/slow", tmp_path / "dl", http=HttpOptions(timeout_s=5.0), download_deadline_s=2.0)
    assert time.monotonic() - started < 4.0
    assert not [path for path in (tmp_path / "dl").rglob("*") if path.is_file()]
