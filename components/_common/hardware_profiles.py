"""RHOAI Hardware Profiles (``infrastructure.opendatahub.io`` ``HardwareProfile``): read at run time, applied by steps.

Each identifier's ``defaultCount`` is a request and limit; ``spec.scheduling`` adds a node selector and tolerations
or a Kueue local queue. The CRD (Open Data Hub operator v3.0.0 to v3.5.0) is vendored in ``tests/specs/crds/``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

API_GROUP = "infrastructure.opendatahub.io"
#: The served versions, newest first (the CRD's ``spec.versions``).
SERVED_VERSIONS = ("v1", "v1alpha1")
PLURAL = "hardwareprofiles"
NAME_ANNOTATION = "opendatahub.io/hardware-profile-name"
NAMESPACE_ANNOTATION = "opendatahub.io/hardware-profile-namespace"
DISABLED_ANNOTATION = "opendatahub.io/disabled"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
#: The step kinds a profile is chosen for.
STEP_KINDS = ("training", "evaluation", "serving")
#: Where the dashboard keeps global profiles (RHOAI, Open Data Hub): read after the run's own namespace.
PLATFORM_NAMESPACES = ("redhat-ods-applications", "opendatahub")


class HardwareProfileError(ValueError):
    """A profile that is missing, disabled, malformed or not applicable to a step (one line)."""


@dataclasses.dataclass(frozen=True)
class HardwareProfile:
    """One HardwareProfile, as a step applies it (``counts``: each identifier's ``defaultCount``)."""

    name: str
    namespace: str
    disabled: bool
    counts: Mapping[str, str]
    accelerators: tuple[str, ...]
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    local_queue: str
    priority_class: str

    def resources(self) -> dict[str, dict[str, str]]:
        """The container resources: each default count as request and limit (``{}`` for none)."""
        if not self.counts:
            return {}
        return {"requests": dict(self.counts), "limits": dict(self.counts)}

    def gpus(self) -> tuple[str, int]:
        """``(resource name, count)`` of the first accelerator (``("", 0)``: none)."""
        for name in self.accelerators:
            return name, int(str(self.counts.get(name, "0")) or 0)
        return "", 0

    def labels(self) -> dict[str, str]:
        """The Kueue labels of a workload scheduled by this profile (``{}`` when it is node-scheduled)."""
        labels = {QUEUE_NAME_LABEL: self.local_queue} if self.local_queue else {}
        if self.priority_class:
            labels[PRIORITY_CLASS_LABEL] = self.priority_class
        return labels

    def annotations(self) -> dict[str, str]:
        """The annotations the dashboard reads to show a workload's profile."""
        return {NAME_ANNOTATION: self.name, NAMESPACE_ANNOTATION: self.namespace}

    def summary(self) -> str:
        """One line: ``gpu-a100 (ns): nvidia.com/gpu=1, cpu=8; nodeSelector {...}; 1 toleration(s); queue q``."""
        parts = [", ".join(f"{key}={value}" for key, value in self.counts.items()) or "no resources"]
        if self.node_selector:
            parts.append(f"nodeSelector {dict(self.node_selector)}")
        if self.tolerations:
            parts.append(f"{len(self.tolerations)} toleration(s)")
        if self.local_queue:
            parts.append(f"queue {self.local_queue}")
        return f"{self.name} ({self.namespace}): " + "; ".join(parts) + ("; DISABLED" if self.disabled else "")


def parse_profile(obj: Mapping[str, Any]) -> HardwareProfile:
    """A ``HardwareProfile`` object (either served version) as a :class:`HardwareProfile`.

    Raises:
        HardwareProfileError: An identifier without ``identifier`` or ``defaultCount``.
    """
    metadata = obj.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    spec = obj.get("spec") or {}
    counts: dict[str, str] = {}
    accelerators: list[str] = []
    for index, item in enumerate(spec.get("identifiers") or []):
        if not item.get("identifier") or item.get("defaultCount") in (None, ""):
            raise HardwareProfileError(
                f"HardwareProfile {metadata.get('name')}: spec.identifiers[{index}] needs identifier and defaultCount"
            )
        counts[str(item["identifier"])] = str(item["defaultCount"])
        if item.get("resourceType") == "Accelerator":
            accelerators.append(str(item["identifier"]))
    scheduling = spec.get("scheduling") or {}
    node = scheduling.get("node") or {}
    kueue = scheduling.get("kueue") or {}
    return HardwareProfile(
        name=str(metadata.get("name") or ""),
        namespace=str(metadata.get("namespace") or ""),
        disabled=str(annotations.get(DISABLED_ANNOTATION, "false")).lower() == "true",
        counts=counts,
        accelerators=tuple(accelerators),
        node_selector={str(k): str(v) for k, v in (node.get("nodeSelector") or {}).items()},
        tolerations=tuple(dict(t) for t in node.get("tolerations") or []),
        local_queue=str(kueue.get("localQueueName") or ""),
        priority_class=str(kueue.get("priorityClass") or ""),
    )


def step_fit(profile: HardwareProfile) -> dict[str, str]:
    """Which steps a profile fits: ``{step: ""}`` when it fits, else ``{step: why not}`` (what ``doctor`` shows)."""
    fit = {kind: "" for kind in STEP_KINDS}
    if profile.disabled:
        return {kind: "disabled" for kind in STEP_KINDS}
    if not profile.accelerators:
        fit["serving"] = "no accelerator identifier (vLLM serves on a GPU)"
    if profile.tolerations:
        fit["evaluation"] = "eval_backend=lmevaljob only with a Queue profile (LMEvalJob's pod has no tolerations)"
    return fit


def lmevaljob_pod_settings(profile: HardwareProfile) -> tuple[dict[str, Any], dict[str, str]]:
    """``(spec.pod, metadata.labels)`` of an ``LMEvalJob`` scheduled by ``profile`` (node selector as node affinity).

    Raises:
        HardwareProfileError: The profile has tolerations (LMEvalJob cannot carry them).
    """
    if profile.tolerations:
        raise HardwareProfileError(
            f"hardware profile {profile.name}: its {len(profile.tolerations)} toleration(s) cannot be set on an "
            "LMEvalJob (its pod spec has no tolerations field); use a Queue-scheduled profile, whose Kueue flavor "
            "carries them, or eval_backend=evalhub or lm-eval"
        )
    pod: dict[str, Any] = {}
    if profile.counts:
        pod["container"] = {"resources": profile.resources()}
    if profile.node_selector:
        expressions = [
            {"key": key, "operator": "In", "values": [value]} for key, value in sorted(profile.node_selector.items())
        ]
        pod["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": expressions}]
                }
            }
        }
    return pod, profile.labels()


