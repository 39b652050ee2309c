"""A stateful Kubeflow Model Registry REST stub on 127.0.0.1 (``/api/model_registry/v1`` and ``/v1alpha3``).

Every request and every answer is validated against the vendored ``tests/specs/openapi/model-registry.yaml`` (a bad
request gets a 400 naming the rule; a bad answer fails the test). It implements the operations the client uses.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import re
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from tests.harness.http_server import LoopbackServer, QuietHandler
from tests.harness.tls import write_self_signed_certificate

SPEC_PATH = Path(__file__).resolve().parents[1] / "specs" / "openapi" / "model-registry.yaml"  # tests/specs/SOURCE.md
API_ROOT = "/api/model_registry/"
SPEC_API_VERSION = "v1alpha3"
API_VERSIONS = ("v1", "v1alpha3")
_SPEC_URI = "urn:model-registry-openapi"


@dataclasses.dataclass(frozen=True)
class Operation:
    """One operation of the spec: ``GET /model_versions/{modelversionId}`` and its schemas."""

    method: str
    template: str
    pattern: re.Pattern
    operation_id: str
    parameters: tuple[dict, ...]
    body_schema_ref: str | None
    response_schema_refs: dict[str, str]


@functools.lru_cache(maxsize=1)
def load_spec() -> dict:
    """The Model Registry OpenAPI document (parsed once)."""
    return yaml.safe_load(SPEC_PATH.read_text())


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str):
    """An OpenAPI 3.0 validator (``discriminator`` and ``nullable`` included) with the spec's ``$ref`` s resolvable."""
    from openapi_schema_validator import OAS30Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT4

    schema = json.loads(schema_json)
    schema = {"$ref": _SPEC_URI + schema["$ref"]} if set(schema) == {"$ref"} else schema
    spec = Resource.from_contents(load_spec(), default_specification=DRAFT4)
    return OAS30Validator(schema, registry=Registry().with_resource(_SPEC_URI, spec))


def validation_errors(instance: Any, schema: dict) -> list[str]:
    """One ``"<json path>: <message>"`` line per violation of a spec schema (``{"$ref": ...}`` or inline)."""
    errors = sorted(_validator(json.dumps(schema, sort_keys=True)).iter_errors(instance), key=lambda e: e.json_path)
    return list(dict.fromkeys(f"{e.json_path}: {e.message}" for e in errors))


def schema_ref(name: str) -> dict:
    """``{"$ref": ...}`` to the spec's ``components/schemas/<name>``."""
    return {"$ref": f"#/components/schemas/{name}"}


def _resolve(node: dict) -> dict:
    spec = load_spec()
    while "$ref" in node:
        target = spec
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


@functools.lru_cache(maxsize=1)
def operations() -> tuple[Operation, ...]:
    """Every operation of the spec, with paths relative to the API version prefix."""
    spec_prefix = API_ROOT + SPEC_API_VERSION
    found = []
    for path, item in load_spec()["paths"].items():
        template = path[len(spec_prefix) :]
        pattern = re.compile("^" + re.sub(r"\\{[^/]+?\\}", "([^/]+)", re.escape(template)) + "$")
        shared_parameters = [_resolve(p) for p in item.get("parameters", [])]
        for method in ("get", "post", "patch", "put", "delete"):
            if method not in item:
                continue
            op = item[method]
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            answers = {
                status: schema["$ref"]
                for status, response in op.get("responses", {}).items()
                if (schema := _resolve(response).get("content", {}).get("application/json", {}).get("schema"))
            }
            parameters = tuple(shared_parameters + [_resolve(p) for p in op.get("parameters", [])])
            body_ref = body["$ref"] if body else None
            found.append(Operation(method.upper(), template, pattern, op["operationId"], parameters, body_ref, answers))
    return tuple(found)


