"""Deploys the registered model on KServe and smoke-tests it (the README's *Deploy* and *Ownership*).

The client layer over :mod:`.kserve_manifests` with the ``kubernetes`` client: a deadline on every request, transient
failures retried, every create and patch ``fieldValidation=Strict``, nothing deleted.
"""

from __future__ import annotations

import dataclasses
import json
import ssl
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from components._common.namespace import SERVICE_ACCOUNT_DIR
from components._common.retry import GaveUp, RetryPolicy, answer_message, call_with_retries, describe, status_of

from .kserve_manifests import build_inference_service, build_serving_runtime, is_owned

GROUP = "serving.kserve.io"
#: The OpenShift service CA (in-cluster ``https`` routes of KServe), else the service account's CA.
CA_FILES = (f"{SERVICE_ACCOUNT_DIR}/service-ca.crt", f"{SERVICE_ACCOUNT_DIR}/ca.crt")
SMOKE_PROMPT = "Say hello."
#: Every API call made here as (apiGroup, resource, verb); ``rbac.yaml`` beside this module grants exactly these.
API_PERMISSIONS = frozenset(
    {(GROUP, "inferenceservices", verb) for verb in ("get", "create", "patch")}
    | {(GROUP, "servingruntimes", verb) for verb in ("get", "create")}
)


class DeployError(ValueError):
    """The deployment failed or was refused; the one-line message says what and what to do."""


@dataclasses.dataclass(frozen=True)
class DeploySettings:
    """Where and how to deploy: the ``deploy_*`` parameters, and how often and how long requests and waits go.

    ``poll_seconds``: how often the status is read while waiting ``timeout_seconds`` for ``Ready``;
    ``request_timeout``: the deadline of one API or smoke request.
    """

    namespace: str
    service_name: str
    runtime: str
    runtime_image: str
    gpus: int
    timeout_seconds: float
    poll_seconds: float = 2.0
    request_timeout: float = 30.0
    hardware_profile: Any = None


@dataclasses.dataclass(frozen=True)
class Deployment:
    """A deployed, smoke-tested model (``service``: ``namespace/name``; ``action``: ``created`` or ``updated``)."""

    service: str
    uid: str
    action: str
    runtime_created: bool
    url: str
    smoke_answer: str


def _why(error: BaseException) -> str:
    """An API error as ``HTTP <status>: <the server's message>`` (the Status body), else :func:`describe`."""
    status, message = status_of(error), answer_message(error)
    return f"HTTP {status}: {message}" if status and message else describe(error)


class _Api:
    """The custom-objects calls this step makes: a deadline on each, transient errors retried, 403 explained."""

    def __init__(self, api_client: Any, settings: DeploySettings, policy: RetryPolicy, sleep: Callable) -> None:
        from kubernetes import client

        self.objects = client.CustomObjectsApi(api_client)
        self.settings, self.policy, self.sleep = settings, policy, sleep

    def call(self, verb: str, version: str, plural: str, *args: Any) -> Any:
        """``<verb>_namespaced_custom_object`` of ``plural`` in the namespace; 404 and 409 raised as they are."""
        method = getattr(self.objects, f"{verb}_namespaced_custom_object")
        kwargs: dict[str, Any] = {"_request_timeout": (10.0, self.settings.request_timeout)}
        if verb != "get":
            kwargs["field_validation"] = "Strict"
        where = f"{verb} {GROUP} {plural} in namespace {self.settings.namespace}"
        try:
            return call_with_retries(
                lambda: method(GROUP, version, self.settings.namespace, plural, *args, **kwargs),
                self.policy,
                sleep=self.sleep,
            )
        except GaveUp as gave_up:
            raise DeployError(f"cannot {where}: {gave_up}") from None
        except Exception as error:
            if status_of(error) == 403:
                raise DeployError(
                    f"forbidden to {where}: grant the pipeline's service account the KServe rules of "
                    "components/deployment/kubeflow_model_registry/rbac.yaml"
                ) from None
            if status_of(error) in (404, 409):
                raise
            raise DeployError(f"cannot {where}: {_why(error)}") from None

    def get(self, version: str, plural: str, name: str) -> dict[str, Any] | None:
        try:
            return self.call("get", version, plural, name)
        except Exception as error:
            if status_of(error) == 404:
                return None
            raise


def _ensure_runtime(api: _Api, settings: DeploySettings, model_name: str, log: Callable[[str], None]) -> bool:
    """Uses the named ServingRuntime, or creates it from the vLLM template; whether it was created."""
    if api.get("v1alpha1", "servingruntimes", settings.runtime) is not None:
        log(f"ServingRuntime {settings.runtime} exists: used as it is")
        return False
    body = build_serving_runtime(settings.runtime, settings.namespace, settings.runtime_image, model_name)
    try:
        api.call("create", "v1alpha1", "servingruntimes", body)
    except Exception as error:
        if status_of(error) != 409:  # created in between by someone else: use theirs
            raise DeployError(f"cannot create ServingRuntime {settings.runtime}: {_why(error)}") from None
        return False
    log(f"created ServingRuntime {settings.runtime} (vLLM, {settings.runtime_image})")
    return True


