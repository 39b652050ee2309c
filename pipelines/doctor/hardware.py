"""The Hardware Profiles of the namespace and the platform, which steps each fits, and the run's chosen ones."""

from __future__ import annotations

from components._common.hardware_profiles import (
    PLATFORM_NAMESPACES,
    HardwareProfileError,
    list_hardware_profiles,
    step_fit,
)
from pipelines.doctor.cluster import Cluster
from pipelines.doctor.facts import RunValues
from pipelines.doctor.report import Check, fail, ok, warn

#: The run's profile parameters, by step kind.
CHOSEN = {
    "training": ("train", "training_hardware_profile"),
    "evaluation": ("eval", "hardware_profile"),
    "serving": ("registry", "deploy_hardware_profile"),
}


def check_hardware_profiles(cluster: Cluster, values: RunValues) -> list[Check]:
    """One line per profile (which steps it fits), and a FAIL for a chosen profile that is missing or disabled."""
    from kubernetes.client.rest import ApiException

    namespaces = [cluster.namespace, *PLATFORM_NAMESPACES]
    chosen = {kind: str(values.get(key) or "").strip() for kind, key in CHOSEN.items()}
    try:
        profiles = list_hardware_profiles(cluster.api_client, namespaces)
    except (ApiException, HardwareProfileError) as error:
        if not any(chosen.values()):
            return []
        return [warn("hardware", f"could not list Hardware Profiles: {error}", "check the API server")]
    checks = []
    for profile in profiles:
        fit = step_fit(profile)
        fits = [kind for kind, why in fit.items() if not why]
        not_fitting = "; ".join(f"not {kind}: {why}" for kind, why in fit.items() if why)
        what = f"hardware profile {profile.summary()}; fits {', '.join(fits) or 'no step'}"
        checks.append(ok("hardware", what + (f" ({not_fitting})" if not_fitting else "")))
    enabled = sorted({profile.name for profile in profiles if not profile.disabled})
    for kind, name in chosen.items():
        if not name:
            continue
        found = next((profile for profile in profiles if profile.name == name), None)
        if found is None or found.disabled:
            state = "is disabled" if found is not None else "does not exist"
            what = f"{values.label(CHOSEN[kind])}={name!r}: HardwareProfile {name} {state} in {', '.join(namespaces)}"
            checks.append(fail("hardware", what, f"pick one of: {', '.join(enabled) or '(none)'}"))
        elif step_fit(found)[kind]:
            checks.append(warn("hardware", f"hardware profile {name} for {kind}: {step_fit(found)[kind]}", ""))
    return checks
