"""Outputs are atomic under ENOSPC (a real tmpfs) and EIO; no URL signature or credential reaches any output."""

from __future__ import annotations

import errno
import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from components.data_processing.dataset_download import split
from components.data_processing.dataset_download.locations import DatasetSourceError
from components.data_processing.dataset_download.split import OutputWriteError
from tests.harness.requests import run_dataset_step

ROW = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}
LINE = json.dumps(ROW, separators=(",", ":")).encode() + b"\n"


def _artifacts(root: Path) -> list:
    from kfp import dsl

    metrics = SimpleNamespace(values={}, log_metric=lambda name, value: metrics.values.update({name: value}))
    return [
        dsl.Dataset(uri=str(root / "t")),
        dsl.Dataset(uri=str(root / "e")),
        dsl.Markdown(uri=str(root / "r")),
        metrics,
    ]


@pytest.mark.parametrize("dataset", ["rows.jsonl", "rows.json"])  # the one-pass and the two-pass paths
def test_a_full_disk_leaves_no_file_and_names_the_path_and_the_free_space(small_disk, tmp_path, dataset):
    source = tmp_path / dataset
    rows = LINE * 40_000  # ~2.4 MiB: more than the disk holds
    source.write_bytes(rows if dataset.endswith(".jsonl") else b"[" + rows.replace(b"\n", b",").rstrip(b",") + b"]")
    with pytest.raises(OutputWriteError) as error:
        run_dataset_step(str(source), small_disk)
    message = str(error.value)
    assert "\n" not in message and "No space left on device (ENOSPC;" in message
    assert str(small_disk) in message and "bytes free in" in message
    assert list(small_disk.iterdir()) == []  # no .train.jsonl.*.tmp, no half train file, no eval file


def test_a_full_disk_while_writing_the_report_leaves_no_file(small_disk, tmp_path):
    source = tmp_path / "rows.jsonl"
    source.write_bytes(LINE * 100)
    done = run_dataset_step(str(source), tmp_path)
    with open(small_disk / "filler", "wb", buffering=0) as filler:  # fill the disk to the last byte
        try:
            while True:
                filler.write(b"\0" * 4096)
        except OSError:
            pass
    artifacts = _artifacts(small_disk)
    with pytest.raises(OutputWriteError, match=r"cannot write .*/r\.md: No space left on device \(ENOSPC;"):
        done.write_outputs(*artifacts)
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]


def test_an_io_error_at_the_write_boundary_leaves_no_file(tmp_path, monkeypatch):
    real_fdopen = split.os.fdopen

    class FailingFile:
        def __init__(self, inner):
            self.inner, self.writes = inner, 0

        def write(self, data: bytes) -> int:
            self.writes += 1
            if self.writes > 1:
                raise OSError(errno.EIO, "Input/output error")
            return self.inner.write(data)

        def close(self) -> None:
            self.inner.close()

    monkeypatch.setattr(split.os, "fdopen", lambda *args, **kwargs: FailingFile(real_fdopen(*args, **kwargs)))
    source = tmp_path / "rows.jsonl"
    source.write_bytes(LINE * 20_000)
    out = tmp_path / "out"
    with pytest.raises(OutputWriteError, match=r"cannot write .*/out/(train|eval)\.jsonl: Input/output error \(EIO;"):
        run_dataset_step(str(source), out)
    assert list(out.iterdir()) == []


ENV_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzz"
SIGNATURE = "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
CREDENTIAL = "AKIAIOSFODNN7EXAMPLE%2F20261125%2Fus-east-1%2Fs3%2Faws4_request"
SESSION = "FwoGZXIvYXdzEJr%2F%2F%2F%2Fsessiontoken"
AZURE_SIG = "sv%2BAzureSas%3Dsignature"
QUERY = (
    f"?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={CREDENTIAL}&X-Amz-Date=20261125T000000Z"
    f"&X-Amz-Expires=3600&X-Amz-Security-Token={SESSION}&X-Amz-SignedHeaders=host&X-Amz-Signature={SIGNATURE}"
    f"&sig={AZURE_SIG}&Signature=cloudfrontsig123&token=plaintoken123&signature={ENV_SECRET}"
    "&jwt=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2lnbmF0dXJl&hf_token=hfsecretvalue1&api_key=apikeyvalue2"
    "&key=plainkeyvalue3&code=oauthcodevalue4&password=passwordvalue5&page=2"
)
SECRETS = (SIGNATURE, CREDENTIAL, "AKIAIOSFODNN7EXAMPLE", SESSION, AZURE_SIG, "cloudfrontsig123", "plaintoken123")
SECRETS += (ENV_SECRET, "eyJhbGciOiJIUzI1NiJ9", "hfsecretvalue1", "apikeyvalue2", "plainkeyvalue3", "oauthcodevalue4")
SECRETS += ("passwordvalue5",)


def test_url_signatures_reach_no_output_and_the_url_stays_readable(
    http_file_server, tmp_path, capsys, caplog, monkeypatch
):
    """Masked by name in the URL (any common name), and by value: the data connection's secret key is in the env."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", ENV_SECRET)
    caplog.set_level(logging.INFO)
    (http_file_server.root / "chat.jsonl").write_bytes(LINE * 10)
    url = http_file_server.url_for("chat.jsonl") + QUERY
    done = run_dataset_step(url, tmp_path, train_split_ratio=0.8)
    artifacts = _artifacts(tmp_path)
    done.write_outputs(*artifacts)
    out, err = capsys.readouterr()
    report = (tmp_path / "r.md").read_text()
    metadata = json.dumps([artifact.metadata for artifact in artifacts[:3]])
    everything = report + metadata + out + err + caplog.text + json.dumps(artifacts[3].values) + repr(done)
    assert not [secret for secret in SECRETS if secret in everything]
    shown = artifacts[0].metadata["dataset_uri"]
    assert shown.startswith(http_file_server.url_for("chat.jsonl") + "?X-Amz-Algorithm=AWS4-HMAC-SHA256")
    assert "X-Amz-Credential=***" in shown and "X-Amz-Signature=***" in shown and "X-Amz-Expires=3600" in shown
    assert "sig=***" in shown and "Signature=***" in shown and "token=***" in shown and "signature=***" in shown
    assert shown.endswith("&jwt=***&hf_token=***&api_key=***&key=***&code=***&password=***&page=2")
    assert f"`{shown}`" in report and done.train.path.read_bytes().count(b"\n") == 8  # the data itself is untouched

    http_file_server.script("/chat.jsonl", 404)
    with pytest.raises(DatasetSourceError) as error:
        run_dataset_step(url, tmp_path / "x")
    out, err = capsys.readouterr()
    assert "HTTP 404" in str(error.value) and "X-Amz-Signature=***" in str(error.value)
    assert not [secret for secret in SECRETS if secret in str(error.value) + out + err + caplog.text]
    assert not (tmp_path / "x").exists()
