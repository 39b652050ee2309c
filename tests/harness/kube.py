"""A Kubernetes API on 127.0.0.1 for tests: kmock's stateful emulator, driven by the official ``kubernetes`` client.

The fixture :func:`kube_api` yields a :class:`KubeApi`: ``api_client`` for the code under test, operator-side helpers
(their own User-Agent: left out of ``requests``), scripted faults and cluster set-up. Like a real API server
(:mod:`.kube_schema`) it prunes unknown fields with a ``Warning`` header, refuses them under Strict, and publishes the
TrainJob API generation it serves through OpenAPI v3 discovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import functools
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kmock
import pytest
from kmock._internal import enums

from tests.harness import kube_schema
from tests.harness.kube_schema import GENERATIONS, ODH_3_3, UPSTREAM_2_3  # noqa: F401 - re-exported for tests

CRDS = Path(__file__).resolve().parents[1] / "specs" / "crds"  # vendored upstream CRDs (tests/specs/SOURCE.md)
TRAINER = "trainer.kubeflow.org/v1alpha1"
TRAINING_OPERATOR = "kubeflow.org/v1"
HARNESS_USER_AGENT = "kfp-finetune-test-harness"
#: RBAC verb of each request kind kmock recognises.
RBAC_VERBS = {
    "LIST": "list",
    "WATCH": "watch",
    "FETCH": "get",
    "CREATE": "create",
    "UPDATE": "patch",
    "DELETE": "delete",
}
DECLARED_RESOURCES = (
    f"{TRAINER}/trainjobs",
    f"{TRAINER}/trainingruntimes",
    f"{TRAINER}/clustertrainingruntimes",
    f"{TRAINING_OPERATOR}/pytorchjobs",
    "trustyai.opendatahub.io/v1alpha1/lmevaljobs",
    "infrastructure.opendatahub.io/v1/hardwareprofiles",
    "v1/pods",
    "v1/events",
    "v1/secrets",
    "v1/persistentvolumeclaims",
    "v1/nodes",
    "v1/resourcequotas",
    "storage.k8s.io/v1/storageclasses",
    "authorization.k8s.io/v1/selfsubjectaccessreviews",
)


# --------------------------------------------------------------------------------------------------------------------
# Selectors (the subset the project's clients use: equality, inequality, existence).
def _selector_terms(selector: str) -> list[tuple[str, str, str]]:
    terms = []
    for term in filter(None, (part.strip() for part in selector.split(","))):
        match = re.match(r"^(!?)([^=!]+?)\s*(?:(==|=|!=)\s*(.*))?$", term)
        if not match:
            raise ValueError(f"unsupported selector term {term!r}")
        negated, key, operator, value = match.groups()
        terms.append(("!exists" if negated else (operator or "exists"), key.strip(), (value or "").strip()))
    return terms


def _field(obj: dict, dotted: str) -> Any:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _matches(obj: dict, params: dict[str, str]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for operator, key, value in _selector_terms(params.get("labelSelector", "")):
        present = key in labels
        if (operator == "exists" and not present) or (operator == "!exists" and present):
            return False
        if operator in ("=", "==") and labels.get(key) != value:
            return False
        if operator == "!=" and labels.get(key) == value:
            return False
    for operator, key, value in _selector_terms(params.get("fieldSelector", "")):
        actual = _field(obj, key)
        actual = "" if actual is None else str(actual)
        if operator in ("=", "==") and actual != value or operator == "!=" and actual == value:
            return False
    return True


@functools.lru_cache(maxsize=None)
def crd_schema(file_name: str = "trainer.kubeflow.org_trainjobs.yaml") -> dict[str, Any]:
    """The OpenAPI v3 schema of a vendored CRD with every object that declares ``properties`` closed."""
    schema = copy.deepcopy(kube_schema.crd_schema_of(file_name))

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if (
                node.get("type") == "object"
                and "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(schema)
    return schema


def validate_trainjob(manifest: dict[str, Any], generation: str = UPSTREAM_2_3) -> None:
    """Validates a TrainJob against ``generation``'s closed CRD and asserts its apiVersion, kind and name."""
    import jsonschema

    assert manifest["apiVersion"] == TRAINER and manifest["kind"] == "TrainJob", manifest
    name = manifest["metadata"]["name"]
    assert re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", name) and len(name) <= 63, name
    jsonschema.Draft7Validator(crd_schema(GENERATIONS[generation])).validate(manifest)


