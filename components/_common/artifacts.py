"""Finding the file in an artifact: KFP hands a component a path that is the file itself or a folder holding it."""

from __future__ import annotations

from pathlib import Path


class ArtifactFileError(ValueError):
    """The artifact path does not exist, or its folder holds no (or an ambiguous) file of the kind asked for."""


def find_artifact_file(path: str | Path, label: str, prefer: str = "") -> Path:
    """The ``.jsonl`` file of an artifact: ``path`` itself, or the one (or the ``prefer`` stem) in the folder.

    Raises:
        ArtifactFileError: ``path`` does not exist, or its folder holds no such file, or several without ``prefer``.
    """
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise ArtifactFileError(f"{label}: {path} does not exist")
    candidates = sorted(path.glob("*.jsonl"))
    preferred = [candidate for candidate in candidates if prefer and candidate.stem == prefer]
    if len(candidates) == 1 or len(preferred) == 1:
        return (preferred or candidates)[0]
    wanted = "exactly one *.jsonl file" + (f" (or one named {prefer}.jsonl)" if prefer else "")
    raise ArtifactFileError(
        f"{label}: directory {path} must hold {wanted}, found {len(candidates)}: {[c.name for c in candidates]}"
    )
