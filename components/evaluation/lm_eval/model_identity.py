"""Never evaluate the wrong model: the evaluated model's location and digest against the trained model's.

The trained model is identified by its directory's digest (:func:`directory_digest`: SHA-256 over each file's
relative path and contents, in path order) and, where the Model artifact's metadata records one (``model_digest``),
that digest must match what is evaluated. A remote backend echoes the model it evaluates (the LMEvalJob's
``pretrained`` argument, EvalHub's ``model``); it must be the location submitted. Both end up in the results' metadata
(``evaluated_model_location``, ``evaluated_model_digest``) and so in the registry's lineage.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The Model artifact's metadata key that records the trained model's digest (``sha256:<hex>``).
DIGEST_KEY = "model_digest"


class WrongModelError(ValueError):
    """The model evaluated is not the trained one (one line)."""


def directory_digest(path: Path) -> str:
    """``sha256:<hex>`` over every file's path (relative, POSIX) and bytes, in sorted order; a file: its bytes."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        relative = file.name if file == path else file.relative_to(path).as_posix()
        digest.update(relative.encode() + b"\0")
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return f"sha256:{digest.hexdigest()}"


def check_digest(model_dir: Path, metadata: Mapping[str, Any]) -> str:
    """The digest of ``model_dir``, checked against the Model artifact's ``model_digest`` when it records one.

    Raises:
        WrongModelError: The digests differ.
    """
    actual = directory_digest(model_dir)
    expected = str(metadata.get(DIGEST_KEY) or "")
    if expected and expected != actual:
        raise WrongModelError(
            f"refusing to evaluate {model_dir}: its digest {actual} is not the trained model's {DIGEST_KEY} "
            f"{expected} (Model artifact metadata); the workspace holds another model than the one train_model wrote"
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