# --------------------------------------------------------------------------------------------------------------------
class KubeEmulator(kmock.KubernetesEmulator):
    """kmock's emulator plus selectors, ``watch=True``, watch timeouts, scripted pod logs and uid preconditions."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.pod_logs: dict[tuple[str, str], str] = {}
        self.rejections: list[dict[str, Any]] = []
        self.scripted_watches: list[tuple[str, Callable[[kmock.Request], Any]]] = []
        self.denied: set[tuple[str, str, str]] = set()  # (group, resource[/sub], verb) access reviews deny
        self.generation: str = UPSTREAM_2_3
        self.openapi_status: int = 0  # OpenAPI v3 discovery's error status instead of the document (0: none)
        self.server_metadata: set[str] = set()  # plurals with uid/resourceVersion/generation (track_metadata)
        self.resource_version = 0
        self.openapi_answer: tuple[int, str, bytes] | None = None  # (status, content type, body) instead
        self.openapi_delay: float = 0.0
        self.ignores_field_validation: bool = False  # prunes silently, even under Strict
        self.refused_fields: list[str] = []  # dotted fields a Strict create or patch is refused for
        self.create_webhooks: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}  # plural -> mutate(body)
        self.create_delays: dict[str, float] = {}  # the next create of a plural is stored that much later
        (self[kmock.subresource("log")] ** -1) << self._serve_log

    async def _handle(self, request: kmock.Request):  # noqa: D102
        # The official client sends watch=True; the API server parses it as a bool, kmock only knows "true".
        if request.params.get("watch", "").lower() in ("true", "1") and request.action != enums.action.WATCH:
            object.__setattr__(request, "action", enums.action.WATCH)
        for rule in self.rejections:
            matches = request.resource is not None and request.resource.plural == rule["plural"]
            matches = matches and request.action is not None and request.action.value == rule["action"]
            if matches and rule["left"] > 0 and rule["name"] in (None, request.name):
                rule["left"] -= 1
                raise rule["error"]
        if request.resource is not None and request.resource.plural == "selfsubjectaccessreviews":
            return self._review_access(request)
        if request.url.path.startswith("/openapi/"):
            if self.openapi_delay:
                await asyncio.sleep(self.openapi_delay)
            return self._serve_openapi(request)
        self._check_identity(request)
        warnings = self._prune(request)
        creating = request.resource is not None and request.action == enums.action.CREATE
        webhook = self.create_webhooks.get(request.resource.plural) if creating else None
        if webhook is not None and isinstance(request.data, dict):
            object.__setattr__(request, "data", webhook(copy.deepcopy(request.data)))
        stamp = None
        if request.resource is not None and request.resource.plural in self.server_metadata:
            stamp = self._server_metadata(request)
        delay = self.create_delays.pop(request.resource.plural, 0.0) if creating else 0.0
        if delay:  # stored later, whether or not the client still waits (shielded from its disconnect)
            response = await asyncio.shield(asyncio.ensure_future(self._handle_later(delay, request)))
        else:
            response = await super()._handle(request)
        if stamp is not None and response.status < 300:
            import aiohttp.web

            response = aiohttp.web.json_response(stamp(), status=response.status)  # the stored object, as written
        if warnings and not response.prepared:
            for warning in warnings:
                response.headers.add("Warning", warning)
        return response

    async def _handle_later(self, delay: float, request: kmock.Request):
        await asyncio.sleep(delay)
        return await super()._handle(request)

    def _prune(self, request: kmock.Request) -> list[str]:
        """Structural pruning of a create/patch body (Strict: a 400 naming the fields); the Warning headers."""
        if request.resource is None or request.action not in (enums.action.CREATE, enums.action.UPDATE):
            return []
        schema = kube_schema.schema_for(request.resource.plural, self.generation)
        if schema is None or not isinstance(request.data, dict):
            return []
        pruned, fields = kube_schema.prune(request.data, schema)
        fields += [field for field in self.refused_fields if _field(request.data, field) is not None]
        if not fields:
            return []
        if request.params.get("fieldValidation") == "Strict" and not self.ignores_field_validation:
            kind = kube_schema.KINDS[request.resource.plural]
            message = kube_schema.strict_error_message(kind, request.resource.version or "", fields)
            raise kmock.KubernetesError(status=400, reason="BadRequest", message=message)
        object.__setattr__(request, "data", pruned)
        return [kube_schema.warning_header(field) for field in fields]

    def _serve_openapi(self, request: kmock.Request):
        """OpenAPI v3 discovery: the index, and the served TrainJob generation's group-version document."""
        import aiohttp.web

        if self.openapi_answer is not None:
            status, content_type, body = self.openapi_answer
            return aiohttp.web.Response(status=status, body=body, headers={"Content-Type": content_type})
        if self.openapi_status:
            reason = {403: "Forbidden", 404: "NotFound"}.get(self.openapi_status, "InternalError")
            raise kmock.KubernetesError(status=self.openapi_status, reason=reason, message=f"scripted {reason}")
        trainer_path = f"/openapi/v3/apis/{TRAINER}"
        served = any(
            f"{resource.group}/{resource.version}" == TRAINER and resource.plural == "trainjobs"
            for resource in list(self.resources)
        )
        if request.url.path == "/openapi/v3":
            paths = {trainer_path[len("/openapi/v3/") :]: {"serverRelativeURL": trainer_path}} if served else {}
            return aiohttp.web.json_response({"paths": paths})
        if request.url.path == trainer_path and served:
            return aiohttp.web.json_response(kube_schema.openapi_v3_document(self.generation))
        missing = "the server could not find the requested resource"
        raise kmock.KubernetesError(status=404, reason="NotFound", message=missing)

    def _check_identity(self, request: kmock.Request) -> None:
        """A created object gets a fresh uid; a delete's or patch's uid must be the object's, else 409, unchanged."""
        data = request.data if isinstance(request.data, dict) else {}
        if request.resource is None or request.subresource:
            return
        if request.action == enums.action.CREATE and data:
            data.setdefault("metadata", {})["uid"] = str(uuid.uuid4())
            return
        if request.action == enums.action.DELETE:
            expected = (data.get("preconditions") or {}).get("uid")
        elif request.action == enums.action.UPDATE:
            expected = (data.get("metadata") or {}).get("uid")
        else:
            return
        if not expected or not request.name:
            return
        for (resource, namespace, name), obj in list(self.objects.items()):
            if (resource, namespace, name) == (request.resource, request.namespace, request.name) and not obj.deleted:
                _require_uid(expected, (obj.get("metadata") or {}).get("uid"))

    def _server_metadata(self, request: kmock.Request) -> Callable[[], dict[str, Any]] | None:
        """As the API server: uid, resourceVersion and generation, a patch's preconditions (409); returns the stamp."""
        data = request.data if isinstance(request.data, dict) else None
        if data is None or request.action not in (enums.action.CREATE, enums.action.UPDATE):
            return None
        name = request.name or (data.get("metadata") or {}).get("name")
        key = (request.resource, request.namespace or (data.get("metadata") or {}).get("namespace"), name)
        self.resource_version += 1
        version = str(self.resource_version)
        if request.action == enums.action.CREATE:
            uid = (data.get("metadata") or {}).get("uid") or str(uuid.uuid4())  # _check_identity's, when it ran
            stamp = {"uid": uid, "resourceVersion": version, "generation": 1}
            return functools.partial(self._stamp, key, stamp)
        if key not in self._objects or self._objects[key].deleted:
            return None
        now, sent = dict(self._objects[key].get("metadata", {})), data.get("metadata") or {}
        if sent.get("uid"):
            _require_uid(sent["uid"], now.get("uid"))
        if sent.get("resourceVersion") and sent["resourceVersion"] != now.get("resourceVersion"):
            raise kmock.KubernetesError(
                status=409,
                reason="Conflict",
                message="the object has been modified; please apply your changes to the latest version and try again",
            )
        stamp = {"uid": now.get("uid"), "resourceVersion": version}
        if request.subresource != "status" and "spec" in data:
            stamp["generation"] = int(now.get("generation") or 0) + 1
        return functools.partial(self._stamp, key, stamp)

    def _stamp(self, key: Any, stamp: dict[str, Any]) -> dict[str, Any]:
        self._objects[key].patch({"metadata": stamp})
        return json.loads(json.dumps(self._objects[key].raw))

    def _review_access(self, request: kmock.Request):
        """Answers a SelfSubjectAccessReview (never stored, as the API server does) from :attr:`denied`."""
        import aiohttp.web

        if request.action != enums.action.CREATE:
            raise kmock.KubernetesError(status=405, reason="MethodNotAllowed", message="access reviews are create-only")
        attributes = dict((request.data.get("spec") or {}).get("resourceAttributes") or {})
        resource = attributes.get("resource", "")
        if attributes.get("subresource"):
            resource += f"/{attributes['subresource']}"
        allowed = (attributes.get("group", ""), resource, attributes.get("verb", "")) not in self.denied
        review = {**request.data, "status": {"allowed": allowed, **({} if allowed else {"reason": "scripted deny"})}}
        return aiohttp.web.json_response(review, status=201)

    async def _serve_list(self, request: kmock.Request):
        result = await super()._serve_list(request)
        result["items"] = [item for item in result["items"] if _matches(item, request.params)]
        return result

    async def _serve_watch(self, request: kmock.Request):
        for index, (plural, script) in enumerate(self.scripted_watches):
            if request.resource is not None and request.resource.plural == plural:
                del self.scripted_watches[index]
                async for item in script(request):
                    yield item
                return
        timeout = float(request.params.get("timeoutSeconds", "0") or 0)
        deadline = time.monotonic() + timeout if timeout else None
        stream = super()._serve_watch(request).__aiter__()
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return
            try:
                item = await asyncio.wait_for(stream.__anext__(), remaining)
            except (StopAsyncIteration, asyncio.TimeoutError):
                return
            if isinstance(item, dict) and not _matches(item.get("object") or {}, request.params):
                continue
            yield item

    async def _serve_log(self, request: kmock.Request):
        if request.method != "GET":
            raise kmock.KubernetesError(status=405, reason="MethodNotAllowed", message="logs are read-only")
        container = request.params.get("container", "")
        previous = request.params.get("previous", "").lower() == "true"
        key = (request.namespace, request.name, container, previous)
        text = self.pod_logs.get(key)
        if text is None:
            text = self.pod_logs.get((request.namespace, request.name, "", previous))
        if text is None:
            raise kmock.KubernetesError(
                status=400, reason="BadRequest", message=f'container "{container}" in pod "{request.name}" has no logs'
            )
        tail = request.params.get("tailLines")
        lines = text.splitlines()
        if tail:
            lines = lines[-int(tail) :]
        return ("\n".join(lines) + ("\n" if lines else "")).encode()


