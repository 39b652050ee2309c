"""Each source against real files or a real local server: local, pvc, HTTP, S3 (moto), Hugging Face Hub (stub)."""

import json
import os

import pytest

from components.data_processing.dataset_download.download import HttpOptions
from components.data_processing.dataset_download.hub_source import select_hf_files
from components.data_processing.dataset_download.locations import (
    DatasetSourceError,
    parse_hf_uri,
    parse_s3_uri,
    source_kind,
)
from tests.harness.requests import fetch_dataset

ROW = json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}) + "\n"
FAST = HttpOptions(timeout_s=2.0, attempts=3, backoff_s=0.01)


@pytest.mark.parametrize(
    "uri,kind",
    [
        ("org/name", "hf"),
        ("org/name:subset@v1.0", "hf"),
        ("hf://datasets/org/name", "hf"),
        ("s3://bucket/key.jsonl", "s3"),
        ("https://example.com/a.jsonl", "http"),
        ("HTTP://example.com/a.jsonl", "http"),
        ("pvc://claim/data", "pvc"),
        ("file:///data/a.jsonl", "local"),
        ("/abs/a.jsonl", "local"),
        ("./rel/a.jsonl", "local"),
    ],
)
def test_source_kind(uri, kind):
    assert source_kind(uri) == kind


def test_unknown_scheme_and_nonsense_are_refused():
    with pytest.raises(DatasetSourceError, match="unknown scheme 'gs://'"):
        source_kind("gs://bucket/a.jsonl")
    with pytest.raises(DatasetSourceError, match="neither an existing local path nor a Hub id"):
        source_kind("just-a-name")


def test_hub_id_parts():
    assert parse_hf_uri("org/name") == parse_hf_uri("hf://org/name")
    ref = parse_hf_uri("HuggingFaceH4/no_robots:default@refs/convert/parquet")
    assert (ref.repo_id, ref.subset, ref.revision) == ("HuggingFaceH4/no_robots", "default", "refs/convert/parquet")
    with pytest.raises(DatasetSourceError, match="not a Hub dataset id"):
        parse_hf_uri("org/name/extra")


def test_s3_uri_parts_and_default_bucket():
    assert parse_s3_uri("s3://b/k/x.jsonl") == parse_s3_uri("s3:///k/x.jsonl", default_bucket="b")
    with pytest.raises(DatasetSourceError, match="names no bucket and AWS_S3_BUCKET is not set"):
        parse_s3_uri("s3:///k.jsonl")
    with pytest.raises(DatasetSourceError, match="'..' is not allowed"):
        parse_s3_uri("s3://b/k/../x.jsonl")


