"""What the ``model_registry`` tests share: the step run against the registry stub, small models, metrics."""

from __future__ import annotations

import os

from components.deployment.kubeflow_model_registry.lineage import ArtifactInfo
from components.deployment.kubeflow_model_registry.registry_client import RetryPolicy
from components.deployment.kubeflow_model_registry.run import run_model_registration
from tests.harness.requests import dataset_metadata, model_registry_request

TOKEN = "mr-token-1b2c3d4e5f"
RUN_ID = "7c0ffee0-1234-4d2b-9a51-0123456789ab"
FAST_RETRIES = RetryPolicy(attempts=4, initial_delay_s=0.01, max_delay_s=0.05)
DATA_CONNECTION_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_S3_ENDPOINT", "AWS_DEFAULT_REGION")


def metrics(**values) -> ArtifactInfo:
    return ArtifactInfo("file:///metrics", "/tmp/metrics", values)


def properties(version: dict) -> dict:
    """A stored version's custom properties as plain values."""
    return {k: next(v[f] for f in v if f.endswith("_value")) for k, v in version["customProperties"].items()}


def s3_environ() -> dict[str, str]:
    """The data-connection env vars ``s3_data_connection`` set, and the registry token."""
    return {**{name: os.environ[name] for name in DATA_CONNECTION_ENV}, "MODEL_REGISTRY_TOKEN": TOKEN}


def register(stub, tmp_path, model, environ=None, retry_policy=FAST_RETRIES, now=None, log=None, **overrides):
    """The whole step against ``stub`` (``address``, ``port``) over plain HTTP with the token, then ``overrides``."""
    arguments = dict(
        model=model,
        registry_address=stub.address,
        registry_port=stub.port,
        model_name="tiny-chat",
        is_secure=False,
        model_uri="pvc://models/tiny/run-1",
        pipeline_run_id=RUN_ID,
        pipeline_run_name="tiny-finetune-run-1",
        eval_metrics=metrics(acc=0.7),
        train_metrics=metrics(loss=1.25),
        dataset=ArtifactInfo(
            "s3://pipelines/run-1/dataset", "/tmp/ds", dataset_metadata("demo/chat@v1", dataset_sha256="e3" * 32)
        ),
        allow_token_over_http=True,  # the stub speaks plain HTTP; tests of the default withhold the token
    )
    return run_model_registration(
        model_registry_request(**{**arguments, **overrides}),
        str(tmp_path / "summary.md"),
        environ={"MODEL_REGISTRY_TOKEN": TOKEN} if environ is None else environ,
        retry_policy=retry_policy,
        now=now,
        **({} if log is None else {"log": log}),
    )
