"""A :class:`~.spec.JobSpec` from KFP's ``dsl.TaskConfig`` passthrough merged with explicit settings."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from components.training.finetuning.manifests.spec import (
    LAUNCHER_ONLY_SECRET_ENV,
    JobSpec,
    JobSpecError,
    SecretEnvVar,
    fail,
)


def _task_config_fields(task_config: Any) -> dict[str, Any]:
    """Reads a ``dsl.TaskConfig`` (or its dict form, snake_case or camelCase keys) into snake_case fields."""
    if task_config is None:
        return {}
    if dataclasses.is_dataclass(task_config):
        raw = {field.name: getattr(task_config, field.name) for field in dataclasses.fields(task_config)}
    elif isinstance(task_config, Mapping):
        raw = dict(task_config)
    else:
        raise JobSpecError(f"task_config={task_config!r}: must be a dsl.TaskConfig, a dict or None")
    aliases = {"nodeSelector": "node_selector", "volumeMounts": "volume_mounts"}
    fields = {aliases.get(key, key): value for key, value in raw.items() if value}
    unknown = set(fields) - {"affinity", "tolerations", "node_selector", "env", "volumes", "volume_mounts", "resources"}
    if unknown:
        raise JobSpecError(f"task_config: unknown fields {sorted(unknown)}")
    return fields


def _split_task_env(env: Sequence[Mapping[str, Any]]) -> tuple[dict[str, str], list[SecretEnvVar]]:
    literal: dict[str, str] = {}
    secret: list[SecretEnvVar] = []
    for index, item in enumerate(env):
        name = item.get("name")
        source = item.get("valueFrom")
        if source is None:
            literal[name] = str(item.get("value", ""))
        elif name in LAUNCHER_ONLY_SECRET_ENV:
            continue
        elif set(source) == {"secretKeyRef"}:
            ref = source["secretKeyRef"]
            secret.append(SecretEnvVar(name, ref.get("name", ""), ref.get("key", ""), bool(ref.get("optional", False))))
        else:
            raise JobSpecError(
                f"task_config.env[{index}] ({name}): valueFrom {sorted(source)} is not supported; "
                "only literal values and secretKeyRef reach the TrainJob"
            )
    return literal, secret


def _merge_named(field: str, first: Sequence[Mapping[str, Any]], second: Sequence[Mapping[str, Any]], key: str) -> list:
    merged: dict[Any, Mapping[str, Any]] = {}
    for item in [*first, *second]:
        if not isinstance(item, Mapping):
            raise fail(field, item, "items must be dicts")
        identity = item.get(key)
        if identity in merged and dict(merged[identity]) != dict(item):
            raise fail(
                field, identity, f"is given twice with different settings ({dict(merged[identity])} vs {dict(item)})"
            )
        merged[identity] = item
    return [dict(item) for item in merged.values()]


def _resources_from_task_config(resources: Mapping[str, Any]) -> dict[str, Any]:
    """Maps ``dsl.TaskConfig.resources`` (requests/limits) to cpu/memory/GPU spec fields (limits win)."""
    quantities = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    fields: dict[str, Any] = {}
    for name, value in quantities.items():
        if name == "cpu":
            fields["cpu_per_node"] = str(value)
        elif name == "memory":
            fields["memory_per_node"] = str(value)
        elif name.endswith("/gpu") or name.endswith("gpu"):
            fields["gpu_resource_name"] = name
            fields["gpus_per_node"] = int(value)
    return fields


def spec_from_task_config(task_config: Any = None, **explicit: Any) -> JobSpec:
    """Builds a :class:`JobSpec` from KFP's task-config passthrough (or its dict form) plus explicit fields.

    Lists are joined, task config first (a name given twice must mean the same thing); dicts are merged, explicit keys
    winning; ``None`` or ``""`` is not given; ``secretKeyRef`` env entries become :class:`SecretEnvVar`.

    Raises:
        JobSpecError: Unknown fields, conflicting entries or any spec rule broken.
    """
    known = {field.name for field in dataclasses.fields(JobSpec)}
    unknown = set(explicit) - known
    if unknown:
        raise JobSpecError(f"spec_from_task_config: unknown JobSpec fields {sorted(unknown)}")
    explicit = {key: value for key, value in explicit.items() if value is not None and value != ""}
    config = _task_config_fields(task_config)
    fields: dict[str, Any] = dict(_resources_from_task_config(config.get("resources") or {}))
    task_env, task_secrets = _split_task_env(config.get("env") or [])
    fields["env"] = {**task_env, **dict(explicit.pop("env", {}) or {})}
    explicit_secrets = list(explicit.pop("secret_env", ()) or ())
    explicit_names = {item.name for item in explicit_secrets}
    fields["secret_env"] = tuple([s for s in task_secrets if s.name not in explicit_names] + explicit_secrets)
    for field in ("volumes", "volume_mounts"):
        key = "name" if field == "volumes" else "mountPath"
        fields[field] = _merge_named(field, config.get(field) or [], explicit.pop(field, ()) or [], key)
    tolerations = [*(config.get("tolerations") or []), *(explicit.pop("tolerations", ()) or [])]
    fields["tolerations"] = [dict(t) for i, t in enumerate(tolerations) if t not in tolerations[:i]]
    fields["node_selector"] = {**(config.get("node_selector") or {}), **dict(explicit.pop("node_selector", {}) or {})}
    fields["affinity"] = dict(explicit.pop("affinity", {}) or config.get("affinity") or {})
    fields.update(explicit)
    return JobSpec(**fields)