def test_local_file_revision_is_mtime_and_size(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text(ROW)
    os.utime(path, (1_700_000_000, 1_700_000_000))
    fetched = fetch_dataset(str(path), tmp_path / "dl")
    assert fetched.files == [path] and fetched.revision == f"mtime=1700000000 size={len(ROW)}"
    with pytest.raises(DatasetSourceError, match="does not exist"):
        fetch_dataset(str(tmp_path / "b.jsonl"), tmp_path / "dl")
    with pytest.raises(DatasetSourceError, match="'..' is not allowed"):
        fetch_dataset(f"{tmp_path}/x/../a.jsonl", tmp_path / "dl")


def test_pvc_paths_stay_inside_the_claim(tmp_path, monkeypatch):
    root = tmp_path / "pvc-root"
    (root / "my-claim" / "data").mkdir(parents=True)
    (root / "my-claim" / "data" / "a.jsonl").write_text(ROW)
    (tmp_path / "outside.jsonl").write_text(ROW)
    (root / "my-claim" / "data" / "escape.jsonl").symlink_to(tmp_path / "outside.jsonl")
    (root / "my-claim" / "link-dir").symlink_to(tmp_path)
    monkeypatch.setenv("KFP_FINETUNE_PVC_ROOT", str(root))
    fetched = fetch_dataset("pvc://my-claim/data/a.jsonl", tmp_path / "dl")
    assert fetched.files == [root / "my-claim" / "data" / "a.jsonl"]
    with pytest.raises(DatasetSourceError, match="outside"):
        fetch_dataset("pvc://my-claim/data/escape.jsonl", tmp_path / "dl")
    with pytest.raises(DatasetSourceError, match="outside"):
        fetch_dataset("pvc://my-claim/data", tmp_path / "dl")  # the directory holds a symlink leading out
    with pytest.raises(DatasetSourceError, match="outside"):
        fetch_dataset("pvc://my-claim/link-dir/outside.jsonl", tmp_path / "dl")
    with pytest.raises(DatasetSourceError, match="'..' is not allowed"):
        fetch_dataset("pvc://my-claim/../outside.jsonl", tmp_path / "dl")
    with pytest.raises(DatasetSourceError, match="not a valid PVC name"):
        fetch_dataset("pvc://../x.jsonl", tmp_path / "dl")


def test_http_download_with_etag(http_file_server, tmp_path):
    (http_file_server.root / "chat.jsonl").write_text(ROW * 3)
    fetched = fetch_dataset(http_file_server.url_for("chat.jsonl"), tmp_path / "dl", http=FAST)
    assert fetched.files[0].read_text() == ROW * 3
    assert len(fetched.revision) == 16  # the server's ETag, quotes stripped
    assert sorted(p.name for p in (tmp_path / "dl").iterdir()) == ["chat.jsonl"]


def test_http_retries_server_errors_then_succeeds_or_gives_up_after_the_last_attempt(http_file_server, tmp_path):
    (http_file_server.root / "chat.jsonl").write_text(ROW)
    http_file_server.script("/chat.jsonl", 503, 502)
    fetched = fetch_dataset(http_file_server.url_for("chat.jsonl"), tmp_path / "dl", http=FAST)
    assert fetched.files[0].read_text() == ROW
    assert len(http_file_server.requests) == 3
    http_file_server.script("/chat.jsonl", 503, 503, 503)
    with pytest.raises(DatasetSourceError, match=r"HTTP 503"):
        fetch_dataset(http_file_server.url_for("chat.jsonl"), tmp_path / "dl2", http=FAST)
    assert len(http_file_server.requests) == 6


@pytest.mark.parametrize("status,meaning", [(404, "not found"), (403, "access denied"), (401, "authentication")])
def test_http_client_errors_are_not_retried(http_file_server, tmp_path, status, meaning):
    (http_file_server.root / "chat.jsonl").write_text(ROW)
    http_file_server.script("/chat.jsonl", status)
    with pytest.raises(DatasetSourceError, match=f"HTTP {status} \\({meaning}"):
        fetch_dataset(http_file_server.url_for("chat.jsonl"), tmp_path / "dl", http=FAST)
    assert len(http_file_server.requests) == 1
    assert not (tmp_path / "dl").exists() or not list((tmp_path / "dl").iterdir())


def test_http_size_cap_and_timeout_leave_nothing_behind(http_file_server, tmp_path):
    from tests.harness.http_server import ScriptedResponse

    (http_file_server.root / "chat.jsonl").write_text(ROW * 10)
    with pytest.raises(DatasetSourceError, match="exceed max_download_bytes=100"):
        fetch_dataset(http_file_server.url_for("chat.jsonl"), tmp_path / "dl", max_download_bytes=100, http=FAST)
    slow = HttpOptions(timeout_s=0.2, attempts=2, backoff_s=0.01)
    http_file_server.script("/chat.jsonl", *[ScriptedResponse(200, b"late", delay_s=0.5)] * 2)
    with pytest.raises(DatasetSourceError, match="after 2 attempts"):
        fetch_dataset(http_file_server.url_for("chat.jsonl"), tmp_path / "dl", http=slow)
    assert list((tmp_path / "dl").iterdir()) == []


def test_https_verifies_certificates(http_file_server, tmp_path):
    # The loopback server speaks plain HTTP: a TLS client must fail the handshake with a clear error, not retry blindly.
    url = http_file_server.url_for("chat.jsonl").replace("http://", "https://")
    with pytest.raises(DatasetSourceError, match="TLS|cannot connect"):
        fetch_dataset(url, tmp_path / "dl", http=FAST)


def test_http_url_must_name_a_data_file(tmp_path):
    with pytest.raises(DatasetSourceError, match="must end in a .jsonl"):
        fetch_dataset("http://127.0.0.1:9/download?id=3", tmp_path / "dl")


def test_s3_object_and_prefix_through_the_data_connection(s3_data_connection, tmp_path):
    client, bucket = s3_data_connection
    client.put_object(Bucket=bucket, Key="sets/chat/a.jsonl", Body=ROW.encode())
    client.put_object(Bucket=bucket, Key="sets/chat/part/b.jsonl.gz", Body=b"gz")
    client.put_object(Bucket=bucket, Key="sets/chat/README.md", Body=b"# not data")
    one = fetch_dataset(f"s3://{bucket}/sets/chat/a.jsonl", tmp_path / "one")
    etag = client.head_object(Bucket=bucket, Key="sets/chat/a.jsonl")["ETag"].strip('"')
    assert [f.read_text() for f in one.files] == [ROW] and one.revision == etag
    prefix = fetch_dataset("s3:///sets/chat", tmp_path / "prefix")  # bucket from AWS_S3_BUCKET
    assert [f.relative_to(tmp_path / "prefix").as_posix() for f in prefix.files] == ["a.jsonl", "part/b.jsonl.gz"]
    assert prefix.revision.startswith("sha256:")


def test_s3_missing_object_credentials_and_size_cap(s3_data_connection, tmp_path, monkeypatch):
    client, bucket = s3_data_connection
    client.put_object(Bucket=bucket, Key="a.jsonl", Body=ROW.encode())
    with pytest.raises(DatasetSourceError, match=r"not found \(404"):
        fetch_dataset(f"s3://{bucket}/absent.jsonl", tmp_path / "dl")
    with pytest.raises(DatasetSourceError, match=r"not found \(404"):
        fetch_dataset("s3://no-such-bucket/a.jsonl", tmp_path / "dl")
    with pytest.raises(DatasetSourceError, match="exceed max_download_bytes=10"):
        fetch_dataset(f"s3://{bucket}/a.jsonl", tmp_path / "dl", max_download_bytes=10)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(DatasetSourceError, match="S3 credentials missing: set AWS_SECRET_ACCESS_KEY"):
        fetch_dataset(f"s3://{bucket}/a.jsonl", tmp_path / "dl")


def test_s3_access_denied_names_the_data_connection(http_file_server, tmp_path, monkeypatch):
    # An S3-compatible endpoint that refuses the credentials, as MinIO/ODF does, with the S3 XML error body.
    denied = b"<?xml version='1.0'?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
    from tests.harness.http_server import ScriptedResponse

    http_file_server.script("/bucket/a.jsonl", ScriptedResponse(403, denied, {"Content-Type": "application/xml"}))
    wrong = {
        "AWS_ACCESS_KEY_ID": "wrong-id",
        "AWS_SECRET_ACCESS_KEY": "wrong-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for name, value in {**wrong, "AWS_S3_ENDPOINT": http_file_server.url}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(DatasetSourceError, match=r"access denied \(AccessDenied, 403 Forbidden\)") as error:
        fetch_dataset("s3://bucket/a.jsonl", tmp_path / "dl")
    assert "wrong-secret" not in str(error.value)
    # The guide's troubleshooting strings, and the secret and keys to fix.
    for part in ("AccessDenied", "403 Forbidden", "s3-secret", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert part in str(error.value), part
    assert http_file_server.requests[0].headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=wrong-id/")


def test_hub_file_selection_by_layout():
    paths = ["README.md", "data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet", "data/x.jsonl"]
    assert select_hf_files(paths, "", "train", "", "x") == paths[1:3]  # the shards name the splits: x.jsonl is none
    with pytest.raises(DatasetSourceError, match="no split 'test' .*available: train$"):
        select_hf_files(paths, "", "test", "", "x")
    split_words = ["data/train.jsonl", "data/test.jsonl", "data/dev-1.csv", "notes.txt"]  # dev: validation
    assert select_hf_files(split_words, "", "validation", "", "x") == ["data/dev-1.csv"]
    subsets = ["en/train.jsonl", "en/test.jsonl", "fr/train.jsonl"]
    assert select_hf_files(subsets, "fr", "train", "", "x") == ["fr/train.jsonl"]
    with pytest.raises(DatasetSourceError, match="no data files under subset directory 'de/'"):
        select_hf_files(subsets, "de", "train", "", "x")
    assert select_hf_files(["chat.jsonl", "more.jsonl"], "", "train", "", "x") == ["chat.jsonl", "more.jsonl"]
    with pytest.raises(DatasetSourceError, match="no split 'test' .*available: train$"):
        select_hf_files(["chat.jsonl"], "", "test", "", "x")
    with pytest.raises(DatasetSourceError, match="no split 'train' .*available: none"):
        select_hf_files(["../up.jsonl", "/abs.jsonl", "model.bin"], "", "train", "", "x")


def test_hub_file_selection_by_dataset_card():
    card = """---
configs:
- config_name: default
  data_files:
  - split: train
    path: "sft/train_*.jsonl"
  - split: test
    path: sft/test.jsonl
- config_name: raw
  data_files: raw/*.csv
---
# Card
"""
    paths = ["sft/train_0.jsonl", "sft/train_1.jsonl", "sft/test.jsonl", "raw/a.csv", "raw/b.csv"]
    assert select_hf_files(paths, "", "train", card, "x") == ["sft/train_0.jsonl", "sft/train_1.jsonl"]
    assert select_hf_files(paths, "raw", "train", card, "x") == ["raw/a.csv", "raw/b.csv"]
    with pytest.raises(DatasetSourceError, match="no subset 'de'; available: default, raw"):
        select_hf_files(paths, "de", "train", card, "x")
    assert select_hf_files(["a.jsonl"], "", "train", "# no header", "x") == ["a.jsonl"]


def test_hub_download_at_a_pinned_commit_with_token(hub_stub, tmp_path, monkeypatch):
    repo = hub_stub.add(
        "org/chat",
        {"README.md": b"# Chat\n", "data/train-00000.jsonl": ROW.encode() * 2, "data/test-00000.jsonl": ROW.encode()},
    )
    hub_stub.required_token = "hf_test_token"
    with pytest.raises(
        DatasetSourceError, match=r"401 Unauthorized: not found, or private or gated and the token is missing"
    ):
        fetch_dataset("org/chat", tmp_path / "dl")
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    fetched = fetch_dataset(f"org/chat@{repo.sha}", tmp_path / "dl", hf_split="test")
    assert fetched.revision == repo.sha
    assert [f.read_text() for f in fetched.files] == [ROW]
    downloads = [path for method, path, _ in hub_stub.requests if method == "GET" and "/resolve/" in path]
    assert all(f"/resolve/{repo.sha}/" in path for path in downloads)
    assert {auth for _, _, auth in hub_stub.requests[1:]} == {"Bearer hf_test_token"}


def test_hub_missing_revision_and_size_cap(hub_stub, tmp_path):  # absent and gated: test_dataset_download_hostile
    hub_stub.add("org/big", {"train.jsonl": ROW.encode() * 100})
    with pytest.raises(DatasetSourceError, match="revision not found"):
        fetch_dataset("org/big@0123456789abcdef0123456789abcdef01234567", tmp_path / "dl")
    with pytest.raises(DatasetSourceError, match="exceed max_download_bytes=1000"):
        fetch_dataset("org/big", tmp_path / "dl", max_download_bytes=1000)