def find_operation(method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
    """The spec operation for ``method path`` (path relative to the version prefix) and its path parameters."""
    for op in operations():
        match = op.pattern.match(path)
        if match and op.method == method:
            names = re.findall(r"{([^/]+?)}", op.template)
            return op, dict(zip(names, match.groups(), strict=True))
    return None


@dataclasses.dataclass
class RecordedRequest:
    """One request the stub received (whatever it answered)."""

    method: str
    path: str
    api_version: str | None
    resource: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    status: int = 0


@dataclasses.dataclass
class _Fault:
    remaining: int
    status: int | None  # None: drop the connection
    method: str | None
    path_contains: str | None
    after: bool = False  # serve the request (it takes effect), then answer with the fault

    def matches(self, method: str, path: str) -> bool:
        return self.method in (None, method) and (self.path_contains is None or self.path_contains in path)


class StubHTTPError(Exception):
    """An error answer of the stub (status + message in the spec's ``Error`` shape)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def _read(store: str, id_param: str, kind: str):
    """The handler of a ``GET /<kind>s/{id}`` operation on the stub's ``store``."""

    def op(stub: RegistryStub, path_params: dict[str, str], **_: Any) -> tuple[int, dict]:
        return 200, copy.deepcopy(stub._get(getattr(stub, store), path_params[id_param], kind))

    return op


def _update(store: str, id_param: str, kind: str):
    """The handler of a ``PATCH /<kind>s/{id}`` operation on the stub's ``store``."""

    def op(stub: RegistryStub, path_params: dict[str, str], body: dict, **_: Any) -> tuple[int, dict]:
        obj = stub._get(getattr(stub, store), path_params[id_param], kind)
        obj.update(body)
        return 200, copy.deepcopy(stub._stamp(obj, created=False))

    return op


class RegistryStub:
    """State, scripting and recording of the stub server. Use through the ``registry_stub`` fixture."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.registered_models: dict[str, dict] = {}
        self.model_versions: dict[str, dict] = {}
        self.artifacts: dict[str, dict] = {}
        self.version_artifacts: dict[str, list[str]] = {}
        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []
        self.api_versions: tuple[str, ...] = API_VERSIONS
        self.token: str | None = None
        self._faults: list[_Fault] = []
        self._hooks: list[tuple[Any, _Fault]] = []
        self._next_ids = {"context": 0, "artifact": 0}
        self.server: LoopbackServer | None = None
        self.scheme = "http"

    @property
    def port(self) -> int:
        """Port the stub listens on."""
        assert self.server is not None
        return self.server.server_address[1]

    @property
    def address(self) -> str:
        """``http://127.0.0.1`` (or ``https://localhost`` with TLS), without the port."""
        return f"{self.scheme}://{'127.0.0.1' if self.scheme == 'http' else 'localhost'}"

    @property
    def url(self) -> str:
        """Base URL including the port."""
        return f"{self.address}:{self.port}"

    def fail_next(
        self, times: int, status: int = 503, *, method=None, path_contains=None, after_serving: bool = False
    ) -> None:
        """Answers the next ``times`` matching requests with ``status``; ``after_serving``: serve it first (a lost
        answer)."""
        with self.lock:
            self._faults.append(_Fault(times, status, method, path_contains, after_serving))

    def before_next(self, action: Any, *, method: str | None = None, path_contains: str | None = None) -> None:
        """Runs ``action(stub)`` once, just before serving the next matching request (a race, made deterministic)."""
        with self.lock:
            self._hooks.append((action, _Fault(1, None, method, path_contains)))

    def drop_next(self, times: int, *, method: str | None = None, path_contains: str | None = None) -> None:
        """Closes the connection of the next ``times`` matching requests without answering (a connection error)."""
        with self.lock:
            self._faults.append(_Fault(times, None, method, path_contains))

    def require_token(self, token: str | None) -> None:
        """Answers 401 to every request lacking ``Authorization: Bearer <token>`` (``None``: no auth)."""
        self.token = token

    def serve_api_versions(self, *versions: str) -> None:
        """Serves only these API versions (e.g. ``"v1alpha3"`` for a pre-0.3.12 server); others get 404."""
        unknown = set(versions) - set(API_VERSIONS)
        if unknown:
            raise ValueError(f"unknown API versions {sorted(unknown)}; known: {API_VERSIONS}")
        self.api_versions = tuple(versions)

    def requests_to(self, method: str, resource_prefix: str) -> list[RecordedRequest]:
        """Recorded requests of ``method`` whose version-relative path starts with ``resource_prefix``."""
        return [r for r in self.requests if r.method == method and r.resource.startswith(resource_prefix)]

    def versions_of(self, model_name: str) -> list[dict]:
        """Stored versions of the registered model named ``model_name``."""
        model_ids = [m["id"] for m in self.registered_models.values() if m["name"] == model_name]
        return [v for v in self.model_versions.values() if v["registeredModelId"] in model_ids]

    def artifacts_of(self, version_id: str) -> list[dict]:
        """Stored artifacts linked to a model version."""
        return [self.artifacts[a] for a in self.version_artifacts.get(version_id, [])]

    def take_fault(self, method: str, path: str) -> _Fault | None:
        """The scripted fault that applies to this request, if any (consuming one of its repetitions)."""
        with self.lock:
            for fault in self._faults:
                if fault.remaining > 0 and fault.matches(method, path):
                    fault.remaining -= 1
                    return fault
        return None

    def handle(self, method: str, resource: str, query: dict[str, str], body: Any) -> tuple[int, Any, Operation]:
        """Validates and serves one request; returns (status, JSON body, operation)."""
        found = find_operation(method, resource)
        if found is None:
            raise StubHTTPError(404, f"no operation {method} {resource} in {SPEC_PATH.name}")
        op, path_params = found
        self._validate_parameters(op, path_params, query)
        if op.body_schema_ref:
            if problems := validation_errors(body, {"$ref": op.body_schema_ref}):
                schema_name = op.body_schema_ref.rsplit("/", 1)[-1]
                raise StubHTTPError(400, f"{op.operation_id}: body does not match {schema_name}: {'; '.join(problems)}")
        handler = getattr(self, f"_op_{op.operation_id}", None)
        if handler is None:
            raise StubHTTPError(501, f"the stub does not implement {op.operation_id}")
        with self.lock:
            hooks = [hook for hook in self._hooks if hook[1].remaining and hook[1].matches(method, resource)]
            for action, match in hooks[:1]:
                match.remaining = 0
                action(self)
            status, payload = handler(path_params=path_params, query=query, body=body)
        return status, payload, op

    def check_response(self, op: Operation, status: int, payload: Any) -> list[str]:
        """Validates a response of the stub itself against the spec (a stub bug must not pass silently)."""
        ref = op.response_schema_refs.get(str(status))
        if ref is None:
            return [f"{op.operation_id}: status {status} is not declared in the spec"]
        return validation_errors(payload, {"$ref": ref})

    @staticmethod
    def _validate_parameters(op: Operation, path_params: dict[str, str], query: dict[str, str]) -> None:
        for param in op.parameters:
            source = {"path": path_params, "query": query}.get(param["in"], {})
            name, where = param["name"], f"{op.operation_id}: {param['in']} parameter"
            if name not in source:
                if param.get("required") and param["in"] in ("path", "query"):
                    raise StubHTTPError(400, f"{where} {name!r} is required")
            elif problems := validation_errors(source[name], param["schema"]):
                raise StubHTTPError(400, f"{where} {name}={source[name]!r}: {'; '.join(problems)}")

    def _new_id(self, kind: str) -> str:
        self._next_ids[kind] += 1
        return str(self._next_ids[kind])

    @staticmethod
    def _stamp(obj: dict, *, created: bool) -> dict:
        now = str(int(time.time() * 1000))
        if created:
            obj["createTimeSinceEpoch"] = now
        obj["lastUpdateTimeSinceEpoch"] = now
        obj.setdefault("customProperties", {})
        return obj

    @staticmethod
    def _page(items: list[dict], query: dict[str, str]) -> dict:
        order = query.get("orderBy", "ID")
        key = {"CREATE_TIME": "createTimeSinceEpoch", "LAST_UPDATE_TIME": "lastUpdateTimeSinceEpoch"}.get(order, "id")
        items = sorted(
            items, key=lambda o: (int(o.get(key, "0")), int(o["id"])), reverse=query.get("sortOrder") == "DESC"
        )
        size, start = int(query.get("pageSize", "100")), int(query.get("nextPageToken") or "0")
        page = items[start : start + size]
        token = str(start + size) if start + size < len(items) else ""
        return {"items": copy.deepcopy(page), "nextPageToken": token, "pageSize": size, "size": len(page)}

    @staticmethod
    def _find_one(items: list[dict], query: dict[str, str], kind: str, parent_key: str = "") -> dict:
        for obj in items:
            if obj.get("name") == query.get("name") and query.get("parentResourceId") in (None, obj.get(parent_key)):
                return copy.deepcopy(obj)
        raise StubHTTPError(404, f"no {kind} found for {query}")

    def _get(self, store: dict[str, dict], object_id: str, kind: str) -> dict:
        if object_id not in store:
            raise StubHTTPError(404, f"no {kind} with id {object_id}")
        return store[object_id]

    def _create(self, store: dict[str, dict], body: dict, **defaults: str) -> dict:
        kind = "artifact" if store is self.artifacts else "context"
        obj = self._stamp({**defaults, **body, "id": self._new_id(kind)}, created=True)
        store[obj["id"]] = obj
        return obj

    def _op_getRegisteredModels(self, query, **_):
        return 200, self._page(list(self.registered_models.values()), query)

    def _op_findRegisteredModel(self, query, **_):
        return 200, self._find_one(list(self.registered_models.values()), query, "registered model")

    _op_getRegisteredModel = _read("registered_models", "registeredmodelId", "registered model")
    _op_updateRegisteredModel = _update("registered_models", "registeredmodelId", "registered model")

    def _op_createRegisteredModel(self, body, **_):
        if any(m["name"] == body["name"] for m in self.registered_models.values()):
            raise StubHTTPError(409, f"registered model {body['name']!r} already exists")
        return 201, copy.deepcopy(self._create(self.registered_models, body, state="LIVE"))

    def _op_getRegisteredModelVersions(self, path_params, query, **_):
        model_id = path_params["registeredmodelId"]
        self._get(self.registered_models, model_id, "registered model")
        versions = [v for v in self.model_versions.values() if v["registeredModelId"] == model_id]
        return 200, self._page(versions, query)

    def _op_findModelVersion(self, query, **_):
        return 200, self._find_one(list(self.model_versions.values()), query, "model version", "registeredModelId")

    _op_getModelVersion = _read("model_versions", "modelversionId", "model version")
    _op_updateModelVersion = _update("model_versions", "modelversionId", "model version")

    def _op_createModelVersion(self, body, **_):
        parent = body["registeredModelId"]
        self._get(self.registered_models, parent, "registered model")
        if any(v["name"] == body["name"] and v["registeredModelId"] == parent for v in self.model_versions.values()):
            raise StubHTTPError(409, f"model version {body['name']!r} already exists in registered model {parent}")
        version = self._create(self.model_versions, body, state="LIVE")
        self.version_artifacts[version["id"]] = []
        return 201, copy.deepcopy(version)

    def _op_upsertModelVersionArtifact(self, path_params, body, **_):
        """Creates the artifact and links it to the version (the client upserts only new artifacts)."""
        version_id = path_params["modelversionId"]
        self._get(self.model_versions, version_id, "model version")
        artifact = self._create(self.artifacts, body, artifactType="model-artifact", state="UNKNOWN")
        self.version_artifacts[version_id].append(artifact["id"])
        return 201, copy.deepcopy(artifact)

    _op_getModelArtifact = _read("artifacts", "modelartifactId", "model artifact")
    _op_updateModelArtifact = _update("artifacts", "modelartifactId", "model artifact")

    def _op_findModelArtifact(self, query, **_):
        items = list(self.artifacts.values())
        if "parentResourceId" in query:
            items = self.artifacts_of(query["parentResourceId"])
        return 200, self._find_one(items, {k: v for k, v in query.items() if k != "parentResourceId"}, "artifact")

    def _op_getArtifacts(self, query, **_):
        items = list(self.artifacts.values())
        if "artifactType" in query:
            items = [a for a in items if a["artifactType"] == query["artifactType"]]
        return 200, self._page(items, query)


class _Handler(QuietHandler):
    server_version = "model-registry-stub/1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: avoid the delayed-ACK stall

    def _serve(self) -> None:
        stub: RegistryStub = self.server.stub  # type: ignore[attr-defined]
        split = urlsplit(self.path)
        api_version, resource = self._split_version(split.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        headers = {k.lower(): v for k, v in self.headers.items()}
        record = RecordedRequest(self.command, split.path, api_version, resource, query, headers, body=None)
        with stub.lock:
            stub.requests.append(record)
        try:
            record.status, payload = self._answer(stub, record)
        except StubHTTPError as exc:
            record.status, payload = exc.status, {"code": str(exc.status), "message": exc.message}
        if record.status == -1:  # a scripted drop: the connection closes unanswered
            self.close_connection = True
            self.connection.shutdown(2)
        else:
            self.reply(record.status, payload)

    def _answer(self, stub: RegistryStub, record: RecordedRequest) -> tuple[int, Any]:
        """The status and body of one request (-1: drop it), in the order a real server checks."""
        try:
            record.body = json.loads(self.body() or "null")
        except json.JSONDecodeError as exc:
            raise StubHTTPError(400, f"request body is not JSON: {exc}") from exc
        fault = stub.take_fault(record.method, record.path)
        if fault is not None and fault.status is None:
            return -1, None
        if fault is not None and not fault.after:
            raise StubHTTPError(fault.status, "scripted fault of the registry stub")
        if stub.token is not None and self.headers.get("Authorization") != f"Bearer {stub.token}":
            raise StubHTTPError(401, "Unauthorized: missing or invalid bearer token")
        if record.api_version not in stub.api_versions:
            raise StubHTTPError(404, f"404 page not found: {record.path}")
        try:
            status, payload, op = stub.handle(record.method, record.resource, record.query, record.body)
            if problems := stub.check_response(op, status, payload):
                stub.errors.append(f"{op.operation_id} answered {status} with an invalid body: {problems}")
                raise StubHTTPError(500, "stub produced an invalid response")
        except StubHTTPError as exc:
            status, payload = exc.status, {"code": str(exc.status), "message": exc.message}
        if fault is not None:  # served, but the answer is lost
            raise StubHTTPError(fault.status, "scripted fault after serving")
        return status, payload

    @staticmethod
    def _split_version(path: str) -> tuple[str | None, str]:
        if not path.startswith(API_ROOT):
            return None, path
        version, _, rest = path[len(API_ROOT) :].partition("/")
        return version, "/" + rest

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve


def start_registry_stub(tls_dir: Path | None = None) -> RegistryStub:
    """Starts a stub on a free port: plain HTTP, or TLS with a self-signed certificate written to ``tls_dir``
    (``stub.ca_bundle``); stop it with :func:`stop_registry_stub`."""
    stub = RegistryStub()
    context = None
    if tls_dir is not None:
        cert_path, key_path = write_self_signed_certificate(tls_dir, "registry")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_path, key_path)
        stub.scheme = "https"
        stub.ca_bundle = cert_path  # type: ignore[attr-defined]
    server = LoopbackServer(_Handler, "registry-stub", poll_s=0.05, tls=context)
    server.stub = stub  # type: ignore[attr-defined]
    stub.server = server
    return stub


def stop_registry_stub(stub: RegistryStub) -> None:
    """Stops the server thread and closes its socket."""
    assert stub.server is not None
    stub.server.stop()


def _serving(tls_dir: Path | None = None) -> Iterator[RegistryStub]:
    stub = start_registry_stub(tls_dir)
    yield stub
    stop_registry_stub(stub)
    assert not stub.errors, f"the registry stub produced responses that break the spec: {stub.errors}"


@pytest.fixture
def registry_stub() -> Iterator[RegistryStub]:
    """A fresh, empty registry stub over plain HTTP on 127.0.0.1; fails the test if the stub answered invalidly."""
    yield from _serving()


@pytest.fixture
def registry_stub_tls(tmp_path: Path) -> Iterator[RegistryStub]:
    """Like ``registry_stub`` but over TLS (``https://localhost``) with a self-signed certificate in ``ca_bundle``."""
    yield from _serving(tmp_path / "registry-tls")
