"""The one S3 client factory: boto3 for the OpenShift AI data connection in the environment (imported lazily)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

#: The data connection's variables: the two credentials a client needs, then the optional endpoint and region.
S3_CREDENTIAL_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
S3_ENDPOINT_VARS = ("AWS_S3_ENDPOINT", "AWS_ENDPOINT_URL")
S3_REGION_VAR = "AWS_DEFAULT_REGION"
#: The region boto3 signs with when the data connection names none (any value works for MinIO / ODF).
DEFAULT_REGION = "us-east-1"


class S3CredentialsMissing(ValueError):
    """The data-connection secret is not mounted: a credential variable is unset."""


def s3_client(
    environ: Mapping[str, str] | None = None, stall_timeout_s: float = 120.0, purpose: str = "", attempts: int = 5
) -> Any:
    """A boto3 S3 client for the data connection in ``environ`` (default: ``os.environ``).

    ``stall_timeout_s`` is botocore's read timeout (connecting: at most 30 s), ``attempts`` its attempts per request;
    ``purpose`` says what needs S3 in the error (e.g. ``s3_upload_prefix is set``).

    Raises:
        S3CredentialsMissing: A credential variable is unset (the message names it).
    """
    import boto3
    from botocore.config import Config

    environ = os.environ if environ is None else environ
    missing = [name for name in S3_CREDENTIAL_VARS if not environ.get(name)]
    if missing:
        because = f"{purpose}, but " if purpose else ""
        raise S3CredentialsMissing(
            f"{because}S3 credentials missing: set {', '.join(missing)} (from the data connection secret) in the "
            "environment; `kfp-finetune doctor` checks the secret before a run"
        )
    return boto3.client(
        "s3",
        endpoint_url=next((environ[name] for name in S3_ENDPOINT_VARS if environ.get(name)), None),
        region_name=environ.get(S3_REGION_VAR) or DEFAULT_REGION,
        aws_access_key_id=environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=environ["AWS_SECRET_ACCESS_KEY"],
        config=Config(
            connect_timeout=min(30, stall_timeout_s),
            read_timeout=stall_timeout_s,
            retries={"max_attempts": attempts, "mode": "standard"},
        ),
    )
