"""Size bounds and memory (``RLIMIT_AS``, sparse files, gzip and Parquet bombs), absent fields, non-regular inputs, the
one-pass split, invalid UTF-8 in a ``.json`` array, a gzip ``Content-Encoding``; each case asserts the end state."""

from __future__ import annotations

import csv
import gzip
import json
import os
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from components._common.chat_errors import ChatFormatError
from components._common.chat_files import count_lines, iter_lines
from components.data_processing.dataset_download.locations import DatasetSourceError
from components.data_processing.dataset_download.readers import iter_rows
from components.data_processing.dataset_download.run import run_dataset_download
from components.data_processing.dataset_download.validation_report import DatasetValidationError
from tests.harness.http_server import ScriptedResponse
from tests.harness.requests import (
    dataset_download_arguments,
    dataset_download_request,
    dataset_read_limits,
    run_dataset_step,
    validate_local_files,
)

ROW = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}
LINE = json.dumps(ROW).encode() + b"\n"
REPO_ROOT = Path(__file__).resolve().parents[4]
MiB = 1 << 20


def _in_subprocess(code: str, out: Path, address_space_mib: int = 1024, timeout: float = 60) -> dict:
    """Runs ``code`` (which sets ``result``; ``out``, the request builder and ``run_dataset_download`` at hand, not the
    component: no KFP) in a fresh interpreter under RLIMIT_AS; returns ``result`` with the peak RSS (MiB)."""
    limit = address_space_mib << 20
    script = f"import json, resource\nresource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))\n"
    script += "from pathlib import Path\nfrom components.data_processing.dataset_download import request, run\n"
    script += (
        "dataset_download_request, run_dataset_download = request.dataset_download_request, run.run_dataset_download\n"
    )
    script += f"out = Path({str(out)!r})\n"
    script += textwrap.dedent(code)
    # VmHWM: the peak RSS of this process image (ru_maxrss would carry the forking pytest's peak across exec)
    script += "\nhwm = next(line for line in open('/proc/self/status') if line.startswith('VmHWM:'))"
    script += "\nresult['peak_rss_mib'] = int(hwm.split()[1]) / 1024\nprint(json.dumps(result))\n"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["seconds"] = time.monotonic() - started
    return result


def test_a_500_mib_line_is_a_reject_naming_the_limit_and_the_line_within_bounded_memory(tmp_path):
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as handle:
        handle.write(LINE)
        handle.truncate(len(LINE) + 500 * MiB)  # line 2: 500 MiB of NUL bytes, sparse on disk
        handle.seek(0, 2)
        handle.write(b"\n" + LINE)
    arguments = dataset_download_arguments(
        str(path), train_split_ratio=1.0, on_invalid="drop", max_invalid_fraction=0.5
    )
    result = _in_subprocess(
        f"""
        done = run_dataset_download(dataset_download_request({arguments!r}), out / "train.jsonl", out / "eval.jsonl")
        reject = done.validation.first_rejects[0]
        result = dict(rows=done.train.rows, reject=reject.describe(), rules=done.validation.rejects_by_rule)
        """,
        tmp_path / "out",
    )
    assert result["rows"] == 2 and result["rules"] == {"record_too_large": 1}
    assert result["reject"].startswith("huge.jsonl:2 [record_too_large] line 2 is longer than max_line_bytes=16777216")
    assert result["peak_rss_mib"] < 200, result  # the old reader held the whole line: 1.59 GiB
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["eval.jsonl", "train.jsonl"]


def test_the_line_limit_is_a_parameter_and_fails_the_step_in_one_line(tmp_path):
    path = tmp_path / "long.jsonl"
    long_row = {"messages": [{"role": "user", "content": "x" * 5000}, {"role": "assistant", "content": "y"}]}
    path.write_bytes(LINE + json.dumps(long_row).encode() + b"\n" + LINE)
    out = tmp_path / "out"
    with pytest.raises(DatasetValidationError) as error:
        run_dataset_step(str(path), out, max_line_bytes=4096)
    first_line = str(error.value).splitlines()[0]
    assert "long.jsonl:2 [record_too_large] line 2 is longer than max_line_bytes=4096 (4 KiB)" in first_line
    assert not out.exists() or not list(out.iterdir())
    with pytest.raises(ValueError, match=r"max_line_bytes=0 must be a positive number of bytes"):
        run_dataset_step(str(path), out, max_line_bytes=0)


