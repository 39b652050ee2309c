"""Hugging Face Hub sources: the files of one subset/split of a dataset repository, at a pinned commit.

``datasets`` chooses the files; ``huggingface_hub`` downloads them with its own retries and resumes.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from components._common.retry import GaveUp

from .download import Download, Watchdog, http_client, is_retryable
from .locations import DatasetSourceError, FetchedData, is_disk_full, parse_hf_uri
from .readers import data_format


def select_hf_files(paths: Sequence[str], subset: str, split: str, readme: str, where: str) -> list[str]:
    """The data files among a repository's ``paths`` that hold ``subset`` (``""``: the default) and ``split``.

    ``datasets`` decides, as ``load_dataset`` would (the card's ``configs``, else its file-layout conventions), on
    empty stand-ins of the files. Without a card, a subset is the directory ``<subset>/``.

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
        except FileNotFoundError:  # a card's path that names no file (a pattern that matches none gives [])
            files = []
        selected = sorted(os.path.relpath(file, layout) for file in files)
    if not selected:
        raise DatasetSourceError(f"{where}: no .jsonl/.json/.parquet/.csv(.gz) files for split {split!r}")
    return selected


#: Top-level modules whose exceptions a Hub call may leak (the HTTP stack below ``huggingface_hub``).
_NETWORK_MODULES = ("httpx2", "httpcore2", "huggingface_hub")
#: What fixes a Hub failure that a token would (the messages name the secret the token comes from).
HF_TOKEN_REMEDY = "put a token with read access in the hf-token secret (env HF_TOKEN)"
_ELSEWHERE = "set HF_ENDPOINT to a mirror, or copy the dataset to s3:// or pvc://"


def hf_error(repo_id: str, revision: str, error: BaseException, endpoint: str = "") -> DatasetSourceError:
    """One line naming the repo, the revision ("": the default branch) and the remedy for any Hub failure."""
    from huggingface_hub import errors

    host = endpoint or "https://huggingface.co"
    status = getattr(getattr(error, "response", None), "status_code", None)
    denied = {401: "401 Unauthorized", 403: "403 Forbidden"}.get(status or 0, "no access")
    missing = (
        "401 Unauthorized: not found, or private or gated and the token is missing or invalid"
        if status == 401
        else "not found (404), or private without a valid token"
    )
    by_type = [  # the first match wins: subclasses before their bases
        (
            errors.GatedRepoError,
            f"access denied, gated repo ({denied}): accept its conditions on {host}/datasets/{repo_id} with the "
            "account whose token is in the hf-token secret (env HF_TOKEN)",
        ),
        (
            (errors.OfflineModeIsEnabled, errors.LocalEntryNotFoundError),
            f"the Hub is unreachable or offline mode is on (HF_HUB_OFFLINE=1): allow egress to the Hub, {_ELSEWHERE}",
        ),
        (errors.RevisionNotFoundError, "revision not found (404): use an existing branch, tag or commit after '@'"),
        (errors.RepositoryNotFoundError, f"{missing}; check the name, or {HF_TOKEN_REMEDY}"),
        (errors.EntryNotFoundError, "file not found (404) in that revision"),
    ]
    by_status = {
        401: f"authentication failed (401 Unauthorized): the token is invalid or expired; {HF_TOKEN_REMEDY}",
        403: f"access denied (403 Forbidden): the token lacks access to this dataset; {HF_TOKEN_REMEDY}",
    }
    text = next((text for kind, text in by_type if isinstance(error, kind)), None) or by_status.get(status or 0)
    if text is None and status is not None:
        text = f"Hub answered HTTP {status}; retry later or check {host}"
    elif text is None:
        said = str(error).splitlines()[0][:160] if str(error) else ""
        text = f"cannot reach {host} ({type(error).__name__}: {said}): the cluster may be offline or block DNS/egress; "
        text += _ELSEWHERE
    return DatasetSourceError(f"dataset_uri: Hub dataset {repo_id!r} at revision {revision or 'main'!r}: {text}")


def fetch_hf(download: Download) -> FetchedData:
    """Downloads the files of one subset/split of a Hub dataset at a pinned commit.

    Token from ``HF_TOKEN``, endpoint from ``HF_ENDPOINT``; ``huggingface_hub`` runs on :func:`.download.http_client`.
    """
    from huggingface_hub import HfApi, errors, hf_hub_download, set_client_factory
    from huggingface_hub.utils import _http as hub_http

    ref = parse_hf_uri(download.uri)
    endpoint = os.environ.get("HF_ENDPOINT") or None
    token = os.environ.get("HF_TOKEN") or False
    local_dir = download.folder / "hf"
    needed: int | None = None  # the selected files' bytes, once known

    def get(filename: str, commit: str) -> Path:  # retried and resumed by huggingface_hub itself
        hub = {"repo_type": "dataset", "revision": commit, "endpoint": endpoint, "token": token}
        return Path(hf_hub_download(ref.repo_id, filename, local_dir=local_dir, **hub))

    def info():  # noqa: ANN202 - huggingface_hub's DatasetInfo; no retries of its own in huggingface_hub 2.0
        api = HfApi(endpoint=endpoint, token=token)
        return api.dataset_info(ref.repo_id, revision=ref.revision or None, files_metadata=True)

    retryable = functools.partial(is_retryable, final=(errors.OfflineModeIsEnabled,))
    try:
        with Watchdog(download.deadline) as watchdog:
            set_client_factory(lambda: http_client(download, watchdog, hub_http.hf_request_event_hook))
            try:
                dataset = download.retried(info, retryable, f"Hub dataset_info {ref.repo_id}")
                sizes = {sibling.rfilename: sibling.size or 0 for sibling in dataset.siblings or []}
                readme = get("README.md", dataset.sha).read_text("utf-8") if "README.md" in sizes else ""
                selected = select_hf_files(sorted(sizes), ref.subset, download.source.hf_split, readme, download.uri)
                needed = sum(sizes[name] for name in selected)
                download.check_size(needed)
                files = [get(name, dataset.sha) for name in selected]
            finally:
                set_client_factory(hub_http.default_client_factory)
    except DatasetSourceError:
        raise
    except GaveUp as gave_up:
        error = hf_error(ref.repo_id, ref.revision, gave_up.last, endpoint or "")
        raise DatasetSourceError(f"{error} (after {gave_up.attempts} attempts)") from None
    except Exception as error:  # huggingface_hub's and its network library's errors (httpx2.ConnectError...)
        if is_disk_full(error):
            raise download.disk_full(local_dir, needed, None) from None
        network = type(error).__module__.split(".")[0] in _NETWORK_MODULES
        if not network and not isinstance(error, (OSError, ValueError)):  # ValueError: offline/entry errors
            raise
        raise hf_error(ref.repo_id, ref.revision, error, endpoint or "") from None
    try:
        download.check_size(sum(file.stat().st_size for file in files))
    except DatasetSourceError:
        shutil.rmtree(local_dir, ignore_errors=True)
        raise
    return FetchedData(files, dataset.sha)