def _apply_service(api: _Api, desired: dict[str, Any], model_name: str, log: Callable[[str], None]) -> tuple[dict, str]:
    """Creates the InferenceService, or updates it when this step owns it; ``(object, action)``."""
    name = desired["metadata"]["name"]
    where = f"InferenceService {desired['metadata']['namespace']}/{name}"
    for _ in range(2):  # a create that loses a race reads the winner once
        existing = api.get("v1beta1", "inferenceservices", name)
        if existing is None:
            try:
                return api.call("create", "v1beta1", "inferenceservices", desired), "created"
            except Exception as error:
                if status_of(error) != 409:
                    raise DeployError(f"cannot create {where}: {_why(error)}") from None
                continue
        if not is_owned(existing, model_name):
            labels = (existing.get("metadata") or {}).get("labels") or {}
            raise DeployError(
                f"{where} exists and was not made by this pipeline for registered model {model_name!r} (labels "
                f"{json.dumps(labels, sort_keys=True)}): it is never overwritten; set deploy_service_name to another "
                "name or delete that service"
            )
        metadata = existing["metadata"]
        patch = {
            "metadata": {
                "uid": metadata["uid"],  # preconditions: the same object, unchanged since it was read
                "resourceVersion": metadata["resourceVersion"],
                "labels": desired["metadata"]["labels"],
                "annotations": desired["metadata"]["annotations"],
            },
            "spec": desired["spec"],
        }
        try:
            updated = api.call("patch", "v1beta1", "inferenceservices", name, patch)
        except Exception as error:
            raise DeployError(
                f"cannot update {where}: {_why(error)} (it changed or was replaced since it was read; re-run)"
            ) from None
        log(f"updated {where} (uid {metadata['uid']})")
        return updated, "updated"
    raise DeployError(f"{where} keeps being created and deleted by someone else: re-run")


def _ready(obj: dict[str, Any], generation: int) -> tuple[bool, str]:
    """Whether the service is Ready for ``generation``, and the latest condition's words."""
    status = obj.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    ready = conditions.get("Ready") or {}
    observed = status.get("observedGeneration")
    current = observed is None or observed >= generation
    words = f"{ready.get('reason') or 'no Ready condition yet'} {ready.get('message') or ''}".strip()
    return ready.get("status") == "True" and current and bool(status.get("url")), words


def _wait_ready(api: _Api, obj: dict[str, Any], settings: DeploySettings, clock: Callable, log) -> dict[str, Any]:
    name = obj["metadata"]["name"]
    generation = int(obj["metadata"].get("generation") or 1)
    deadline = clock() + settings.timeout_seconds
    last = ""
    while True:
        current = api.get("v1beta1", "inferenceservices", name)
        if current is None or current["metadata"].get("uid") != obj["metadata"].get("uid"):
            raise DeployError(f"InferenceService {settings.namespace}/{name} was deleted or replaced while waiting")
        ready, words = _ready(current, generation)
        if ready:
            return current
        if words != last:
            log(f"InferenceService {name}: not Ready yet ({words})")
            last = words
        if clock() >= deadline:
            raise DeployError(
                f"InferenceService {settings.namespace}/{name} did not become Ready within "
                f"{settings.timeout_seconds:g} s (last: {words}); see `oc describe inferenceservice {name}` and its "
                "predictor pod's events; it was left in place"
            )
        api.sleep(settings.poll_seconds)


def smoke_request(url: str, served_name: str, timeout: float) -> str:
    """One OpenAI-compatible ``POST <url>/v1/completions``; the first choice's text.

    Raises:
        DeployError: No answer, an error status, or an answer without ``choices[0].text``.
    """
    body = json.dumps({"model": served_name, "prompt": SMOKE_PROMPT, "max_tokens": 16, "temperature": 0}).encode()
    request = urllib.request.Request(
        f"{url.rstrip('/')}/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    context = None
    if url.startswith("https://"):
        ca = next((path for path in CA_FILES if Path(path).is_file()), None)
        context = ssl.create_default_context(cafile=ca)
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            answer = json.loads(response.read())
        return str(answer["choices"][0]["text"])
    except (OSError, ValueError, KeyError, IndexError, TypeError) as error:
        raise DeployError(f"the smoke request to {url}/v1/completions failed: {_why(error)}") from None


def deploy_model(
    api_client: Any,
    settings: DeploySettings,
    storage_uri: str,
    model_name: str,
    storage_key: str,
    log: Callable[[str], None],
    *,
    policy: RetryPolicy = RetryPolicy(attempts=4),
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    smoke: Callable[[str, str, float], str] = smoke_request,
) -> Deployment:
    """Serves ``storage_uri`` with an InferenceService this step owns, waits until Ready, sends one completion.

    Raises:
        DeployError: Forbidden, refused, not owned, not Ready in time, or the smoke request failed.
    """
    api = _Api(api_client, settings, policy, sleep)
    runtime_created = _ensure_runtime(api, settings, model_name, log)
    desired = build_inference_service(
        settings.service_name,
        settings.namespace,
        storage_uri,
        settings.runtime,
        model_name,
        settings.gpus,
        storage_key,
        profile=settings.hardware_profile,
    )
    obj, action = _apply_service(api, desired, model_name, log)
    log(f"{action} InferenceService {settings.namespace}/{settings.service_name} serving {storage_uri}")
    ready = _wait_ready(api, obj, settings, clock, log)
    status = ready.get("status") or {}
    url = str(status.get("url"))
    internal = str((status.get("address") or {}).get("url") or url)
    answer = smoke(internal, settings.service_name, settings.request_timeout)
    log(f"InferenceService {settings.service_name} is Ready at {url}; smoke completion: {answer!r}")
    return Deployment(
        f"{settings.namespace}/{settings.service_name}",
        str(ready["metadata"].get("uid")),
        action,
        runtime_created,
        url,
        answer,
    )
