"""A component's arguments as its wrapper received them (``dict(locals())``), checked against what its request takes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

#: A request's option groups: the request's field -> (the group's dataclass, the prefix its fields take as parameters).
Groups = Mapping[str, tuple[type, str]]
Request = TypeVar("Request")


def artifact_path(component: str, name: str, artifact: Any) -> str:
    """The local path of an optional input artifact (``""`` for ``None``; ``TypeError`` when not artifact-like)."""
    if artifact is None:
        return ""
    if not isinstance(getattr(artifact, "path", None), str):
        raise TypeError(f"{component} argument {name}={artifact!r}: expected a KFP input artifact (with .path) or None")
    return artifact.path


def parameter_fields(request_type: type, groups: Groups) -> dict[str, tuple[str | None, str]]:
    """Every component parameter a grouped request holds: ``name -> (its group or None, the field that holds it)``."""
    found = {f.name: (None, f.name) for f in dataclasses.fields(request_type) if f.name not in groups}
    for group, (group_type, prefix) in groups.items():
        found |= {prefix + f.name: (group, f.name) for f in dataclasses.fields(group_type)}
    return found


def option_group(groups: Groups, group: str, values: Mapping[str, Any]) -> Any:
    """The option group ``group`` built (so checked) from the parameter values among ``values`` (others ignored)."""
    group_type, prefix = groups[group]
    return group_type(**{f.name: values[prefix + f.name] for f in dataclasses.fields(group_type)})


def grouped_request(
    component: str,
    request_type: Callable[..., Request],
    groups: Groups,
    arguments: Mapping[str, Any],
    outputs: Iterable[str],
    own: Callable[[str, Any], Any] = lambda name, value: value,
) -> Request:
    """A component's request from its wrapper's arguments (``dict(locals())``) but ``outputs``, each in its group.

    Each group checks its own values when built; ``own(name, value)`` converts the request's own fields.

    Raises:
        TypeError: A parameter is missing or unknown (the message names it and where to add it).
        ValueError: A group refuses a value.
    """
    fields = parameter_fields(request_type, groups)
    expected = {*fields, *outputs}
    missing, unknown = sorted(expected - set(arguments)), sorted(set(arguments) - expected)
    if missing or unknown:
        raise TypeError(
            f"{component}: arguments {unknown} have no field in its request and {missing} are missing from its "
            "signature; add each parameter to both component.py and its request type"
        )
    values: dict[str | None, dict[str, Any]] = {group: {} for group in [None, *groups]}
    for name, (group, field) in fields.items():
        values[group][field] = arguments[name] if group else own(name, arguments[name])
    return request_type(
        **values[None], **{group: group_type(**values[group]) for group, (group_type, _) in groups.items()}
    )
