"""Streaming readers of every file format, and the validation report (fail/drop, counts, every reject)."""

import csv
import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from components.data_processing.dataset_download.readers import Unreadable, data_format, iter_rows, position_label
from components.data_processing.dataset_download.validation_report import DatasetValidationError
from tests.harness.requests import dataset_read_limits, validate_dataset_uri, validate_local_files

GOOD = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}
TRAILING = {"messages": [*GOOD["messages"], {"role": "user", "content": "and 3+3?"}]}
EMPTY = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": ""}]}


def _jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_format_by_suffix():
    from pathlib import PurePath

    names = {"a.jsonl": "jsonl", "a.JSON": "json", "a.csv.gz": "csv", "a.parquet": "parquet", "a.txt": None}
    names["a.parquet.gz"] = None
    assert {name: data_format(PurePath(name)) for name in names} == names


def test_jsonl_lines_blank_lines_and_bad_json(tmp_path):
    path = _jsonl(tmp_path / "d.jsonl", [GOOD, "", '{"messages": [', GOOD])
    rows = list(iter_rows(path, dataset_read_limits()))
    assert [position for position, _ in rows] == [1, 3, 4]
    assert isinstance(rows[1][1], Unreadable) and rows[1][1].excerpt == '{"messages": ['
    assert position_label(path, 3) == "d.jsonl:3"


def test_gzip_json_array_csv_and_parquet_give_the_same_rows(tmp_path):
    rows = [{**GOOD, "id": 1}, {**GOOD, "id": 2}]
    with gzip.open(tmp_path / "a.jsonl.gz", "wt") as handle:
        handle.write("\n".join(json.dumps(r) for r in rows))
    (tmp_path / "b.json").write_text(json.dumps(rows, indent=2))
    with open(tmp_path / "c.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([["messages", "id"]] + [[json.dumps(r["messages"]), str(r["id"])] for r in rows])
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    read = {
        name: [row for _, row in iter_rows(tmp_path / name, dataset_read_limits())]
        for name in ("a.jsonl.gz", "b.json", "c.csv", "d.parquet")
    }
    assert read["a.jsonl.gz"] == rows and read["b.json"] == rows
    assert [r["messages"] for r in read["c.csv"]] == [GOOD["messages"]] * 2
    assert [r["messages"] for r in read["d.parquet"]] == [GOOD["messages"]] * 2 and read["d.parquet"][1]["id"] == 2


def test_json_array_errors_are_reported_not_raised(tmp_path):
    (tmp_path / "bad.json").write_text('[{"a": 1}, {"a": 2} {"a": 3}]')
    rows = list(iter_rows(tmp_path / "bad.json", dataset_read_limits()))
    assert rows[:2] == [(0, {"a": 1}), (1, {"a": 2})]
    assert isinstance(rows[2][1], Unreadable) and "expected ','" in rows[2][1].reason
    assert position_label(tmp_path / "bad.json", 2) == "bad.json row 2"


def test_unsupported_file_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="unsupported data file 'notes.txt'"):
        list(iter_rows(tmp_path / "notes.txt", dataset_read_limits()))


def test_fail_mode_names_rule_line_and_excerpt_and_counts_every_rule(tmp_path):
    path = _jsonl(tmp_path / "chat.jsonl", [GOOD, TRAILING, GOOD, EMPTY, "not json", TRAILING, [1, 2]])
    report = validate_local_files([path], str(path))
    assert (report.rows_read, report.rows_valid, report.rows_rejected) == (7, 2, 5)
    assert report.rejects_by_rule == {"trailing_user": 2, "content_empty": 1, "invalid_json": 1, "not_an_object": 1}
    assert not report.passed
    with pytest.raises(DatasetValidationError) as error:
        report.raise_for_rejects()
    message = str(error.value)
    assert "5 of 7 rows" in message and "on_invalid='fail'" in message
    assert "chat.jsonl:2 [trailing_user] messages[2] (the last) is a user message" in message
    excerpt = '— {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}, '
    assert excerpt + '{"role": "user", "content": "…' in message
    assert "content_empty=1" in message and "trailing_user=2" in message
    markdown = report.to_markdown()
    listed = [line.split(" | ")[0] for line in markdown.splitlines() if line.startswith("| chat.jsonl:")]
    assert listed == [f"| chat.jsonl:{n}" for n in (2, 4, 5, 6, 7)]


