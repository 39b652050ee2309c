"""Which ``TrainJob`` API generation the cluster serves (OpenAPI v3 discovery; else assumed), and what is served."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import urllib3

from components._common.retry import describe
from components.training.finetuning.cluster.api import Api, Deadline, api_message, status_of
from components.training.finetuning.cluster.errors import ApiUnavailable, JobError
from components.training.finetuning.manifests.api_generations import (
    ASSUMED_GENERATION,
    OPENAPI_V3_PATH,
    TrainJobApi,
    assumed,
    served_trainjob_api,
)

#: The most OpenAPI v3 discovery may take, every try and the answer's body included: past it the generation is assumed.
DISCOVERY_TIMEOUT_SECONDS = 20.0


def discover_trainjob_api(api: Api, deadline_seconds: float = DISCOVERY_TIMEOUT_SECONDS) -> TrainJobApi:
    """The ``TrainJob`` API the cluster serves, or the assumed one (its ``source`` says why) within the deadline."""
    from kubernetes.client import ApiException

    deadline = Deadline(api.clock() + deadline_seconds, f"discovery's {deadline_seconds:g} s deadline")
    bounded = api.bounded(deadline)
    try:
        response = bounded.call(
            f"reading {OPENAPI_V3_PATH}",
            api.custom.api_client.call_api,
            OPENAPI_V3_PATH,
            "GET",
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
            _preload_content=False,
        )
        body = _read_body(response, deadline, api.clock)
    except ApiException as error:
        why = {
            403: f"OpenAPI v3 discovery ({OPENAPI_V3_PATH}) is forbidden to this identity (HTTP 403)",
            404: f"OpenAPI v3 discovery does not publish {OPENAPI_V3_PATH} (HTTP 404)",
        }.get(status_of(error), f"OpenAPI v3 discovery failed: {api_message(error)}")
        return assumed(ASSUMED_GENERATION, why)
    except JobError as error:  # no answer through the retries, or not before the deadline
        return assumed(ASSUMED_GENERATION, f"OpenAPI v3 discovery failed: {error}")
    except (urllib3.exceptions.HTTPError, OSError) as error:  # the body broke off or stalled
        return assumed(ASSUMED_GENERATION, f"OpenAPI v3 discovery failed reading the answer: {describe(error)}")
    document, why = parse_openapi_answer(body, response.headers.get("Content-Type") or "no Content-Type")
    served = served_trainjob_api(document) if document is not None else None
    if served is None:
        why = why or f"{OPENAPI_V3_PATH} has no TrainJob schema with spec.runtimePatches or spec.podTemplateOverrides"
        return assumed(ASSUMED_GENERATION, why)
    return served


def _read_body(response: Any, deadline: Deadline, clock: Callable[[], float]) -> bytes:
    """The answer's body, read as it arrives until ``deadline`` (a server that trickles it cannot hold the step)."""
    chunks = []
    try:
        while chunk := response.read1(64 * 1024):
            chunks.append(chunk)
            if clock() > deadline.at:
                last = f"{sum(map(len, chunks))} bytes of the body read"
                raise ApiUnavailable(f"reading {OPENAPI_V3_PATH}: {last} by {deadline.reason}", deadline, last)
    finally:
        response.release_conn()
    return b"".join(chunks)


def parse_openapi_answer(body: bytes, content_type: str) -> tuple[Any, str]:
    """``(document, "")``, or ``(None, why)`` for an answer that is not a JSON object (HTML, ``[]``, ``null``...)."""
    try:
        document = json.loads(body)
    except ValueError:
        start = " ".join(body[:80].decode("utf-8", "replace").split())
        return None, (
            f"{OPENAPI_V3_PATH} answered with something that is not JSON ({content_type}, starting {start!r}): "
            "a proxy or login page in front of the API server?"
        )
    if not isinstance(document, dict):
        return None, (
            f"{OPENAPI_V3_PATH} answered with a JSON {type(document).__name__ if document is not None else 'null'} "
            "where an OpenAPI document (an object) belongs"
        )
    return document, ""


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
    except ValueError as error:  # not JSON (an HTML page of a proxy)
        raise JobError(f"{what}: the Kubernetes API answered with something that is not JSON ({error})") from None


def served_versions(api: Api, group: str) -> list[str]:
    """The versions of an API group the server serves (``[]`` when the group is unknown)."""
    from kubernetes import client

    apis = client.ApisApi(api.custom.api_client)
    groups = _field(_discover(api, "listing API groups", apis.get_api_versions), "groups")
    for item in groups:
        if isinstance(item, dict) and item.get("name") == group:
            versions = _field(item, "versions")
            return sorted(str(version.get("version")) for version in versions if isinstance(version, dict))
    return []


def resource_served(api: Api, group: str, version: str, plural: str) -> bool:
    """Whether the server lists the resource ``plural`` under ``/apis/<group>/<version>``."""
    what = f"discovering {group}/{version}"
    listing = _discover(api, what, api.custom.get_api_resources, group, version)
    return any(isinstance(item, dict) and item.get("name") == plural for item in _field(listing, "resources"))


def _field(answer: Any, name: str) -> list[Any]:
    """``answer[name]`` when ``answer`` is a JSON object holding a list there, else ``[]`` (any JSON may come back)."""
    value = answer.get(name) if isinstance(answer, dict) else None
    return value if isinstance(value, list) else []