def test_a_gzip_bomb_stops_at_the_decompressed_limit_within_bounded_memory(tmp_path):
    member = gzip.compress(b"\0" * MiB, compresslevel=9)  # ~1 KiB expanding to 1 MiB
    path = tmp_path / "bomb.jsonl.gz"
    path.write_bytes(gzip.compress(LINE) + member * 10240)  # 10 GiB of zeros in ~10 MiB
    assert path.stat().st_size < 20 * MiB
    arguments = dataset_download_arguments(str(path), max_decompressed_bytes=256 << 20)
    result = _in_subprocess(
        f"""
        request = dataset_download_request({arguments!r})
        try:
            run_dataset_download(request, out / "train.jsonl", out / "eval.jsonl")
            result = dict(error="")
        except ValueError as error:
            result = dict(error=str(error), kind=type(error).__name__)
        """,
        tmp_path / "out",
    )
    assert result["kind"] == "ChatFormatError", result
    assert result["error"].startswith("bomb.jsonl.gz [decompressed_too_large] expands past max_decompressed_bytes=")
    assert "268435456 (256 MiB)" in result["error"] and "\n" not in result["error"]
    assert result["peak_rss_mib"] < 200 and result["seconds"] < 30, result
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_json_element_over_the_limit_is_reported_as_the_limit(tmp_path):
    big = {"messages": [{"role": "user", "content": "z" * (17 * MiB)}, {"role": "assistant", "content": "ok"}]}
    path = tmp_path / "rows.json"
    path.write_bytes(b"[" + json.dumps(ROW).encode() + b"," + json.dumps(big).encode() + b"]")
    report = validate_local_files([path], "x", on_invalid="drop", max_invalid_fraction=0.5)
    assert report.rejects_by_rule == {"record_too_large": 1} and report.rows_valid == 1
    assert report.first_rejects[0].detail == "element 1 is longer than max_line_bytes=16777216 (16 MiB)"
    assert "Unterminated" not in report.first_rejects[0].describe()


def test_a_csv_record_over_the_limit_is_a_reject(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text(f'instruction,output\nhi,there\n"{"q" * 3000}",a\n', encoding="utf-8")
    rows = list(iter_rows(path, dataset_read_limits(max_line_bytes=1024)))
    assert rows[0][1] == {"instruction": "hi", "output": "there"}
    assert rows[1][1].rule == "record_too_large" and "max_line_bytes=1024 (1 KiB)" in rows[1][1].reason


def test_line_reading_is_exact_at_block_edges(tmp_path, monkeypatch):
    from components._common import chat_files

    path = tmp_path / "edges.jsonl"
    data = b"\xef\xbb\xbfab\n\n  \n" + b"c" * 30 + b"\r\nd\n" + b"e" * 12 + b"\nf"
    path.write_bytes(data)
    for block in (1 << 20, 3, 4, 7, 11):
        monkeypatch.setattr(chat_files, "_BLOCK", block)
        got = [
            (n, line if type(line) is bytes else line.rule)
            for n, line in iter_lines(path, dataset_read_limits(max_line_bytes=20))
        ]
        assert got == [(1, b"ab"), (4, "record_too_large"), (5, b"d"), (6, b"e" * 12), (7, b"f")], block
        assert count_lines(path, dataset_read_limits()) >= 5


def test_parquet_csv_and_json_rows_gain_no_null_fields(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    named = {"role": "user", "content": "hi", "name": "ann"}
    rows = [
        {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}], "source": "x"},
        {"messages": [named, {"role": "assistant", "content": "hello"}], "source": None},
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "a.parquet")  # Arrow fills every absent name with null
    (tmp_path / "b.json").write_text(json.dumps(rows), encoding="utf-8")
    (tmp_path / "c.csv").write_text("instruction,input,output\nsay hi,,hi\nsay yo\n", encoding="utf-8")
    out = tmp_path / "out"
    for name, fmt in (("a.parquet", "messages"), ("b.json", "messages"), ("c.csv", "alpaca")):
        options = {"train_split_ratio": 1.0, "input_format": fmt, "on_invalid": "drop", "max_invalid_fraction": 0.5}
        done = run_dataset_download(
            dataset_download_request(str(tmp_path / name), **options), out / f"{name}.t", out / f"{name}.e"
        )
        written = done.train.path.read_text(encoding="utf-8")
        assert "null" not in written and done.train.rows >= 1, (name, written)
        if name == "a.parquet":
            assert '"name":"ann"' in written and '"source":"x"' in written


