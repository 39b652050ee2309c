"""The base model once per run: downloaded into the workspace by the first step that needs it, then read there."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path

from components._common.files import write_text_atomically

#: The cache on the workspace, relative to its root (the training pods' ``model_cache_dir``).
MODEL_CACHE = ("train_model", "model_cache")


class BaseModelError(ValueError):
    """The base model cannot be staged; the message is one line naming the source and the fix."""


@dataclasses.dataclass(frozen=True)
class StagedBaseModel:
    """A base model on the workspace: its directory, its lineage facts, whether an earlier step staged it."""

    path: Path
    facts: dict[str, str]
    reused: bool


def model_cache_dir(workspace: str | Path) -> Path:
    """``<workspace>/train_model/model_cache``: where base models are staged (and the pods download)."""
    return Path(workspace).joinpath(*MODEL_CACHE)


def needs_staging(source: str) -> bool:
    """Whether ``source`` is downloaded (Hub id, ``s3://``, ``oci://``) rather than read in place (path, ``pvc://``)."""
    if source.startswith(("s3://", "oci://")):
        return True
    if "://" in source or not source.strip():
        return False
    return not (source.startswith(("/", ".", "~")) or Path(source).exists())


def _marker(cache: Path, source: str) -> Path:
    return cache / f"staged-{hashlib.sha256(source.encode()).hexdigest()[:16]}.json"


def _sizes(directory: Path) -> dict[str, int]:
    return {p.relative_to(directory).as_posix(): p.stat().st_size for p in sorted(directory.rglob("*")) if p.is_file()}


def staged_base_model(source: str, workspace: str | Path) -> StagedBaseModel | None:
    """The copy of ``source`` an earlier step staged on ``workspace`` with matching files, else ``None``."""
    marker = _marker(model_cache_dir(workspace), source)
    try:
        record = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    path = Path(record.get("path", ""))
    if record.get("source") != source or not path.is_dir() or _sizes(path) != record.get("files"):
        return None
    return StagedBaseModel(path, dict(record.get("facts") or {}), reused=True)


def stage_base_model(
    source: str,
    workspace: str | Path,
    environ: Mapping[str, str],
    *,
    parameter: str,
    oci_insecure: bool = False,
    oci_ca_bundle: str = "",
    log: Callable[[str], None] = print,
) -> StagedBaseModel | None:
    """Downloads ``source`` into the workspace's model cache, with a marker of its file sizes (a staged copy is reused).

    ``source`` is a Hub id, ``s3://bucket/prefix`` or ``oci://`` reference (a path or ``pvc://`` returns ``None``);
    ``environ`` holds ``HF_TOKEN``, ``AWS_*`` or the OCI pull secret (never logged); ``parameter`` is named in errors.

    Raises:
        BaseModelError: The download failed (one line naming the source).
    """
    if not needs_staging(source):
        return None
    reused = staged_base_model(source, workspace)
    if reused is not None:
        log(f"{parameter}={source!r}: using the copy staged on the workspace at {reused.path}")
        return reused
    cache = model_cache_dir(workspace)
    cache.mkdir(parents=True, exist_ok=True)
    facts: dict[str, str] = {}
    if source.startswith("oci://"):
        from components.training.finetuning.oci.model import OciModelError, pull_model

        try:
            pulled = pull_model(
                source, cache, environ, insecure=oci_insecure, ca_bundle=oci_ca_bundle, log=log, source=parameter
            )
        except OciModelError as error:
            raise BaseModelError(str(error)) from None
        except ImportError as error:  # the registry client (oras, requests) is imported when the pull starts
            raise BaseModelError(f"{parameter}={source!r}: this image cannot pull oci:// models ({error})") from None
        path = pulled.path
        facts = {"base_model_digest": pulled.digest, "base_model_resolved": pulled.uri}
    else:
        from components.training.finetuning.pod.inputs import EntrypointError, resolve_base_model

        log(f"{parameter}={source!r}: downloading into the workspace ({cache})")
        try:
            path = Path(resolve_base_model(source, cache, {}, environ))
        except ImportError as error:
            raise BaseModelError(f"{parameter}={source!r}: this image cannot download it ({error})") from None
        except (EntrypointError, OSError, ValueError) as error:
            raise BaseModelError(f"{parameter}={source!r}: cannot download it into {cache}: {error}") from None
        if not path.is_dir():  # huggingface_hub missing: resolve_base_model hands the id back
            raise BaseModelError(f"{parameter}={source!r}: huggingface_hub is not installed here to download it")
    facts["base_model_path"] = str(path)
    record = {"source": source, "path": str(path), "files": _sizes(path), "facts": facts}
    write_text_atomically(_marker(cache, source), json.dumps(record, indent=1, sort_keys=True) + "\n")
    log(f"{parameter}={source!r}: staged on the workspace at {path} ({sum(record['files'].values())} bytes)")
    return StagedBaseModel(path, facts, reused=False)
