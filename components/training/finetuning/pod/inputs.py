"""The run's inputs as the training pods (and the launcher) read them: the base model's location and the chat rows."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from components._common import s3


class EntrypointError(ValueError):
    """The run config, data or model location is unusable; the message says which and where."""


def load_chat_rows(path: Path, label: str = "dataset") -> Iterator[dict[str, Any]]:
    """Yields the rows of a chat JSONL file checked by the dataset step's rules, streaming (parts joined into strings).

    Raises:
        EntrypointError: A row breaks a rule (names the file, the line and the rule) or the file holds no row.
    """
    from components._common.chat_format import ChatFormatError, iter_chat_file

    try:
        for _, row in iter_chat_file(Path(path), allow_trailing_user=True, label=label):
            yield row
    except ChatFormatError as error:
        raise EntrypointError(str(error)) from None


def count_chat_rows(path: Path, label: str = "dataset") -> int:
    """Checks every row of a chat JSONL file (see :func:`load_chat_rows`) and returns how many there are."""
    return sum(1 for _ in load_chat_rows(path, label))


def _download_s3(uri: str, target: Path, env: Mapping[str, str]) -> Path:
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    try:
        client = s3.s3_client(env, purpose=f"base_model={uri!r}")
    except s3.S3CredentialsMissing as error:
        raise EntrypointError(str(error)) from None
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    found = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix.rstrip("/") + "/"):
        for item in page.get("Contents", []):
            relative = item["Key"][len(prefix.rstrip("/")) + 1 :]
            if relative and not relative.endswith("/"):
                (staging / relative).parent.mkdir(parents=True, exist_ok=True)
                client.download_file(bucket, item["Key"], str(staging / relative))
                found += 1
    if not found:
        shutil.rmtree(staging)
        raise EntrypointError(f"base_model={uri!r}: no objects under that S3 prefix")
    try:
        staging.rename(target)
    except OSError:  # another node finished first: keep its copy
        shutil.rmtree(staging, ignore_errors=True)
    return target


def resolve_base_model(base_model: str, cache_dir: Path, pvc_mounts: Mapping[str, str], env: Mapping[str, str]) -> str:
    """Turns ``base_model`` into something ``from_pretrained`` loads: a local directory or a Hub id.

    Args:
        base_model: Local path, ``pvc://<claim>/<path>``, ``s3://<bucket>/<prefix>`` or a Hugging Face id
            (downloaded when ``huggingface_hub`` is installed).
        cache_dir: Where ``s3://`` and Hub models are downloaded.
        pvc_mounts: Mount path by PVC claim name.
        env: Environment with ``AWS_*`` (S3) and ``HF_TOKEN`` values; never logged.

    Raises:
        EntrypointError: Unsupported scheme, unknown claim or missing path.
    """
    cache_dir = Path(cache_dir)
    if base_model.startswith("pvc://"):
        claim, _, relative = base_model[len("pvc://") :].partition("/")
        if claim not in pvc_mounts:
            raise EntrypointError(
                f"base_model={base_model!r}: PVC {claim!r} is not mounted (mounted: {sorted(pvc_mounts)}); "
                "add it to the task's volumes"
            )
        local = Path(pvc_mounts[claim]) / relative
    elif base_model.startswith("s3://"):
        cache_dir.mkdir(parents=True, exist_ok=True)
        local = cache_dir / f"s3-{hashlib.sha256(base_model.encode()).hexdigest()[:16]}"
        if not local.is_dir():
            _download_s3(base_model, local, env)
    elif base_model.startswith("oci://"):
        raise EntrypointError(
            f"base_model={base_model!r}: oci:// models are pulled by train_model before training starts "
            "(run config 'model_path'); this run config has none, so re-run train_model rather than the pod alone"
        )
    elif "://" in base_model:
        scheme = base_model.split("://", 1)[0]
        raise EntrypointError(
            f"base_model={base_model!r}: scheme {scheme}:// is not supported; use a path, pvc://, s3://, oci:// or "
            "an HF id"
        )
    elif base_model.startswith(("/", ".")) or Path(base_model).exists():
        local = Path(base_model)
    else:
        return _hub_model(base_model, cache_dir, env)
    if not local.exists():
        raise EntrypointError(f"base_model={base_model!r}: {local} does not exist")
    return str(local)


def _hub_model(repo_id: str, cache_dir: Path, env: Mapping[str, str]) -> str:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return repo_id
    return snapshot_download(repo_id, cache_dir=str(cache_dir), token=env.get("HF_TOKEN") or None)
