"""Dataset URIs (the component README's sources table): which source a URI names, parsed, and the local-path rules."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from components._common.masking import mask_url

from .readers import data_format

#: Environment variable naming the directory under which PVCs are mounted, one directory per claim.
PVC_ROOT_ENV = "KFP_FINETUNE_PVC_ROOT"
DEFAULT_PVC_ROOT = "/mnt/pvc"
_HF_PATTERN = re.compile(
    r"^(?:hf://(?:datasets/)?)?(?P<repo_id>[A-Za-z0-9][\w.-]*/[\w.-]+)(?::(?P<subset>[\w.-]+))?(?:@(?P<revision>[\w./-]+))?$"
)
_CLAIM_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
#: What a file that is neither a regular file nor a directory is, in words, by its type.
_SPECIAL_FILES = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


class DatasetSourceError(ValueError):
    """The dataset cannot be read from its source (bad URI, access, missing data, size cap)."""


def is_disk_full(error: BaseException) -> bool:
    """Whether an error is a full disk (``ENOSPC``) or an exceeded disk quota (``EDQUOT``)."""
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)


def free_space(folder: Path) -> str:
    """``"<n> bytes free"`` in ``folder``, or ``"free space unknown"``."""
    try:
        return f"{shutil.disk_usage(folder).free} bytes free"
    except OSError:
        return "free space unknown"


@dataclass
class FetchedData:
    """Local data files of a dataset and the revision they were read at."""

    files: list[Path]
    revision: str


@dataclass(frozen=True)
class HfDatasetRef:
    """A Hub dataset: ``repo_id`` (``org/name``), an optional subset (config) and revision."""

    repo_id: str
    subset: str = ""
    revision: str = ""


def check_dataset_uri(uri: object) -> None:
    """Refuses an empty, blank or whitespace-padded ``dataset_uri`` (``Path("")`` would read the working directory)."""
    if not isinstance(uri, str) or not uri.strip():
        raise DatasetSourceError(
            f"dataset_uri={uri!r} is empty: name the dataset (a Hub id org/name, s3://, http(s)://, pvc:// or a path)"
        )
    if uri != uri.strip():
        raise DatasetSourceError(f"dataset_uri={mask_url(uri)!r} has leading or trailing whitespace: remove it")


def source_kind(uri: str) -> str:
    """Which source a URI names: ``hf``, ``s3``, ``http``, ``pvc`` or ``local`` (else :class:`DatasetSourceError`)."""
    check_dataset_uri(uri)
    scheme, sep, _ = uri.partition("://")
    if sep:
        kinds = {"s3": "s3", "http": "http", "https": "http", "pvc": "pvc", "file": "local", "hf": "hf"}
        if scheme.lower() not in kinds:
            raise DatasetSourceError(
                f"dataset_uri={uri!r}: unknown scheme {scheme + '://'!r}; use s3://, http(s)://, pvc://, file://, "
                "hf://, a local path or a Hub id org/name[:subset][@revision]"
            )
        return kinds[scheme.lower()]
    if uri.startswith(("/", "./", "../")) or Path(uri).exists():
        return "local"
    if _HF_PATTERN.match(uri):
        return "hf"
    raise DatasetSourceError(
        f"dataset_uri={uri!r} is neither an existing local path nor a Hub id of the form org/name[:subset][@revision]"
    )


def parse_hf_uri(uri: str) -> HfDatasetRef:
    """Parses ``org/name[:subset][@revision]`` (optionally prefixed ``hf://`` or ``hf://datasets/``)."""
    match = _HF_PATTERN.match(uri)
    if not match:
        raise DatasetSourceError(f"dataset_uri={uri!r} is not a Hub dataset id: org/name[:subset][@revision]")
    return HfDatasetRef(match["repo_id"], match["subset"] or "", match["revision"] or "")


def parse_s3_uri(uri: str, default_bucket: str = "") -> tuple[str, str]:
    """``(bucket, key)`` of ``s3://bucket/key``; an empty bucket (``s3:///key``) falls back to ``default_bucket``."""
    rest = uri[len("s3://") :]
    bucket, _, key = rest.partition("/")
    bucket = bucket or default_bucket
    if not bucket:
        raise DatasetSourceError(f"dataset_uri={uri!r} names no bucket and AWS_S3_BUCKET is not set")
    _reject_parent_parts(key, uri)
    return bucket, key


def _reject_parent_parts(path: str, uri: str) -> None:
    if ".." in PurePosixPath(path).parts:
        raise DatasetSourceError(f"dataset_uri={uri!r}: '..' is not allowed in dataset paths")


def resolve_pvc_uri(uri: str) -> tuple[Path, Path]:
    """Maps ``pvc://claim/path`` to ``(file_or_dir, claim_mount)`` under ``$KFP_FINETUNE_PVC_ROOT``, confined."""
    claim, _, path = uri[len("pvc://") :].partition("/")
    if not _CLAIM_PATTERN.match(claim):
        raise DatasetSourceError(f"dataset_uri={uri!r}: {claim!r} is not a valid PVC name")
    _reject_parent_parts(path, uri)
    mount = Path(os.environ.get(PVC_ROOT_ENV) or DEFAULT_PVC_ROOT) / claim
    target = mount / path
    confine(target, mount, uri)
    return target, mount


def resolve_local_uri(uri: str) -> Path:
    """A local path (``file://`` stripped); ``..`` parts are refused."""
    path = uri[len("file://") :] if uri.startswith("file://") else uri
    _reject_parent_parts(path, uri)
    return Path(path)


def confine(path: Path, root: Path, uri: str) -> None:
    """Raises :class:`DatasetSourceError` unless ``path``, symlinks resolved, is ``root`` or lies inside it."""
    real_root = root.resolve()
    real_path = path.resolve()
    if real_path != real_root and real_root not in real_path.parents:
        raise DatasetSourceError(f"dataset_uri={uri!r}: {path} resolves to {real_path}, outside {real_root}")


def local_data_files(path: Path, uri: str, root: Path | None = None) -> list[Path]:
    """The data files at a local path (the file, or every data file under a directory, sorted), inside ``root``."""
    if not path.exists():
        raise DatasetSourceError(f"dataset_uri={uri!r}: {path} does not exist (404)")
    kind = _SPECIAL_FILES.get(stat.S_IFMT(path.stat().st_mode))
    if kind:
        raise DatasetSourceError(
            f"dataset_uri={uri!r}: {path} is {kind}, not a data file or a directory: copy the data into a regular "
            ".jsonl/.json/.parquet/.csv(.gz) file and point dataset_uri at it"
        )
    if path.is_file():
        if data_format(path) is None:
            raise DatasetSourceError(f"dataset_uri={uri!r}: {path.name} is not a .jsonl/.json/.parquet/.csv(.gz) file")
        files = [path]
    else:
        files = sorted(
            p
            for p in path.rglob("*")
            if p.is_file() and data_format(p) and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
        if not files:
            raise DatasetSourceError(f"dataset_uri={uri!r}: no .jsonl/.json/.parquet/.csv(.gz) files under {path}")
    if root is not None:
        for file in files:
            confine(file, root, uri)
    return files


def local_revision(files: list[Path]) -> str:
    """``mtime=… size=…`` of a single file, else :func:`listing_revision` of every file's."""
    stats = [(file.name, int(file.stat().st_mtime), file.stat().st_size) for file in files]
    if len(stats) == 1:
        return f"mtime={stats[0][1]} size={stats[0][2]}"
    return listing_revision([f"{name}:{mtime}:{size}" for name, mtime, size in stats])


def listing_revision(entries: list[str]) -> str:
    """``sha256:`` and 16 hex digits of a listing of files (name and version, one a line)."""
    return "sha256:" + hashlib.sha256("\n".join(entries).encode()).hexdigest()[:16]
