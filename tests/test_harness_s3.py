"""The S3 fixtures: a real moto server on loopback, reached by boto3 through the data-connection env vars."""

import os

import boto3
import pytest
from botocore.exceptions import ClientError


def test_server_listens_on_loopback(s3_server):
    assert s3_server.startswith("http://127.0.0.1:")
    assert int(s3_server.rsplit(":", 1)[1]) > 0


def test_data_connection_env_reaches_the_bucket(s3_data_connection):
    client, bucket = s3_data_connection
    assert os.environ["AWS_S3_BUCKET"] == bucket
    client.put_object(Bucket=bucket, Key="data/a.jsonl", Body=b'{"x": 1}\n')
    # A client built only from the environment, as a component in a pod would build it.
    from_env = boto3.client(
        "s3",
        endpoint_url=os.environ["AWS_S3_ENDPOINT"],
        region_name=os.environ["AWS_DEFAULT_REGION"],
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
    )
    body = from_env.get_object(Bucket=os.environ["AWS_S3_BUCKET"], Key="data/a.jsonl")["Body"].read()
    assert body == b'{"x": 1}\n'
    keys = [item["Key"] for item in from_env.list_objects_v2(Bucket=bucket, Prefix="data/")["Contents"]]
    assert keys == ["data/a.jsonl"]


def test_each_test_starts_with_an_empty_server(s3_data_connection):
    client, bucket = s3_data_connection
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    assert [b["Name"] for b in client.list_buckets()["Buckets"]] == [bucket]


def test_missing_object_is_a_real_404(s3_data_connection):
    client, bucket = s3_data_connection
    with pytest.raises(ClientError) as error:
        client.head_object(Bucket=bucket, Key="absent.jsonl")
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
