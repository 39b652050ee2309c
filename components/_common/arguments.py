"""A component's arguments as its wrapper received them (``dict(locals())``), checked against what its request takes.

Each ``component.py`` hands all its arguments, by name, to one builder in the ``request.py`` beside it; the builder
calls :func:`require_arguments` first, so a parameter added to the signature but not to the request (or the reverse)
is one error line naming it, never a silently dropped value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


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
            "signature; add each parameter to both component.py and the request builder in request.py"
        )


def request_from_arguments(
    component: str, request_type: type[T], arguments: Mapping[str, Any], outputs: Iterable[str]
) -> T:
    """The request dataclass whose fields are the component's arguments but its ``outputs``, each under its name.

    Raises:
        TypeError: See :func:`require_arguments`.
    """
    names = [field.name for field in dataclasses.fields(request_type)]
    require_arguments(component, arguments, [*names, *outputs])
    return request_type(**{name: arguments[name] for name in names})


def artifact_path(component: str, name: str, artifact: Any) -> str:
    """The local path of an optional input artifact (``""`` when it is ``None``).

    Raises:
        TypeError: ``artifact`` is neither ``None`` nor artifact-like (no ``path``).
    """
    if artifact is None:
        return ""
    if not isinstance(getattr(artifact, "path", None), str):
        raise TypeError(f"{component} argument {name}={artifact!r}: expected a KFP input artifact (with .path) or None")
    return artifact.path
