"""Which ``TrainJob`` API generation the cluster serves (OpenAPI v3 discovery), and whether a resource is served.

When discovery cannot say (403, 404, no answer, no recognisable ``TrainJob`` schema) the generation is assumed
(:data:`~..manifests.api_generations.ASSUMED_GENERATION`); every create is Strict (:mod:`.strict`), so a wrong guess
is refused naming the unknown field, never a silently pruned job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from components.training.finetuning.cluster.api import Api, api_message, status_of
from components.training.finetuning.cluster.errors import JobError
from components.training.finetuning.manifests.api_generations import (
    ASSUMED_GENERATION,
    OPENAPI_V3_PATH,
    TrainJobApi,
    assumed,
    served_trainjob_api,
)


def discover_trainjob_api(api: Api) -> TrainJobApi:
    """The ``TrainJob`` API the cluster serves, or the assumed one (its ``source`` says why) when discovery cannot say.

    Args:
        api: The request layer (deadlines, retries of transient failures).
    """
    from kubernetes.client import ApiException

    try:
        document = api.read_json(
            f"reading {OPENAPI_V3_PATH}",
            api.custom.api_client.call_api,
            OPENAPI_V3_PATH,
            "GET",
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
    except ApiException as error:
        status = status_of(error)
        if status == 403:
            why = f"OpenAPI v3 discovery ({OPENAPI_V3_PATH}) is forbidden to this identity (HTTP 403)"
        elif status == 404:
            why = f"OpenAPI v3 discovery does not publish {OPENAPI_V3_PATH} (HTTP 404)"
        else:
            why = f"OpenAPI v3 discovery failed: {api_message(error)}"
        return assumed(ASSUMED_GENERATION, why)
    except (JobError, ValueError) as error:  # no answer through the retries, or not JSON
        return assumed(ASSUMED_GENERATION, f"OpenAPI v3 discovery failed: {error}")
    served = served_trainjob_api(document)
    if served is None:
        why = f"{OPENAPI_V3_PATH} has no TrainJob schema with spec.runtimePatches or spec.podTemplateOverrides"
        return assumed(ASSUMED_GENERATION, why)
    return served


def discovery_line(served: TrainJobApi) -> str:
    """The launcher's log line about the API it builds for."""
    how = "from OpenAPI v3 discovery" if served.discovered else f"{served.source}; a Strict create checks it"
    return f"TrainJob API: {served.describe()} ({how}); {served.consequences()}"


def _discover(api: Api, what: str, func: Callable[..., Any], *args: Any) -> dict[str, Any] | None:
    """Calls a discovery endpoint of the official client; its JSON, or ``None`` on 404 (not served)."""
    from kubernetes.client import ApiException

    try:
        return api.read_json(what, func, *args)
    except ApiException as error:
        if error.status == 404:
            return None
        raise JobError(f"{what} was rejected by the Kubernetes API: {api_message(error)}") from None


def served_versions(api: Api, group: str) -> list[str]:
    """The versions of an API group the server serves (``[]`` when the group is unknown)."""
    from kubernetes import client

    apis = client.ApisApi(api.custom.api_client)
    groups = (_discover(api, "listing API groups", apis.get_api_versions) or {}).get("groups") or []
    for item in groups:
        if item.get("name") == group:
            return sorted(str(version.get("version")) for version in item.get("versions") or [])
    return []


def resource_served(api: Api, group: str, version: str, plural: str) -> bool:
    """Whether the server lists the resource ``plural`` under ``/apis/<group>/<version>``."""
    what = f"discovering {group}/{version}"
    listing = _discover(api, what, api.custom.get_api_resources, group, version) or {}
    return any(item.get("name") == plural for item in listing.get("resources") or [])