def test_drop_mode_passes_within_the_fraction_and_fails_above(tmp_path):
    path = _jsonl(tmp_path / "chat.jsonl", [GOOD] * 9 + [TRAILING])
    kept = []
    report = validate_local_files(
        [path], "x", on_invalid="drop", max_invalid_fraction=0.1, sink=lambda rows: kept.extend(map(json.loads, rows))
    )
    assert report.passed and len(kept) == 9 and report.invalid_fraction == pytest.approx(0.1)
    report.raise_for_rejects()
    strict = validate_local_files([path], "x", on_invalid="drop", max_invalid_fraction=0.05)
    with pytest.raises(DatasetValidationError, match=r"fraction 0.1000 > max_invalid_fraction=0.05"):
        strict.raise_for_rejects()


def test_every_reject_is_listed_without_holding_them_in_memory(tmp_path):
    path = _jsonl(tmp_path / "chat.jsonl", [TRAILING] * 300 + [GOOD])
    report = validate_local_files([path], "x", on_invalid="drop", max_invalid_fraction=1.0)
    assert len(report.first_rejects) == 50
    assert [r.location for r in report.iter_rejects()] == [f"chat.jsonl:{n}" for n in range(1, 301)]
    assert sum(line.startswith("| chat.jsonl:") for line in report.to_markdown().splitlines()) == 300


def test_alpaca_auto_detected_converted_and_checked(tmp_path):
    rows = [{"instruction": "Add 2 and 2.", "output": "4"}, {"instruction": "Add.", "output": ""}]
    path = _jsonl(tmp_path / "alpaca.jsonl", rows)
    kept = []
    report = validate_local_files(
        [path], "x", on_invalid="drop", max_invalid_fraction=0.5, sink=lambda rows: kept.extend(map(json.loads, rows))
    )
    assert report.input_format == "alpaca" and "auto-detected `alpaca`" in report.format_reason
    assert kept == [{"messages": [{"role": "user", "content": "Add 2 and 2."}, {"role": "assistant", "content": "4"}]}]
    assert report.rejects_by_rule == {"content_empty": 1}


def test_explicit_format_mismatch_counts_missing_fields(tmp_path):
    path = _jsonl(tmp_path / "chat.jsonl", [GOOD])
    report = validate_local_files([path], "x", input_format="alpaca")
    assert report.rejects_by_rule == {"missing_field": 1} and report.format_reason == "given as input_format"


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"on_invalid": "skip"}, "on_invalid='skip' is not one of: fail, drop"),
        ({"max_invalid_fraction": 1.5}, "max_invalid_fraction=1.5 must be within"),
        ({"input_format": "chatml"}, "input_format='chatml' is not one of"),
    ],
)
def test_bad_options_name_the_parameter(tmp_path, kwargs, message):
    path = _jsonl(tmp_path / "chat.jsonl", [GOOD])
    with pytest.raises(ValueError, match=message):
        validate_local_files([path], "x", **kwargs)


def test_validate_dataset_uri_on_a_local_directory(tmp_path):
    (tmp_path / "data").mkdir()
    _jsonl(tmp_path / "data" / "a.jsonl", [GOOD, GOOD])
    _jsonl(tmp_path / "data" / "b.jsonl", [TRAILING])
    (tmp_path / "data" / "README.md").write_text("ignored")
    report = validate_dataset_uri(str(tmp_path / "data"))
    assert report.files == ["a.jsonl", "b.jsonl"] and report.rows_read == 3
    assert not report.passed and report.revision.startswith("sha256:")
    assert "b.jsonl:1" in report.to_markdown()
    assert validate_dataset_uri(str(tmp_path / "data"), allow_trailing_user=True).passed