def _require_uid(expected: str, actual: str | None) -> None:
    """A uid precondition as the API server checks it: ``409 Conflict`` (nothing changed) when the uids differ."""
    if actual != expected:
        message = f"Precondition failed: UID in precondition: {expected}, UID in object meta: {actual}"
        raise kmock.KubernetesError(status=409, reason="Conflict", message=message)


def _sent_body(request: kmock.Request) -> Any:
    """The body as the client sent it (before the emulator added what the server sets, e.g. the uid)."""
    try:
        return json.loads(request.body) if request.body else request.data
    except ValueError:
        return request.data


@dataclasses.dataclass(frozen=True)
class SeenRequest:
    """One request the code under test sent."""

    method: str
    path: str
    params: dict[str, str]
    action: str
    group: str | None
    plural: str | None
    namespace: str | None
    name: str | None
    subresource: str | None
    body: Any

    @property
    def verb(self) -> str:
        """The RBAC verb this request needs (``get``, ``list``, ``watch``, ``create``, ``patch``, ``delete``)."""
        return RBAC_VERBS.get(self.action, self.method.lower())

    @property
    def rbac_resource(self) -> str:
        """The RBAC resource, with the subresource when there is one (``pods/log``)."""
        return f"{self.plural}/{self.subresource}" if self.subresource else str(self.plural)

    def __str__(self) -> str:
        query = "&".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.method} {self.path}{'?' + query if query else ''}"


