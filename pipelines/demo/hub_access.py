"""Whether the demo runs online: only when its dataset is a Hub id, the Hub answers and offline mode was not asked for.

Everything else the demo uses is built or shipped locally, so it otherwise runs offline (:data:`OFFLINE_ENVIRONMENT`).
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Mapping

#: What offline mode sets for the demo's steps.
OFFLINE_ENVIRONMENT = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
_TRUE = ("1", "true", "yes", "on")
#: Seconds the Hub has to answer before the demo goes offline.
PROBE_TIMEOUT_S = 5.0


def hub_endpoint(environ: Mapping[str, str]) -> str:
    """``HF_ENDPOINT``, else huggingface.co."""
    return (environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def hub_answers(endpoint: str, repo_id: str) -> bool:
    """Whether the Hub answers a dataset's info request at all (any HTTP status: 401 and 404 are answers too)."""
    request = urllib.request.Request(f"{endpoint}/api/datasets/{repo_id}", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S):  # noqa: S310 - the user's Hub endpoint
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):  # refused, unresolvable, timed out, a malformed endpoint
        return False


def offline_reason(dataset_uri: str, offline: bool, environ: Mapping[str, str] | None = None) -> str:
    """Why the demo runs offline (``""``: it runs online, to download a Hub dataset).

    Args:
        dataset_uri: The demo's dataset.
        offline: ``--offline``.
        environ: The environment (default ``os.environ``).
    """
    from components.data_processing.dataset_download.locations import DatasetSourceError, parse_hf_uri, source_kind

    environ = os.environ if environ is None else environ
    if offline:
        return "asked for (--offline)"
    if str(environ.get("HF_HUB_OFFLINE", "")).lower() in _TRUE:
        return "asked for (HF_HUB_OFFLINE is set)"
    try:
        if source_kind(dataset_uri) != "hf":
            return "nothing to download (the base model is built here, the dataset is not on the Hub)"
        repo_id = parse_hf_uri(dataset_uri).repo_id
    except DatasetSourceError:
        return "nothing to download (the dataset step will say what is wrong with the dataset URI)"
    endpoint = hub_endpoint(environ)
    if not hub_answers(endpoint, repo_id):
        return f"the Hub at {endpoint} does not answer (no network?): the dataset must be in the Hugging Face cache"
    return ""
