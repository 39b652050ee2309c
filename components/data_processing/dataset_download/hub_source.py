"""Hugging Face Hub sources: the files of one subset/split of a dataset repository, at a pinned commit.

``datasets`` resolves which files hold the subset and split (:func:`select_hf_files`); ``huggingface_hub`` downloads
them with its own retries, which resume a cut file (its ``.incomplete`` part) with a ranged GET. ``dataset_info`` has
no retries of its own in ``huggingface_hub`` 2.0: it runs under the download policy (:func:`.deadlines.retried`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from components._common.retry import TRANSIENT_STATUSES, GaveUp, error_chain, status_of

from .deadlines import HttpOptions, deadline_error, hub_deadline, retried
from .locations import DatasetSourceError, FetchedData, is_disk_full, parse_hf_uri, scratch_full_error
from .readers import data_format


def hub_transient(error: BaseException) -> bool:
    """Whether a Hub call is worth retrying: 408/429/5xx, or no answer; never our own deadline, nor offline mode."""
    import httpx2
    from huggingface_hub.errors import OfflineModeIsEnabled

    for cause in error_chain(error):
        if isinstance(cause, (DatasetSourceError, OfflineModeIsEnabled)):  # offline: a ConnectionError, but final
            return False
        if status_of(cause) is not None:
            return status_of(cause) in TRANSIENT_STATUSES
        if isinstance(cause, (httpx2.TransportError, ConnectionError, TimeoutError)):
            return True
    return False


def select_hf_files(paths: Sequence[str], subset: str, split: str, readme: str, where: str) -> list[str]:
    """The data files among a repository's ``paths`` that hold ``subset`` (``""``: the default) and ``split``.

    ``datasets`` decides, as ``load_dataset`` would: the ``configs`` of the dataset card (``readme``, possibly
    ``""``), else its file-layout conventions (``data/train-00000-of-00002.parquet``, ``test.jsonl``, ``valid/``...),
    matched on empty stand-ins of the files. Without a card, a subset is the directory ``<subset>/``.

    Raises:
        DatasetSourceError: The subset or split does not exist, or holds no supported data file.
    """
    from datasets.data_files import DataFilesDict, get_data_patterns, sanitize_patterns
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    configs = MetadataConfigs.from_dataset_card_data(DatasetCard(readme).data) if readme else MetadataConfigs()
    safe = [p for p in paths if data_format(PurePosixPath(p)) and ".." not in p.split("/") and not p.startswith("/")]
    with tempfile.TemporaryDirectory(prefix="hub-layout-") as layout:
        for path in safe:
            (Path(layout) / path).parent.mkdir(parents=True, exist_ok=True)
            (Path(layout) / path).touch()
        if configs:
            name = subset or configs.get_default_config_name()
            if name not in configs:
                problem = f"no subset {subset!r}; available" if subset else "several subsets, name one: org/name:subset"
                raise DatasetSourceError(f"{where}: {problem}: {', '.join(configs)}")
            base, patterns = layout, sanitize_patterns(configs[name].get("data_files") or "**")
        else:
            base = os.path.join(layout, subset)
            if subset and not os.path.isdir(base):
                raise DatasetSourceError(f"{where}: no data files under subset directory {subset + '/'!r}")
            try:
                patterns = get_data_patterns(base)
            except FileNotFoundError:
                patterns = {}
        if split not in patterns:
            available = ", ".join(sorted(map(str, patterns))) or "none (no .jsonl/.json/.parquet/.csv(.gz) files)"
            raise DatasetSourceError(f"{where}: no split {split!r} (hf_split); available: {available}")
        try:
            files = DataFilesDict.from_patterns({split: patterns[split]}, base)[split]
        except FileNotFoundError:
            files = []
        selected = sorted(os.path.relpath(file, layout) for file in files)
    if not selected:
        raise DatasetSourceError(f"{where}: no .jsonl/.json/.parquet/.csv(.gz) files for split {split!r}")
    return selected


#: Top-level modules whose exceptions a Hub call may leak (the HTTP stack below ``huggingface_hub``).
_NETWORK_MODULES = ("httpx2", "httpcore", "huggingface_hub")
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

    ref = parse_hf_uri(uri)
    endpoint = os.environ.get("HF_ENDPOINT") or None
    token = os.environ.get("HF_TOKEN") or False
    local_dir = download_dir / "hf"
    deadline = time.monotonic() + options.deadline_s
    needed: int | None = None  # the selected files' bytes, once known

    def download(filename: str, commit: str) -> Path:  # retried and resumed by huggingface_hub itself
        kwargs = {"repo_type": "dataset", "revision": commit, "endpoint": endpoint, "token": token}
        return Path(hf_hub_download(ref.repo_id, filename, local_dir=local_dir, **kwargs))

    def info():  # noqa: ANN202 - huggingface_hub's DatasetInfo
        api = HfApi(endpoint=endpoint, token=token)
        return api.dataset_info(ref.repo_id, revision=ref.revision or None, files_metadata=True)

    try:
        with hub_deadline(uri, deadline, options.deadline_s, options.timeout_s):
            dataset = retried(info, options, deadline, hub_transient, f"Hub dataset_info {ref.repo_id}")
            sizes = {sibling.rfilename: sibling.size or 0 for sibling in dataset.siblings or []}
            readme = download("README.md", dataset.sha).read_text("utf-8") if "README.md" in sizes else ""
            selected = select_hf_files(sorted(sizes), ref.subset, split, readme, uri)
            needed = sum(sizes[name] for name in selected)
            if needed > max_bytes:
                raise DatasetSourceError(f"dataset_uri={uri!r}: {needed} bytes exceed max_download_bytes={max_bytes}")
            files = [download(name, dataset.sha) for name in selected]
    except DatasetSourceError:
        raise
    except GaveUp as gave_up:
        if gave_up.reason == "deadline":
            raise deadline_error(uri, options.deadline_s, 0) from None
        error = hf_error(ref.repo_id, ref.revision, gave_up.last, endpoint or "")
        raise DatasetSourceError(f"{error} (after {gave_up.attempts} attempts)") from None
    except Exception as error:  # huggingface_hub's and its network library's errors (httpx2.ConnectError...)
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
    return FetchedData(files, dataset.sha)
