"""A component's arguments as its wrapper received them (``dict(locals())``), checked against what its request takes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def require_arguments(component: str, arguments: Mapping[str, Any], expected: Iterable[str]) -> None:
    """Checks that ``arguments`` has exactly the names ``expected``.

    Raises:
        TypeError: A name is missing or unknown; the message names them and where to add them.
    """
    expected = set(expected)
    missing, unknown = sorted(expected - set(arguments)), sorted(set(arguments) - expected)
    if missing or unknown:
        raise TypeError(
            f"{component}: arguments {unknown} have no field in its request and {missing} are missing from its "
            "signature; add each parameter to both component.py and its request type"
        )


def artifact_path(component: str, name: str, artifact: Any) -> str:
    """The local path of an optional input artifact (``""`` for ``None``; ``TypeError`` when not artifact-like)."""
    if artifact is None:
        return ""
    if not isinstance(getattr(artifact, "path", None), str):
        raise TypeError(f"{component} argument {name}={artifact!r}: expected a KFP input artifact (with .path) or None")
    return artifact.path