class KubeApi:
    """A running emulator plus the clients and helpers a test needs (see the module docstring)."""

    def __init__(self, emulator: KubeEmulator, url: str, loop: asyncio.AbstractEventLoop) -> None:
        from kubernetes import client

        self.emulator = emulator
        self.url = url.rstrip("/")
        self.loop = loop
        self.api_client = client.ApiClient(self._configuration())
        self._operator = client.ApiClient(self._configuration())
        self._operator.user_agent = HARNESS_USER_AGENT
        self.custom = client.CustomObjectsApi(self._operator)
        self.core = client.CoreV1Api(self._operator)

    @property
    def generation(self) -> str:
        """The TrainJob API generation served (:data:`~.kube_schema.GENERATIONS`)."""
        return self.emulator.generation

    def openapi_v3(self, status: int = 0) -> None:
        """Makes OpenAPI v3 discovery answer ``status`` (e.g. 403, 404) instead of its documents (0: serve them)."""
        self.call(lambda: setattr(self.emulator, "openapi_status", status))

    def behave(self, **attributes: Any) -> None:
        """Sets emulator behaviours (attributes of :class:`KubeEmulator`, e.g. ``create_delays``)."""
        for name in attributes:
            assert hasattr(self.emulator, name), name
        self.call(lambda: [setattr(self.emulator, name, value) for name, value in attributes.items()])

    def _configuration(self):
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.url
        return configuration

    def close(self) -> None:
        """Closes the clients' connection pools."""
        self.api_client.close()
        self._operator.close()

    # -- what the code under test did ---------------------------------------------------------------------------------
    @property
    def requests(self) -> list[SeenRequest]:
        """The requests of the code under test, oldest first (the harness's own are left out)."""
        seen = []
        for request in list(self.emulator):
            if request.headers.get("User-Agent") == HARNESS_USER_AGENT:
                continue
            resource = request.resource
            seen.append(
                SeenRequest(
                    method=str(request.method.value),
                    path=request.url.path,
                    params=dict(request.params),
                    action=request.action.value if request.action else "",
                    group=resource.group if resource else None,
                    plural=resource.plural if resource else None,
                    namespace=request.namespace,
                    name=request.name,
                    subresource=request.subresource,
                    body=_sent_body(request),
                )
            )
        return seen

    def requests_summary(self) -> list[str]:
        """``"VERB resource[/sub] name"`` lines of :attr:`requests`, for readable assertions and failure messages."""
        return [f"{r.verb} {r.rbac_resource}{' ' + r.name if r.name else ''}" for r in self.requests]

    def objects(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """The live objects of a resource plural (optionally in one namespace), as plain dicts."""

        def collect() -> list[dict[str, Any]]:
            return [
                json.loads(json.dumps(obj.raw))
                for (resource, ns, _), obj in list(self.emulator.objects.items())
                if resource.plural == plural and not obj.deleted and (namespace is None or ns == namespace)
            ]

        return self.call(collect)

    def call(self, func: Callable[[], Any]) -> Any:
        """Runs ``func`` in the emulator's loop thread (safe against concurrent requests) and returns its result."""

        async def run() -> Any:
            return func()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=10)

    # -- acting as the cluster ----------------------------------------------------------------------------------------
    def create_runtime(self, name: str, kind: str = "ClusterTrainingRuntime", namespace: str = "", jobs=("node",)):
        """Creates a (Cluster)TrainingRuntime whose template has the given replicated jobs (one container each)."""
        body = {
            "apiVersion": TRAINER,
            "kind": kind,
            "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
            "spec": {
                "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": job,
                                "template": {"spec": {"template": {"spec": {"containers": [{"name": job}]}}}},
                            }
                            for job in jobs
                        ]
                    }
                },
            },
        }
        group, version = TRAINER.split("/")
        if kind == "ClusterTrainingRuntime":
            return self.custom.create_cluster_custom_object(group, version, "clustertrainingruntimes", body)
        return self.custom.create_namespaced_custom_object(group, version, namespace, "trainingruntimes", body)

    def create_rhoai_runtime(self, release: str) -> dict[str, Any]:
        """Creates the ``training-hub`` ClusterTrainingRuntime a RHOAI release ships (``odh-3.3``, ``odh-3.5.0``)."""
        import yaml

        body = yaml.safe_load((CRDS / release / "training_hub.yaml").read_text())
        group, version = TRAINER.split("/")
        return self.custom.create_cluster_custom_object(group, version, "clustertrainingruntimes", body)

    def _create(self, group_version: str, plural: str, manifest: dict[str, Any]) -> dict[str, Any]:
        group, version = group_version.split("/")
        namespace = manifest["metadata"]["namespace"]
        return self.custom.create_namespaced_custom_object(group, version, namespace, plural, manifest)

    def _set_status(self, group_version: str, plural: str, namespace: str, name: str, status: dict[str, Any]):
        group, version = group_version.split("/")
        return self.custom.patch_namespaced_custom_object_status(
            group, version, namespace, plural, name, {"status": status}
        )

    def create_trainjob(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Creates a TrainJob as someone else would (e.g. a previous attempt of the same task)."""
        return self._create(TRAINER, "trainjobs", manifest)

    def set_trainjob_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Merge-patches a TrainJob's ``status`` (as the Trainer controller would)."""
        return self._set_status(TRAINER, "trainjobs", namespace, name, status)

    def create_pytorchjob(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Creates a PyTorchJob as someone else would."""
        return self._create(TRAINING_OPERATOR, "pytorchjobs", manifest)

    def set_pytorchjob_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Merge-patches a PyTorchJob's ``status`` (as the Training Operator would)."""
        return self._set_status(TRAINING_OPERATOR, "pytorchjobs", namespace, name, status)

    def serve(self, resource: str) -> None:
        """Makes the API serve a resource (``group/version/plural``), as installing its CRD would."""
        self.call(lambda: self.emulator.resources.setdefault(resource, {}))

    def unserve(self, resource: str) -> None:
        """Stops serving a resource (``group/version/plural``), as removing its CRD would (discovery drops it)."""

        def remove() -> None:
            if resource in self.emulator.resources:
                del self.emulator.resources[resource]

        self.call(remove)

    def track_metadata(self, plural: str) -> None:
        """Gives ``plural``'s objects the server's uid, resourceVersion and generation, with a patch's preconditions."""
        self.call(lambda: self.emulator.server_metadata.add(plural))

    def deny(self, group: str, resource: str, verb: str) -> None:
        """Makes SelfSubjectAccessReviews answer ``allowed: false`` for ``(group, resource[/sub], verb)``."""
        self.call(lambda: self.emulator.denied.add((group, resource, verb)))

    def create_storage_class(self, name: str, provisioner: str, default: bool = False) -> dict[str, Any]:
        """Creates a StorageClass (``default``: annotated as the cluster's default class)."""
        from kubernetes import client

        annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
        body = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name, "annotations": annotations},
            "provisioner": provisioner,
        }
        return client.StorageV1Api(self._operator).create_storage_class(body)

    def storage_api(self):
        """A ``StorageV1Api`` acting as the cluster (not counted in :attr:`requests`)."""
        from kubernetes import client

        return client.StorageV1Api(self._operator)

    def put_node(self, node: dict[str, Any]) -> None:
        """Creates a node (see :func:`make_node`)."""
        self.core.create_node(node)

    def create_quota(self, namespace: str, name: str, hard: dict[str, str], used: dict[str, str]) -> None:
        """Creates a ResourceQuota with its ``status`` (``hard`` and ``used``) as the quota controller keeps it."""
        body = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"hard": hard},
            "status": {"hard": hard, "used": used},
        }
        self.core.create_namespaced_resource_quota(namespace, body)

    def create_secret(self, namespace: str, name: str, data: dict[str, str]) -> None:
        """Creates an Opaque secret; ``data`` values are plain text (base64-encoded here, as the API stores them)."""
        import base64

        encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}}
        self.core.create_namespaced_secret(namespace, {**body, "type": "Opaque", "data": encoded})

    def put_pod(self, pod: dict[str, Any]) -> None:
        """Creates a pod, or replaces its status when it exists (as the kubelet would)."""
        from kubernetes.client import ApiException

        namespace = pod["metadata"]["namespace"]
        try:
            self.core.create_namespaced_pod(namespace, pod)
        except ApiException as error:
            if error.status != 409:
                raise
            self.core.patch_namespaced_pod_status(pod["metadata"]["name"], namespace, {"status": pod["status"]})

    def add_event(self, namespace: str, kind: str, name: str, reason: str, message: str, type_: str = "Warning"):
        """Records an event about an object (as a controller or the kubelet would)."""
        count = len(self.objects("events", namespace))
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{count:06d}", "namespace": namespace},
            "involvedObject": {"kind": kind, "name": name, "namespace": namespace},
            "reason": reason,
            "message": message,
            "type": type_,
        }
        self.core.create_namespaced_event(namespace, event)

    def set_pod_log(self, namespace: str, pod: str, text: str, container: str = "", previous: bool = False) -> None:
        """Sets what ``GET pods/<pod>/log`` returns (``container=""``: any container)."""

        def store() -> None:
            self.emulator.pod_logs[(namespace, pod, container, previous)] = text

        self.call(store)

    def fail(
        self,
        action: str,
        plural: str,
        status: int = 500,
        times: int = 1,
        name: str | None = None,
        persist: bool = False,
    ) -> None:
        """Answers the next ``times`` ``action`` requests on ``plural`` with ``status`` (``persist``: write anyway)."""
        reason = {409: "AlreadyExists", 410: "Gone", 422: "Invalid", 429: "TooManyRequests"}.get(
            status, "InternalError"
        )
        error = kmock.KubernetesError(status=status, reason=reason, message=f"scripted {status} for {action} {plural}")
        if not persist:
            rule = {"action": action.upper(), "plural": plural, "name": name, "left": times, "error": error}
            self.call(lambda: self.emulator.rejections.append(rule))
            return
        criteria: list[Any] = [enums.action(action.upper()), kmock.resource(plural)]
        if name is not None:
            criteria.append(kmock.name(name))

        def install() -> None:
            seen = len(self.emulator[tuple(criteria)])
            view = self.emulator[tuple(criteria)][seen : seen + times]
            view << error

        self.call(install)

    def expire_next_watch(self, plural: str) -> None:
        """Makes the next watch on ``plural`` answer with an in-stream ``410 Gone`` error event."""
        gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}}

        async def expired(request: kmock.Request):
            yield b""
            yield gone

        self.call(lambda: self.emulator.scripted_watches.append((plural, expired)))

    def end_watch_after(self, plural: str, events: int) -> None:
        """Makes the next watch on ``plural`` send the object's current state ``events`` times, then drop."""

        def install() -> None:
            async def dropped(request: kmock.Request):
                objects = [
                    obj.raw
                    for (resource, ns, _), obj in list(self.emulator.objects.items())
                    if resource.plural == plural and ns == request.namespace and not obj.deleted
                ]
                yield b""
                for _ in range(events):
                    for obj in objects:
                        if _matches(obj, request.params):
                            yield {"type": "MODIFIED", "object": obj}

            self.emulator.scripted_watches.append((plural, dropped))

        self.call(install)

    # -- test plumbing ------------------------------------------------------------------------------------------------
    @staticmethod
    def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.005) -> Any:
        """Polls ``predicate`` until it returns a truthy value (returned) or fails the test after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            result = predicate()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout}s: {predicate}")
            time.sleep(interval)

    @contextlib.contextmanager
    def in_background(self, script: Callable[[], None]) -> Iterator[None]:
        """Runs ``script`` (e.g. an operator scenario) on a thread; its exception fails the test."""
        errors: list[BaseException] = []

        def run() -> None:
            try:
                script()
            except BaseException as error:  # noqa: BLE001 - re-raised in the test thread
                errors.append(error)

        thread = threading.Thread(target=run, name="kube-operator-script", daemon=True)
        thread.start()
        try:
            yield
        except BaseException as error:
            thread.join(timeout=30)
            if errors:
                error.add_note(f"the background script failed too: {errors[0]!r}")
            raise
        thread.join(timeout=30)
        if errors:
            raise errors[0]


def make_pod(
    namespace: str,
    trainjob: str,
    index: int = 0,
    *,
    phase: str = "Running",
    container: str = "node",
    waiting: tuple[str, str] | None = None,
    terminated: tuple[str, int, str] | None = None,
    last_terminated: tuple[str, int] | None = None,
    restarts: int = 0,
    unschedulable: str = "",
) -> dict[str, Any]:
    """Pod ``index`` of a TrainJob's ``node`` replicated job, labelled as JobSet labels it, in the given state.

    ``waiting`` is ``(reason, message)``, ``terminated`` ``(reason, exitCode, message)``, ``last_terminated``
    ``(reason, exitCode)``; ``unschedulable`` is the scheduler's message.
    """
    state: dict[str, Any] = {"running": {"startedAt": "2026-11-23T10:00:00Z"}}
    if waiting:
        state = {"waiting": {"reason": waiting[0], "message": waiting[1]}}
    if terminated:
        state = {"terminated": {"reason": terminated[0], "exitCode": terminated[1], "message": terminated[2]}}
    status: dict[str, Any] = {"phase": phase, "conditions": []}
    if unschedulable:
        status["conditions"].append(
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable}
        )
    else:
        container_status: dict[str, Any] = {
            "name": container,
            "image": "quay.io/example/trainer:1",
            "imageID": "",
            "ready": phase == "Running" and not waiting,
            "restartCount": restarts,
            "state": state,
        }
        if last_terminated:
            container_status["lastState"] = {
                "terminated": {"reason": last_terminated[0], "exitCode": last_terminated[1]}
            }
        status["containerStatuses"] = [container_status]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{trainjob}-node-0-{index}-abcde",
            "namespace": namespace,
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": trainjob,
                "jobset.sigs.k8s.io/replicatedjob-name": "node",
                "trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
            },
        },
        "spec": {"containers": [{"name": container, "image": "quay.io/example/trainer:1"}]},
        "status": status,
    }


def make_node(
    name: str,
    gpus: int = 0,
    *,
    gpu_resource: str = "nvidia.com/gpu",
    labels: dict[str, str] | None = None,
    taints: tuple[dict[str, str], ...] = (),
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A node with ``gpus`` allocatable GPUs of ``gpu_resource`` (0: a CPU node), labelled as GPU discovery does."""
    resources = {"cpu": "16", "memory": "64Gi", **({gpu_resource: str(gpus)} if gpus else {})}
    node_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    if gpus and gpu_resource == "nvidia.com/gpu":
        node_labels["nvidia.com/gpu.present"] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": {"taints": list(taints), **({"unschedulable": True} if unschedulable else {})},
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def make_pytorchjob_pod(namespace: str, pytorchjob: str, index: int = 0, **state: Any) -> dict[str, Any]:
    """The ``Master`` pod (index 0) or ``Worker`` ``index - 1`` of a PyTorchJob, in the state :func:`make_pod` takes."""
    pod = make_pod(namespace, pytorchjob, index, container="pytorch", **state)
    replica, replica_index = ("master", 0) if index == 0 else ("worker", index - 1)
    pod["metadata"]["name"] = f"{pytorchjob}-{replica}-{replica_index}"
    pod["metadata"]["labels"] = {
        "training.kubeflow.org/job-name": pytorchjob,
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-type": replica,
        "training.kubeflow.org/replica-index": str(replica_index),
        **({"training.kubeflow.org/job-role": "master"} if index == 0 else {}),
    }
    return pod


