"""Deploys the registered model on KServe and smoke-tests it (README: *Deploy*): timed, retried, Strict, no deletes."""

from __future__ import annotations

import dataclasses
import http.client
import json
import ssl
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from components._common.kube_auth import KubeAuthError, load_api_client
from components._common.namespace import SERVICE_ACCOUNT_DIR, pod_namespace
from components._common.retry import (
    GaveUp,
    RetryPolicy,
    answer_message,
    call_with_retries,
    describe,
    single_try_transport,
    status_of,
)

from .kserve_manifests import build_inference_service, build_serving_runtime, is_owned, service_name
from .request import DeployOptions

GROUP = "serving.kserve.io"
#: The OpenShift service CA (in-cluster ``https`` routes of KServe), else the service account's CA.
CA_FILES = (f"{SERVICE_ACCOUNT_DIR}/service-ca.crt", f"{SERVICE_ACCOUNT_DIR}/ca.crt")
SMOKE_PROMPT = "Say hello."
#: The pipeline run that made an InferenceService: what makes it this run's (the labels are every run's).
RUN_ANNOTATION = "kfp-finetune.opendatahub.io/pipeline-run-id"
#: Every API call made here as (apiGroup, resource, verb); ``rbac.yaml`` beside this module grants exactly these.
API_PERMISSIONS = frozenset(
    {(GROUP, "inferenceservices", verb) for verb in ("get", "create", "patch")}
    | {(GROUP, "servingruntimes", verb) for verb in ("get", "create")}
)


class DeployError(ValueError):
    """The deployment failed or was refused; the one-line message says what and what to do."""


@dataclasses.dataclass(frozen=True)
class DeploySettings:
    """The resolved ``deploy_*`` options; ``request_timeout``: one API request's and the smoke request's deadline.

    ``poll_seconds``: the status read interval while waiting ``timeout_seconds`` for ``Ready``;
    ``api_deadline_seconds``: the most one API call may take, every try included.
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
    api_deadline_seconds: float = 120.0


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

    def __init__(
        self, api_client: Any, settings: DeploySettings, policy: RetryPolicy, sleep: Callable, clock: Callable
    ) -> None:
        from kubernetes import client

        pool_manager = api_client.rest_client.pool_manager  # urllib3's own retries off: this layer retries
        pool_manager.connection_pool_kw["retries"] = single_try_transport()
        pool_manager.clear()
        self.objects = client.CustomObjectsApi(api_client)
        self.settings, self.policy, self.sleep, self.clock = settings, policy, sleep, clock

    def call(self, verb: str, version: str, plural: str, *args: Any) -> Any:
        """``<verb>_namespaced_custom_object`` of ``plural``, each try timed; 404 and 409 raised as they are."""
        method = getattr(self.objects, f"{verb}_namespaced_custom_object")
        deadline = self.clock() + self.settings.api_deadline_seconds
        kwargs: dict[str, Any] = {}
        if verb != "get":
            kwargs["field_validation"] = "Strict"
        where = f"{verb} {GROUP} {plural} in namespace {self.settings.namespace}"

        def attempt() -> Any:
            left = max(deadline - self.clock(), 0.5)
            timeout = (min(10.0, left), min(self.settings.request_timeout, left))
            return method(GROUP, version, self.settings.namespace, plural, *args, _request_timeout=timeout, **kwargs)

        try:
            return call_with_retries(attempt, self.policy, sleep=self.sleep, clock=self.clock, deadline=deadline)
        except GaveUp as gave_up:
            within = f" within api_deadline_seconds={self.settings.api_deadline_seconds:g}" * (
                gave_up.reason == "deadline"
            )
            raise DeployError(
                f"cannot {where}: no answer{within} ({gave_up.attempts} tries, last: {describe(gave_up.last)})"
            ) from None
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


def owned_by_run(obj: dict[str, Any], model_name: str, run_id: str) -> bool:
    """Whether ``obj`` is this step's for ``model_name`` (labels) *and* this pipeline run's (annotation; a known id)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return bool(run_id) and is_owned(obj, model_name) and annotations.get(RUN_ANNOTATION) == run_id


