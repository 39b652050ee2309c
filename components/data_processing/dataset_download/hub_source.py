"""Hugging Face Hub sources: the files of one subset/split of a dataset repository, at a pinned commit.

A retried file download resumes its ``.incomplete`` file with a ranged GET (``huggingface_hub`` does).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from components._common.retry import GaveUp, error_chain, is_transient, status_of

from .deadlines import HttpOptions, deadline_error, hub_deadline, retried
from .locations import DatasetSourceError, FetchedData, is_disk_full, parse_hf_uri, scratch_full_error


def hub_transient(error: BaseException) -> bool:
    """Whether a Hub call is worth retrying: 408/429/5xx, or no answer (also inside ``LocalEntryNotFoundError``).

    Never our own deadline, nor any other answer (401/403/404...).
    """
    from huggingface_hub.errors import OfflineModeIsEnabled

    for cause in error_chain(error):
        if isinstance(cause, (DatasetSourceError, OfflineModeIsEnabled)):  # offline: a ConnectionError, but final
            return False
        if status_of(cause) is not None or is_transient(cause):
            return is_transient(cause)
    return False


#: Top-level modules whose exceptions a Hub call may leak (the HTTP stack below ``huggingface_hub``).
_NETWORK_MODULES = ("httpx", "httpx2", "httpcore", "requests", "urllib3", "huggingface_hub")
#: What fixes each kind of Hub failure (the messages name the secret the token comes from).
HF_TOKEN_REMEDY = "put a token with read access in the hf-token secret (env HF_TOKEN)"


def hf_error(repo_id: str, revision: str, error: BaseException, endpoint: str = "") -> DatasetSourceError:
    """One line naming the repo, the revision ("": the default branch) and the remedy for any Hub failure."""
    from huggingface_hub import errors

    where = f"Hub dataset {repo_id!r} at revision {revision or 'main'!r}"
    host = endpoint or "https://huggingface.co"
    status = getattr(getattr(error, "response", None), "status_code", None)
    denied = {401: "401 Unauthorized", 403: "403 Forbidden"}.get(status or 0, "")
    if isinstance(error, errors.GatedRepoError):
        text = (
            f"access denied, gated repo ({denied or 'no access'}): accept its conditions on "
            f"{host}/datasets/{repo_id} with the account whose token is in the hf-token secret (env HF_TOKEN)"
        )
    elif isinstance(error, errors.OfflineModeIsEnabled) or isinstance(error, errors.LocalEntryNotFoundError):
        text = (
            "the Hub is unreachable or offline mode is on (HF_HUB_OFFLINE=1): allow egress to the Hub, set HF_ENDPOINT "
            "to a mirror, or copy the dataset to s3:// or pvc:// and point dataset_uri there"
        )
    elif isinstance(error, errors.RevisionNotFoundError):
        text = "revision not found (404): use an existing branch, tag or commit after '@'"
    elif isinstance(error, errors.RepositoryNotFoundError) and status == 401:
        text = (
            f"401 Unauthorized: not found, or private or gated and the token is missing or invalid; check the name, "
            f"or {HF_TOKEN_REMEDY}"
        )
    elif isinstance(error, errors.RepositoryNotFoundError):
        text = f"not found (404), or private without a valid token; check the name, or {HF_TOKEN_REMEDY}"
    elif isinstance(error, errors.EntryNotFoundError):
        text = "file not found (404) in that revision"
    elif status == 401:
        text = f"authentication failed (401 Unauthorized): the token is invalid or expired; {HF_TOKEN_REMEDY}"
    elif status == 403:
        text = f"access denied (403 Forbidden): the token lacks access to this dataset; {HF_TOKEN_REMEDY}"
    elif status is not None:
        text = f"Hub answered HTTP {status}; retry later or check {host}"
    else:
        text = (
            f"cannot reach {host} ({type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}): "
            "the cluster may be offline or block DNS/egress; set HF_ENDPOINT to a mirror, or copy the dataset to "
            "s3:// or pvc://"
        )
    return DatasetSourceError(f"dataset_uri: {where}: {text}")


def fetch_hf(uri: str, download_dir: Path, split: str, max_bytes: int, options: HttpOptions) -> FetchedData:
    """Downloads the files of one subset/split of a Hub dataset at a pinned commit (token from ``HF_TOKEN``).

    The endpoint is ``HF_ENDPOINT`` read at call time (a mirror, or a local stub in tests).
    """
    from huggingface_hub import HfApi, hf_hub_download

    from .hf_files import card_configs, select_hf_files

    ref = parse_hf_uri(uri)
    endpoint = os.environ.get("HF_ENDPOINT") or None
    token = os.environ.get("HF_TOKEN") or False
    local_dir = download_dir / "hf"

    def download(filename: str, commit: str) -> Path:
        return Path(
            hf_hub_download(
                ref.repo_id,
                filename,
                repo_type="dataset",
                revision=commit,
                local_dir=local_dir,
                endpoint=endpoint,
                token=token,
            )
        )

    deadline = time.monotonic() + options.deadline_s
    needed: int | None = None  # the selected files' bytes, once known

    def retried_download(filename: str, commit: str) -> Path:  # a retry resumes the .incomplete file (Range)
        return retried(lambda: download(filename, commit), options, deadline, hub_transient, f"Hub file {filename}")

    try:
        with hub_deadline(uri, deadline, options.deadline_s, options.timeout_s):
            info = retried(
                lambda: HfApi(endpoint=endpoint, token=token).dataset_info(
                    ref.repo_id, revision=ref.revision or None, files_metadata=True
                ),
                options,
                deadline,
                hub_transient,
                f"Hub dataset_info {ref.repo_id}",
            )
            sizes = {sibling.rfilename: sibling.size or 0 for sibling in info.siblings or []}
            readme = retried_download("README.md", info.sha) if "README.md" in sizes else None
            configs = card_configs(readme.read_text("utf-8")) if readme else []
            selected = select_hf_files(sorted(sizes), ref.subset, split, configs, uri)
            total = needed = sum(sizes[name] for name in selected)
            if total > max_bytes:
                raise DatasetSourceError(f"dataset_uri={uri!r}: {total} bytes exceed max_download_bytes={max_bytes}")
            files = [retried_download(name, info.sha) for name in selected]
    except DatasetSourceError:
        raise
    except GaveUp as gave_up:
        if gave_up.reason == "deadline":
            raise deadline_error(uri, options.deadline_s, 0) from None
        error = hf_error(ref.repo_id, ref.revision, gave_up.last, endpoint or "")
        raise DatasetSourceError(f"{error} (after {gave_up.attempts} attempts)") from None
    except Exception as error:  # huggingface_hub's and its network library's errors (httpx.ConnectError...)
        if is_disk_full(error):
            raise scratch_full_error(uri, local_dir, needed, None) from None
        network = type(error).__module__.split(".")[0] in _NETWORK_MODULES
        if not network and not isinstance(error, (OSError, ValueError)):  # ValueError: offline/entry errors
            raise
        raise hf_error(ref.repo_id, ref.revision, error, endpoint or "") from None
    downloaded = sum(file.stat().st_size for file in files)
    if downloaded > max_bytes:
        shutil.rmtree(local_dir, ignore_errors=True)
        raise DatasetSourceError(f"dataset_uri={uri!r}: {downloaded} bytes exceed max_download_bytes={max_bytes}")
    return FetchedData(files, info.sha)
