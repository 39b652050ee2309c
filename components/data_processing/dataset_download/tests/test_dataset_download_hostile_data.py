"""Hostile data through ``run_dataset_download``: a Parquet dictionary bomb, invalid UTF-8 in a ``.json`` array, a
gzip ``Content-Encoding``, a Parquet column of JSON strings."""

from __future__ import annotations

import csv
import gzip
import json
import resource
from pathlib import Path

import pytest

from components._common.chat_errors import ChatFormatError
from tests.harness.http_server import ScriptedResponse
from tests.harness.requests import run_dataset_step

ROWS = [
    {"messages": [{"role": "user", "content": f"question {i}?"}, {"role": "assistant", "content": f"answer {i}"}]}
    for i in range(6)
]


def _run(tmp_path: Path, uri: str, **arguments):
    out = tmp_path / "out"
    done = run_dataset_step(uri, out, train_split_ratio=1.0, **arguments)
    rows = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    return done, sorted(rows, key=json.dumps)


def _bomb(path: Path, rows: int, per_row: int, value_bytes: int, valid_rows: int = 0) -> None:
    """Parquet: the first ``valid_rows`` of :data:`ROWS`, then ``rows`` x ``per_row`` messages of one repeated value."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = ["a" * value_bytes]
    role_index, content_index, offsets = [], [], [0]
    for row in ROWS[:valid_rows]:
        for message in row["messages"]:
            role_index.append(0 if message["role"] == "user" else 1)
            texts.append(message["content"])
            content_index.append(len(texts) - 1)
        offsets.append(len(role_index))
    for _ in range(rows):
        role_index += [0] * per_row
        content_index += [0] * per_row
        offsets.append(len(role_index))
    role = pa.DictionaryArray.from_arrays(pa.array(role_index, pa.int32()), pa.array(["user", "assistant"]))
    content = pa.DictionaryArray.from_arrays(pa.array(content_index, pa.int32()), pa.array(texts))
    messages = pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()), pa.StructArray.from_arrays([role, content], names=["role", "content"])
    )
    pq.write_table(pa.table({"messages": messages}), path, compression="zstd", use_dictionary=True)


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def test_a_parquet_row_that_decodes_to_gigabytes_is_rejected_before_it_is_materialised(tmp_path):
    bomb = tmp_path / "bomb.parquet"
    _bomb(bomb, rows=1, per_row=4800, value_bytes=1 << 20, valid_rows=2)  # one row of 4.7 GiB, two valid rows
    assert bomb.stat().st_size < 4096
    before = _peak_rss()
    done, rows = _run(tmp_path, str(bomb), on_invalid="drop", max_invalid_fraction=0.5)
    assert _peak_rss() - before < 1 << 30  # (4.7 GiB decoded, 6 GiB of RSS, before)
    assert rows == sorted(ROWS[:2], key=json.dumps)
    assert done.validation.rejects_by_rule == {"record_too_large": 1}
    (reject,) = done.validation.first_rejects
    assert reject.location == "bomb.parquet row 2"
    assert "row 2 decodes to 5033241604 (4.69 GiB), over max_line_bytes=16777216 (16 MiB)" in reject.detail


def test_a_parquet_file_whose_rows_decode_past_max_decompressed_bytes_is_refused_in_one_line(tmp_path):
    bomb = tmp_path / "rows.parquet"
    _bomb(bomb, rows=4800, per_row=1, value_bytes=1 << 20)  # 4,800 rows of 1 MiB each: 4.7 GiB
    before = _peak_rss()
    with pytest.raises(ChatFormatError) as refused:
        _run(tmp_path, str(bomb), max_decompressed_bytes=64 << 20)
    assert _peak_rss() - before < 1 << 30
    message = str(refused.value)
    assert "rows.parquet" in message and "decompressed_too_large" in message
    assert "decodes to more than max_decompressed_bytes=67108864 (64 MiB) by row 511" in message
    assert "\n" not in message


def test_a_json_array_with_one_invalid_utf8_row_keeps_the_other_rows_as_jsonl_does(tmp_path):
    encoded = [json.dumps(row).encode() for row in ROWS]
    encoded[3] = encoded[3].replace(b"question 3", b"question \xff\xfe 3")  # Latin-1 bytes in one row
    (tmp_path / "rows.json").write_bytes(b"[\n" + b",\n".join(encoded) + b"\n]\n")
    (tmp_path / "rows.jsonl").write_bytes(b"\n".join(encoded) + b"\n")
    kept = {}
    for name in ("rows.json", "rows.jsonl"):
        done, kept[name] = _run(
            tmp_path / name.replace(".", "-"), str(tmp_path / name), on_invalid="drop", max_invalid_fraction=0.5
        )
        assert done.validation.rejects_by_rule == {"invalid_utf8": 1}, name
    assert kept["rows.json"] == kept["rows.jsonl"] == sorted(ROWS[:3] + ROWS[4:], key=json.dumps)


def test_an_http_source_sent_with_content_encoding_gzip_is_decoded(http_file_server, tmp_path):
    body = "".join(json.dumps(row) + "\n" for row in ROWS).encode()
    http_file_server.script(
        "/chat.jsonl",
        ScriptedResponse(200, gzip.compress(body), {"Content-Encoding": "gzip", "ETag": '"v1"'}),
    )
    done, rows = _run(tmp_path, http_file_server.url_for("chat.jsonl"))
    assert rows == sorted(ROWS, key=json.dumps) and done.validation.rows_valid == len(ROWS)


def test_an_http_source_in_an_encoding_the_step_cannot_decode_is_one_line(http_file_server, tmp_path):
    http_file_server.script("/chat.jsonl", ScriptedResponse(200, b"\x0b\x02\x80", {"Content-Encoding": "br"}))
    with pytest.raises(Exception) as refused:
        _run(tmp_path, http_file_server.url_for("chat.jsonl"))
    assert "Content-Encoding: br, which this step does not decode (only gzip)" in str(refused.value)
    assert not (tmp_path / "out" / "train.jsonl").exists()


def test_a_parquet_messages_column_of_json_strings_is_decoded_as_the_same_csv_cell_is(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    cells = [json.dumps(row["messages"]) for row in ROWS]
    pq.write_table(pa.table({"messages": pa.array(cells, pa.string())}), tmp_path / "rows.parquet")
    with open(tmp_path / "rows.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([["messages"], *[[cell] for cell in cells]])
    kept = {}
    for name in ("rows.parquet", "rows.csv"):
        done, kept[name] = _run(tmp_path / name.replace(".", "-"), str(tmp_path / name))
        assert done.validation.rows_valid == len(ROWS), name
    assert kept["rows.parquet"] == kept["rows.csv"] == sorted(ROWS, key=json.dumps)
