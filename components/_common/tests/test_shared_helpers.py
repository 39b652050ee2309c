"""The helpers more than one component needs: the S3 client, the artifact file finder, the pod's namespace."""

from __future__ import annotations

import os

import pytest
from botocore.exceptions import ClientError

from components._common.artifacts import ArtifactFileError, find_artifact_file
from components._common.namespace import pod_namespace
from components._common.s3 import S3CredentialsMissing, s3_client


def test_the_s3_client_talks_to_the_data_connection_endpoint(s3_data_connection):
    _, bucket = s3_data_connection
    client = s3_client()  # from the data connection's env vars, as a component in a pod builds it
    assert os.environ["AWS_S3_BUCKET"] == bucket and os.environ["AWS_S3_ENDPOINT"].startswith("http://127.0.0.1:")
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0  # each test starts with an empty server
    assert [b["Name"] for b in client.list_buckets()["Buckets"]] == [bucket]
    client.put_object(Bucket=bucket, Key="a/b.txt", Body=b"hello")
    assert client.get_object(Bucket=bucket, Key="a/b.txt")["Body"].read() == b"hello"
    assert client.meta.region_name == "us-east-1"
    with pytest.raises(ClientError) as missing:
        client.head_object(Bucket=bucket, Key="absent.jsonl")
    assert missing.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_the_s3_client_names_the_missing_credentials_and_what_needed_them():
    environ = {"AWS_ACCESS_KEY_ID": "id", "AWS_S3_ENDPOINT": "http://127.0.0.1:9"}
    with pytest.raises(S3CredentialsMissing) as caught:
        s3_client(environ, purpose="s3_upload_prefix is set")
    message = str(caught.value)
    assert message.startswith("s3_upload_prefix is set, but S3 credentials missing: set AWS_SECRET_ACCESS_KEY")
    assert "set AWS_SECRET_ACCESS_KEY (from the data connection secret)" in message  # the set one is not named
    assert "\n" not in message


def test_the_s3_client_reads_the_endpoint_and_region_from_the_given_environment():
    environ = {"AWS_ACCESS_KEY_ID": "i", "AWS_SECRET_ACCESS_KEY": "s", "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    client = s3_client({**environ, "AWS_DEFAULT_REGION": "eu-west-3"}, stall_timeout_s=5)
    assert client.meta.endpoint_url == "http://127.0.0.1:9" and client.meta.region_name == "eu-west-3"
    assert client.meta.config.read_timeout == 5 and client.meta.config.connect_timeout == 5
    preferred = s3_client({**environ, "AWS_S3_ENDPOINT": "http://127.0.0.2:9"})
    assert preferred.meta.endpoint_url == "http://127.0.0.2:9"  # the data connection's own variable wins


def test_an_artifact_file_is_the_path_itself_or_the_one_file_in_its_folder(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text("{}\n")
    assert find_artifact_file(data, "dataset") == data
    assert find_artifact_file(tmp_path, "dataset") == data
    (tmp_path / "other.jsonl").write_text("{}\n")
    with pytest.raises(ArtifactFileError, match=r"^dataset: directory .* exactly one \*\.jsonl file, found 2: "):
        find_artifact_file(tmp_path, "dataset")
    (tmp_path / "train.jsonl").write_text("{}\n")
    assert find_artifact_file(tmp_path, "dataset", prefer="train") == tmp_path / "train.jsonl"
    with pytest.raises(ArtifactFileError, match=r"or one named eval\.jsonl\), found 3"):
        find_artifact_file(tmp_path, "eval_dataset", prefer="eval")
    with pytest.raises(ArtifactFileError, match=r"^eval_dataset: .*missing does not exist$"):
        find_artifact_file(tmp_path / "missing", "eval_dataset")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ArtifactFileError, match="found 0"):
        find_artifact_file(empty, "dataset")


def test_the_pod_namespace_comes_from_the_downward_api_then_the_service_account(tmp_path):
    mount = tmp_path / "namespace"
    assert pod_namespace({}, mount) == ""  # not in a cluster
    mount.write_text("team-a\n")
    assert pod_namespace({}, mount) == "team-a"
    assert pod_namespace({"POD_NAMESPACE": "team-b"}, mount) == "team-b"