def test_fifos_and_devices_get_their_own_words(tmp_path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(DatasetSourceError, match=r"pipe.jsonl is a FIFO \(named pipe\), not a data file"):
        run_dataset_step(str(fifo), tmp_path)
    with pytest.raises(DatasetSourceError, match=r"/dev/null is a character device, not a data file"):
        run_dataset_step("/dev/null", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe.jsonl"]


def _split(tmp_path: Path, name: str, data: bytes, **options: object) -> tuple[str, str, int]:
    path = tmp_path / name
    path.write_bytes(data)
    done = run_dataset_download(
        dataset_download_request(str(path), **options), tmp_path / f"{name}.t", tmp_path / f"{name}.e"
    )
    return done.train.sha256, done.eval.sha256, done.validation.rows_valid


def test_one_pass_and_fallback_give_the_same_files(tmp_path):
    compact = {"separators": (",", ":")}  # as the two-pass path writes converted rows: byte-identical files
    rows = [
        json.dumps(
            {"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]}, **compact
        )
        for i in range(300)
    ]
    plain = ("\n".join(rows) + "\n").encode()
    with_blanks = ("\n".join(rows[:100]) + "\n\n   \n" + "\n".join(rows[100:]) + "\n\n\n").encode()
    bad = b'{"messages": []}\n'
    with_rejects = ("\n".join(rows[:150]) + "\n").encode() + bad + ("\n".join(rows[150:]) + "\n").encode()
    listed = {"messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]}, ROW["messages"][1]]}
    parts = ("\n".join(rows[:10]) + "\n").encode() + json.dumps(listed).encode() + b"\n"
    expected = _split(tmp_path, "plain.jsonl", plain, seed=7, subset_count=250)
    assert _split(tmp_path, "blanks.jsonl", with_blanks, seed=7, subset_count=250) == expected
    drop = {"on_invalid": "drop", "max_invalid_fraction": 0.01}
    assert _split(tmp_path, "rejects.jsonl", with_rejects, seed=7, subset_count=250, **drop) == expected
    as_array = json.dumps([json.loads(row) for row in rows], **compact).encode()
    assert _split(tmp_path, "plain.json", as_array, seed=7, subset_count=250) == expected
    assert _split(tmp_path, "parts.jsonl", parts)[2] == 11
    with pytest.raises(DatasetValidationError, match=r"1 of 301 rows .* break the rules \(on_invalid='fail'\)"):
        _split(tmp_path, "fails.jsonl", with_rejects)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("fails.jsonl.")]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file anywhere


def test_an_empty_file_is_an_empty_dataset(tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"\n \n")
    with pytest.raises(ValueError, match="empty dataset"):
        run_dataset_step(str(tmp_path / "empty.jsonl"), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.jsonl"]


def test_a_damaged_gzip_still_names_its_rule_through_the_quick_count(tmp_path):
    whole = gzip.compress(LINE * 5000)
    (tmp_path / "cut.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ChatFormatError, match=r"cut.jsonl.gz \[bad_compression\]"):
        run_dataset_step(str(tmp_path / "cut.jsonl.gz"), tmp_path)


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
