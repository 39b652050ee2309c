"""Downloads never splice two versions nor leave http(s) by a redirect; a full scratch disk is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.data_processing.dataset_download.download import HttpOptions
from components.data_processing.dataset_download.locations import DatasetSourceError
from components.data_processing.dataset_download.tests.test_dataset_download_retries import _no_partial_files
from tests.harness.http_server import ScriptedResponse
from tests.harness.requests import fetch_dataset, run_dataset_step

ROW = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}
LINE = json.dumps(ROW).encode() + b"\n"
FAST = HttpOptions(timeout_s=5.0, attempts=4, backoff_s=0.01)


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
