"""Never evaluate the wrong model: the evaluated model's location and digest against the trained model's.

One identity, issue 44's manifest (``components/_common/model_location.py``): ``resolve_model_dir`` refuses weights
changed since ``train_model`` wrote the manifest; :func:`trained_model_digest` checks that the manifest is the trained
model's (its digest is the artifact's ``weights_digest``); a remote backend's echo of the model it evaluated must be
the location submitted (:func:`check_same_location`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components._common.model_location import STORAGE_ARTIFACT, build_manifest, read_manifest

#: The Model artifact's metadata key that records the trained model's manifest digest (``sha256:<hex>``).
DIGEST_KEY = "weights_digest"


class WrongModelError(ValueError):
    """The model evaluated is not the trained one (one line)."""


def trained_model_digest(model_path: str, model_dir: Path, metadata: Mapping[str, Any]) -> str:
    """The manifest digest of the model evaluated, checked against the Model artifact's ``weights_digest``.

    Args:
        model_path: The ``Model`` artifact's directory ("" when a path or ``model_source`` is evaluated instead).
        model_dir: Where the weights are (``resolve_model_dir(model_path)``, already checked against the manifest).
        metadata: The ``Model`` artifact's metadata.

    Without a manifest (the ``local`` launcher's artifact holds the files; a base model's directory) the digest is
    computed by the same scheme (:func:`~components._common.model_location.build_manifest`: SHA-256 of the small
    files, size and modification time of the weights).

    Raises:
        WrongModelError: The digests differ.
        ModelLocationError: The manifest is unreadable.
    """
    manifest = read_manifest(model_path) if model_path else None
    actual = (manifest or build_manifest(model_dir, STORAGE_ARTIFACT, in_artifact=True)).digest
    expected = str(metadata.get(DIGEST_KEY) or "")
    if expected and expected != actual:
        raise WrongModelError(
            f"refusing to evaluate {model_dir}: its manifest digest {actual} is not the trained model's {DIGEST_KEY} "
            f"{expected} (Model artifact metadata); the artifact or the workspace holds another model than the one "
            "train_model wrote"
        )
    return actual


def check_same_location(submitted: str, evaluated: str, where: str) -> None:
    """Refuses results of an evaluation whose model is not the one submitted.

    Raises:
        WrongModelError: ``evaluated`` differs from ``submitted``.
    """
    if evaluated.rstrip("/") != submitted.rstrip("/"):
        raise WrongModelError(
            f"refusing the results of {where}: it evaluated {evaluated or '(no model)'}, not the trained model "
            f"{submitted}; delete that evaluation or let the step create its own"
        )
