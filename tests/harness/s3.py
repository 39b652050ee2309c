"""S3 at the network edge: a real moto S3 server on 127.0.0.1 and the RHOAI data-connection environment."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest

#: The bucket ``s3_data_connection`` creates.
DATA_CONNECTION_BUCKET = "data-connection"
#: Fake, test-only credentials of the data connection (moto accepts any).
TEST_ACCESS_KEY_ID = "test-access-key-id"
TEST_SECRET_ACCESS_KEY = "test-secret-access-key"
TEST_REGION = "us-east-1"


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """The endpoint URL (``http://127.0.0.1:<port>``) of a moto S3 server running in a thread."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_data_connection(s3_server: str, monkeypatch: pytest.MonkeyPatch):
    """A fresh bucket on the moto server and the data-connection env vars; returns ``(boto3 client, bucket)``."""
    import boto3

    reset = urllib.request.Request(f"{s3_server}/moto-api/reset", method="POST")  # one server per session: emptied
    urllib.request.urlopen(reset, timeout=10).close()
    values = {
        "AWS_ACCESS_KEY_ID": TEST_ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": TEST_SECRET_ACCESS_KEY,
        "AWS_S3_ENDPOINT": s3_server,
        "AWS_DEFAULT_REGION": TEST_REGION,
        "AWS_S3_BUCKET": DATA_CONNECTION_BUCKET,
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    client = boto3.client(
        "s3",
        endpoint_url=s3_server,
        aws_access_key_id=TEST_ACCESS_KEY_ID,
        aws_secret_access_key=TEST_SECRET_ACCESS_KEY,
        region_name=TEST_REGION,
    )
    client.create_bucket(Bucket=DATA_CONNECTION_BUCKET)
    return client, DATA_CONNECTION_BUCKET