def apply_to_inference_service(isvc: Mapping[str, Any], profile: HardwareProfile) -> dict[str, Any]:
    """A copy of an ``InferenceService`` with the profile applied where the operator's webhook puts it."""
    import copy

    result = copy.deepcopy(dict(isvc))
    metadata = result.setdefault("metadata", {})
    metadata.setdefault("labels", {}).update(profile.labels())
    metadata.setdefault("annotations", {}).update(profile.annotations())
    predictor = result.setdefault("spec", {}).setdefault("predictor", {})
    if profile.counts:
        predictor.setdefault("model", {})["resources"] = profile.resources()
    if profile.node_selector:
        predictor["nodeSelector"] = dict(profile.node_selector)
    if profile.tolerations:
        predictor["tolerations"] = [dict(t) for t in profile.tolerations]
    return result


def list_hardware_profiles(api_client: Any, namespaces: Sequence[str]) -> list[HardwareProfile]:
    """Every profile of ``namespaces`` (the run's, then the platform's) by the newest served version readable there."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    custom, profiles = client.CustomObjectsApi(api_client), []
    for namespace in dict.fromkeys(namespaces):
        for version in SERVED_VERSIONS:
            try:
                found = custom.list_namespaced_custom_object(
                    API_GROUP, version, namespace, PLURAL, _request_timeout=(5.0, 30.0)
                )
            except ApiException as error:
                if error.status in (403, 404):
                    continue
                raise
            profiles += [parse_profile(item) for item in found.get("items") or []]
            break
    return profiles


def read_hardware_profile(api_client: Any, name: str, namespaces: Sequence[str], parameter: str) -> HardwareProfile:
    """The enabled profile ``name`` (given as ``parameter``), the first found in ``namespaces`` order.

    Raises:
        HardwareProfileError: It does not exist or is disabled (the line lists the enabled ones).
    """
    profiles = list_hardware_profiles(api_client, namespaces)
    found = next((profile for profile in profiles if profile.name == name), None)
    if found is not None and not found.disabled:
        return found
    enabled = sorted({profile.name for profile in profiles if not profile.disabled})
    state = "is disabled (opendatahub.io/disabled)" if found is not None else "does not exist"
    raise HardwareProfileError(
        f"{parameter}={name!r}: HardwareProfile {name} {state} in {', '.join(dict.fromkeys(namespaces))}; "
        f"enabled profiles: {', '.join(enabled) or '(none)'}; pick one of them, or leave it empty"
    )