def condition(type_: str, reason: str = "", message: str = "", status: str = "True") -> dict[str, str]:
    """A TrainJob status condition (``Complete``, ``Failed``, ``Suspended``)."""
    return {
        "type": type_,
        "status": status,
        "reason": reason or type_,
        "message": message,
        "lastTransitionTime": "2026-11-23T10:00:00Z",
    }


@pytest.fixture
def kube_api(request: pytest.FixtureRequest) -> Iterator[KubeApi]:
    """A fresh emulator serving Trainer 2.3's TrainJob API, or the generation an indirect parametrization names."""
    with running_kube_api(getattr(request, "param", UPSTREAM_2_3)) as api:
        yield api


@contextlib.contextmanager
def running_kube_api(generation: str = UPSTREAM_2_3) -> Iterator[KubeApi]:
    """Starts an emulator serving ``generation`` (:data:`~.kube_schema.GENERATIONS`) on 127.0.0.1 for the block."""
    if generation not in GENERATIONS:
        raise ValueError(f"generation={generation!r}: must be one of {sorted(GENERATIONS)}")
    for plural in ("trainjobs", *kube_schema.OTHER_CRDS):
        # The CRDs are loaded before the first request, as an API server has them: parsed inside the first create,
        # they cost it ~0.1 s (several times that under CPU load), past the 0.2 s read timeouts of the outage tests.
        kube_schema.schema_for(plural, generation)
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def serve() -> None:
        stop = asyncio.Event()
        async with KubeEmulator() as emulator, kmock.Server(emulator) as server:
            emulator.generation = generation
            for resource in DECLARED_RESOURCES:
                emulator.resources[resource] = {}
            state.update(emulator=emulator, url=str(server.url), loop=asyncio.get_running_loop(), stop=stop)
            ready.set()
            await stop.wait()

    def run() -> None:
        try:
            asyncio.run(serve())
        except BaseException as error:  # noqa: BLE001 - reported to the fixture
            state["error"] = error
            ready.set()

    thread = threading.Thread(target=run, name="kube-emulator", daemon=True)
    thread.start()
    ready.wait(timeout=30)
    if "error" in state or "emulator" not in state:
        raise RuntimeError(f"the Kubernetes emulator did not start: {state.get('error')!r}")
    api = KubeApi(state["emulator"], state["url"], state["loop"])
    try:
        yield api
    finally:
        api.close()
        state["loop"].call_soon_threadsafe(state["stop"].set)
        thread.join(timeout=10)