def _apply_service(
    api: _Api, desired: dict[str, Any], model_name: str, run_id: str, log: Callable[[str], None]
) -> tuple[dict, str]:
    """Creates the InferenceService, or updates it when this run made it; ``(object, "created" or "updated")``."""
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
        if not owned_by_run(existing, model_name, run_id):
            labels = (existing.get("metadata") or {}).get("labels") or {}
            made_by = ((existing.get("metadata") or {}).get("annotations") or {}).get(RUN_ANNOTATION, "")
            run = f"pipeline run {made_by!r}" if made_by else "no recorded pipeline run"
            raise DeployError(
                f"{where} exists and was not made by this pipeline run ({run_id or 'unknown run id'}) for registered "
                f"model {model_name!r} (labels {json.dumps(labels, sort_keys=True)}, made by {run}): it is never "
                "overwritten; set deploy_service_name to another name or delete that service"
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


def _wait_ready(api: _Api, obj: dict[str, Any], settings: DeploySettings, clock: Callable, log) -> dict[str, Any]:
    """The service once Ready at a URL for its generation, read every ``poll_seconds`` up to ``timeout_seconds``."""
    name, uid = obj["metadata"]["name"], obj["metadata"].get("uid")
    generation = int(obj["metadata"].get("generation") or 1)
    deadline, last = clock() + settings.timeout_seconds, ""
    while True:
        current = api.get("v1beta1", "inferenceservices", name)
        if current is None or current["metadata"].get("uid") != uid:
            raise DeployError(f"InferenceService {settings.namespace}/{name} was deleted or replaced while waiting")
        status = current.get("status") or {}
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
        observed = status.get("observedGeneration")
        if ready.get("status") == "True" and (observed is None or observed >= generation) and status.get("url"):
            return current
        words = f"{ready.get('reason') or 'no Ready condition yet'} {ready.get('message') or ''}".strip()
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
    """One OpenAI-compatible ``POST <url>/v1/completions``, the first choice's text (DeployError: none in time)."""
    body = json.dumps({"model": served_name, "prompt": SMOKE_PROMPT, "max_tokens": 16, "temperature": 0}).encode()
    request = urllib.request.Request(
        f"{url.rstrip('/')}/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    context = None
    if url.startswith("https://"):
        ca = next((path for path in CA_FILES if Path(path).is_file()), None)
        context = ssl.create_default_context(cafile=ca)
    deadline, chunks = time.monotonic() + timeout, []
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            while chunk := response.read1(64 * 1024):  # as it arrives: a server that trickles cannot hold the step
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    got = sum(map(len, chunks))
                    raise TimeoutError(f"the answer was not complete within {timeout:g} s ({got} bytes so far)")
        return str(json.loads(b"".join(chunks))["choices"][0]["text"])
    except (OSError, ValueError, KeyError, IndexError, TypeError, http.client.HTTPException) as error:
        raise DeployError(f"the smoke request to {url}/v1/completions failed: {_why(error)}") from None


def deploy_model(
    api_client: Any,
    settings: DeploySettings,
    storage_uri: str,
    model_name: str,
    storage_key: str,
    log: Callable[[str], None],
    *,
    run_id: str = "",
    policy: RetryPolicy = RetryPolicy(attempts=4),
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    smoke: Callable[[str, str, float], str] = smoke_request,
) -> Deployment:
    """Serves ``storage_uri`` with an InferenceService this run owns, waits until Ready, sends one completion.

    Raises:
        DeployError: Forbidden, refused, not owned, not Ready in time, or the smoke request failed.
    """
    api = _Api(api_client, settings, policy, sleep, clock)
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
    if run_id:
        desired["metadata"]["annotations"][RUN_ANNOTATION] = run_id
    obj, action = _apply_service(api, desired, model_name, run_id, log)
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


def deploy(
    options: DeployOptions,
    registered_uri: str,
    model_name: str,
    storage_key: str,
    environ: Mapping[str, str],
    log: Callable[[str], None],
    run_id: str = "",
) -> Deployment:
    """:func:`deploy_model` with the Kubernetes credentials of ``environ`` (KubeAuthError when there are none)."""
    try:
        api_client = load_api_client(environ=environ, log=log)
    except KubeAuthError as error:
        raise KubeAuthError(f"deploy_inference_service: {error}") from None
    try:
        namespace = options.namespace.strip() or pod_namespace(environ)
        profile = None
        if options.hardware_profile.strip():
            from components._common.hardware_profiles import PLATFORM_NAMESPACES, read_hardware_profile

            profile = read_hardware_profile(
                api_client, options.hardware_profile.strip(), [namespace, *PLATFORM_NAMESPACES],
                "deploy_hardware_profile",
            )  # fmt: skip
            log(f"hardware profile {profile.summary()}")
        settings = DeploySettings(
            namespace=namespace,
            service_name=service_name(options.service_name, model_name),
            runtime=options.runtime.strip(),
            runtime_image=options.runtime_image.strip(),
            gpus=options.gpus,
            timeout_seconds=float(options.timeout_seconds),
            hardware_profile=profile,
        )
        return deploy_model(api_client, settings, registered_uri, model_name, storage_key, log, run_id=run_id)
    finally:
        api_client.close()
