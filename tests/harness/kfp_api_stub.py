"""A loopback, stateful stub of the KFP v2beta1 REST API that records every request.

It serves what ``pipelines.kfp_api`` calls: healthz, pipeline upload (multipart) and upload_version, pipeline and
version lists (``display_name`` EQUALS filter), experiments list/create, runs and recurring runs create. It answers like
the KFP API server (snake_case JSON, ``google.rpc.Status`` errors, 409 on a duplicate name) and can require a bearer
token, serve HTTPS (``factory(tls=True)`` writes ``stub.ca_bundle``) or answer HTML pages only.
"""

from __future__ import annotations

import datetime
import email.parser
import email.policy
import itertools
import json
import re
import ssl
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import yaml

from tests.harness.http_server import LoopbackServer, QuietHandler
from tests.harness.tls import write_self_signed_certificate

API = "/apis/v2beta1"
EQUALS_OPERATIONS = (1, "EQUALS")
# What a dashboard or an OAuth login page answers for any path: HTTP 200 and HTML.
HTML_PAGE = "<!doctype html><html><head><title>Log in</title></head><body>Log in with OpenShift</body></html>"
# google.rpc.Code values the KFP API server puts in its error bodies.
RPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 409: 6}


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the stub received it (header names lower-cased)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)

    def multipart_files(self) -> dict[str, tuple[str, bytes]]:
        """The multipart form parts that carry a file, as ``{field: (filename, content)}``."""
        return {name: (filename, content) for name, filename, content in _multipart_parts(self) if filename}


class StubError(Exception):
    """An API error the handler turns into an HTTP status and a ``google.rpc.Status`` JSON body."""

    def __init__(self, status: int, message: str) -> None:
        """Keeps the HTTP status and the message."""
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class KfpApiStub:
    """The stub's state: what was created, every request received, and the server options."""

    required_token: str = ""
    html_pages: bool = False
    pipelines: dict[str, dict] = field(default_factory=dict)
    pipeline_versions: dict[str, dict] = field(default_factory=dict)
    experiments: dict[str, dict] = field(default_factory=dict)
    runs: dict[str, dict] = field(default_factory=dict)
    recurring_runs: dict[str, dict] = field(default_factory=dict)
    requests: list[RecordedRequest] = field(default_factory=list)
    url: str = ""
    ca_bundle: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _sequence: Any = field(default_factory=lambda: itertools.count(1), repr=False)
    _server: LoopbackServer | None = field(default=None, repr=False)

    # ----------------------------------------------------------------- lifecycle
    def start(self, tls_directory: Path | None = None) -> KfpApiStub:
        """Starts serving on 127.0.0.1 on a free port (HTTPS when ``tls_directory`` is given)."""
        context = None
        if tls_directory is not None:
            certificate, key = write_self_signed_certificate(tls_directory, "kfp-api-stub")
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(certificate, key)
            self.ca_bundle = str(certificate)
        self._server = LoopbackServer(_handler(self), "kfp-api-stub", poll_s=0.05, tls=context)
        self.url = self._server.url.replace("http://", "https://" if context else "http://")
        return self

    def stop(self) -> None:
        """Stops the server and closes its socket."""
        if self._server is not None:
            self._server.stop()
            self._server = None

    # ----------------------------------------------------------------- queries for tests
    def requests_to(self, method: str, path: str) -> list[RecordedRequest]:
        """The recorded requests with this method and exact path (query string excluded)."""
        return [r for r in self.requests if r.method == method and r.path == path]

    def versions_of(self, pipeline_id: str) -> list[dict]:
        """The versions of one pipeline, oldest first."""
        return [v for v in self.pipeline_versions.values() if v["pipeline_id"] == pipeline_id]

    # ----------------------------------------------------------------- resources
    def _now(self) -> str:
        """A creation timestamp (RFC 3339) that also orders resources created within the same second."""
        sequence = next(self._sequence)
        base = datetime.datetime(2026, 11, 23, tzinfo=datetime.timezone.utc)
        return (base + datetime.timedelta(seconds=sequence)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def add_pipeline(self, name: str, description: str, namespace: str, package: bytes) -> dict:
        """Creates a pipeline and its first version (named after the pipeline), as the KFP API server does."""
        if any(p["display_name"] == name and p["namespace"] == namespace for p in self.pipelines.values()):
            raise StubError(409, f"Failed to create a pipeline: a pipeline named {name!r} already exists")
        pipeline = {
            "pipeline_id": str(uuid.uuid4()),
            "name": name,
            "display_name": name,
            "description": description,
            "namespace": namespace,
            "created_at": self._now(),
        }
        self.pipelines[pipeline["pipeline_id"]] = pipeline
        self.add_version(pipeline["pipeline_id"], name, description, package)
        return pipeline

    def add_version(self, pipeline_id: str, name: str, description: str, package: bytes) -> dict:
        """Creates a pipeline version, keeping the parsed pipeline spec."""
        if pipeline_id not in self.pipelines:
            raise StubError(404, f"Failed to create a pipeline version: pipeline {pipeline_id!r} not found")
        if any(v["display_name"] == name for v in self.versions_of(pipeline_id)):
            raise StubError(409, f"Failed to create a pipeline version: version {name!r} already exists")
        version = {
            "pipeline_id": pipeline_id,
            "pipeline_version_id": str(uuid.uuid4()),
            "name": name,
            "display_name": name,
            "description": description,
            "created_at": self._now(),
            "pipeline_spec": _parse_package(package),
        }
        self.pipeline_versions[version["pipeline_version_id"]] = version
        return version

    def add_experiment(self, body: dict) -> dict:
        """Creates an experiment from a ``V2beta1Experiment`` body."""
        name = body.get("display_name") or ""
        if not name:
            raise StubError(400, "Failed to create an experiment: display_name is empty")
        namespace = body.get("namespace") or ""
        if any(e["display_name"] == name and e["namespace"] == namespace for e in self.experiments.values()):
            raise StubError(409, f"Failed to create an experiment: {name!r} already exists")
        experiment = {
            "experiment_id": str(uuid.uuid4()),
            "display_name": name,
            "description": body.get("description") or "",
            "namespace": namespace,
            "created_at": self._now(),
            "storage_state": "AVAILABLE",
        }
        self.experiments[experiment["experiment_id"]] = experiment
        return experiment

    def add_run(self, body: dict) -> dict:
        """Creates a run from a ``V2beta1Run`` body (pending: nothing executes)."""
        self._check_run_body(body, "run")
        run = dict(body, run_id=str(uuid.uuid4()), state="PENDING", created_at=self._now())
        self.runs[run["run_id"]] = run
        return run

    def add_recurring_run(self, body: dict) -> dict:
        """Creates a recurring run from a ``V2beta1RecurringRun`` body."""
        self._check_run_body(body, "recurring run")
        trigger = body.get("trigger") or {}
        if ("cron_schedule" in trigger) == ("periodic_schedule" in trigger):
            raise StubError(400, "Failed to create a recurring run: exactly one of cron_schedule/periodic_schedule")
        cron = str((trigger.get("cron_schedule") or {}).get("cron", ""))
        if "cron_schedule" in trigger and not (cron.startswith("@") or len(cron.split()) in (5, 6)):
            raise StubError(400, f"Failed to create a recurring run: invalid cron {trigger['cron_schedule']!r}")
        concurrency = int(body.get("max_concurrency") or 0)
        if not 1 <= concurrency <= 10:
            raise StubError(
                400, f"The max concurrency of the recurring run is out of range. Support 1-10. {concurrency}"
            )
        status = "ENABLED" if body.get("mode") == "ENABLE" else "DISABLED"
        recurring_run = dict(
            body,
            recurring_run_id=str(uuid.uuid4()),
            max_concurrency=str(concurrency),
            status=status,
            created_at=self._now(),
        )
        self.recurring_runs[recurring_run["recurring_run_id"]] = recurring_run
        return recurring_run

    def _check_run_body(self, body: dict, kind: str) -> None:
        """The checks the KFP API server makes on a (recurring) run body that matter here."""
        if not body.get("display_name"):
            raise StubError(400, f"Failed to create a {kind}: display_name is empty")
        if body.get("experiment_id") not in self.experiments:
            raise StubError(404, f"Failed to create a {kind}: experiment {body.get('experiment_id')!r} not found")
        if not body.get("pipeline_spec") and not body.get("pipeline_version_reference"):
            raise StubError(400, f"Failed to create a {kind}: neither pipeline_spec nor pipeline_version_reference")

    # ----------------------------------------------------------------- routing
    def handle(self, request: RecordedRequest) -> tuple[int, Any]:
        """Answers one request: ``(HTTP status, JSON-able body)``."""
        path = request.path
        if self.html_pages:
            return 200, HTML_PAGE
        if path == f"{API}/healthz" and request.method == "GET":
            return 200, {"multi_user": False}
        self._check_authorization(request)
        handler, ids = _route(request.method, path)
        with self._lock:
            return 200, handler(self, request, *ids)

    def _check_authorization(self, request: RecordedRequest) -> None:
        """401 unless the request carries ``Authorization: Bearer <required_token>`` (when one is required)."""
        if self.required_token and request.headers.get("authorization") != f"Bearer {self.required_token}":
            raise StubError(401, "Unauthorized: the request has no valid bearer token")


# --------------------------------------------------------------------- route handlers
def _upload(stub: KfpApiStub, request: RecordedRequest) -> dict:
    name = _first(request, "display_name") or _first(request, "name")
    if not name:
        raise StubError(400, "Failed to upload a pipeline: no name")
    package = _uploaded_package(request)
    return stub.add_pipeline(name, _first(request, "description"), _first(request, "namespace"), package)


def _upload_version(stub: KfpApiStub, request: RecordedRequest) -> dict:
    name = _first(request, "display_name") or _first(request, "name")
    if not name:
        raise StubError(400, "Failed to upload a pipeline version: no name")
    package = _uploaded_package(request)
    version = stub.add_version(_first(request, "pipelineid"), name, _first(request, "description"), package)
    return _without_spec(version)


def _list_pipelines(stub: KfpApiStub, request: RecordedRequest) -> dict:
    namespace = _first(request, "namespace")
    found = [p for p in stub.pipelines.values() if p["namespace"] == namespace and _matches(p, request)]
    return _page("pipelines", found, request)


def _list_versions(stub: KfpApiStub, request: RecordedRequest, pipeline_id: str) -> dict:
    if pipeline_id not in stub.pipelines:
        raise StubError(404, f"pipeline {pipeline_id!r} not found")
    found = [_without_spec(v) for v in stub.versions_of(pipeline_id) if _matches(v, request)]
    return _page("pipeline_versions", found, request)


def _list_experiments(stub: KfpApiStub, request: RecordedRequest) -> dict:
    namespace = _first(request, "namespace")
    found = [e for e in stub.experiments.values() if e["namespace"] == namespace and _matches(e, request)]
    return _page("experiments", found, request)


_SEGMENT = "([^/]+)"
_ROUTES: list[tuple[str, re.Pattern, Callable[..., dict]]] = [
    (method, re.compile(API + pattern.replace("{}", _SEGMENT)), handler)
    for method, pattern, handler in [
        ("POST", "/pipelines/upload", _upload),
        ("POST", "/pipelines/upload_version", _upload_version),
        ("GET", "/pipelines", _list_pipelines),
        ("GET", "/pipelines/{}/versions", _list_versions),
        ("GET", "/experiments", _list_experiments),
        ("POST", "/experiments", lambda stub, request: stub.add_experiment(_json_body(request))),
        ("POST", "/runs", lambda stub, request: stub.add_run(_json_body(request))),
        ("POST", "/recurringruns", lambda stub, request: stub.add_recurring_run(_json_body(request))),
    ]
]


def _route(method: str, path: str) -> tuple[Callable[..., dict], list[str]]:
    """The handler of a request and the (URL-decoded) ids in its path; 404 for a route the stub does not serve."""
    for route_method, pattern, handler in _ROUTES:
        match = pattern.fullmatch(path)
        if route_method == method and match:
            return handler, [unquote(group) for group in match.groups()]
    raise StubError(404, f"no such API route: {method} {path}")


# --------------------------------------------------------------------- helpers
def _first(request: RecordedRequest, name: str) -> str:
    values = request.query.get(name) or [""]
    return values[0]


def _json_body(request: RecordedRequest) -> dict:
    try:
        body = request.json()
    except ValueError as error:
        raise StubError(400, f"request body is not JSON: {error}") from error
    if not isinstance(body, dict):
        raise StubError(400, "request body is not a JSON object")
    return body


def _matches(resource: dict, request: RecordedRequest) -> bool:
    """Applies a ``display_name`` EQUALS filter (the only one the client sends); other predicates are refused."""
    raw = _first(request, "filter")
    if not raw:
        return True
    predicates = json.loads(raw).get("predicates", [])
    for predicate in predicates:
        if predicate.get("key") != "display_name" or predicate.get("operation") not in EQUALS_OPERATIONS:
            raise StubError(400, f"unsupported filter predicate {predicate!r}")
        if resource["display_name"] != predicate.get("stringValue", predicate.get("string_value")):
            return False
    return True


def _page(key: str, resources: list[dict], request: RecordedRequest) -> dict:
    """A list response: sorted by ``created_at`` (``sort_by``), cut to ``page_size``; no key when empty, as KFP."""
    if _first(request, "sort_by").endswith(" desc"):
        resources = sorted(resources, key=lambda r: r["created_at"], reverse=True)
    size = int(_first(request, "page_size") or 0)
    page = resources[:size] if size > 0 else resources
    return {key: page, "total_size": len(resources)} if page else {"total_size": len(resources)}


def _without_spec(version: dict) -> dict:
    return {k: v for k, v in version.items() if k != "pipeline_spec"}


def _uploaded_package(request: RecordedRequest) -> bytes:
    files = request.multipart_files()
    if "uploadfile" not in files:
        raise StubError(400, "Failed to upload: the multipart form has no 'uploadfile' part")
    return files["uploadfile"][1]


def _parse_package(package: bytes) -> dict:
    """The pipeline spec (first YAML document) of an uploaded package; 400 unless it is a compiled pipeline."""
    try:
        documents = list(yaml.safe_load_all(package))
    except yaml.YAMLError as error:
        raise StubError(400, f"Failed to upload: the package is not YAML: {error}") from error
    spec = documents[0] if documents else None
    if not isinstance(spec, dict) or "pipelineInfo" not in spec or "root" not in spec:
        raise StubError(400, "Failed to upload: the package is not a compiled KFP pipeline spec")
    return spec


def _multipart_parts(request: RecordedRequest) -> list[tuple[str, str, bytes]]:
    """The parts of a ``multipart/form-data`` body as ``(field name, filename, content)``."""
    content_type = request.headers.get("content-type", "")
    if not content_type.startswith("multipart/form-data"):
        return []
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + request.body)
    parts = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition") or ""
        filename = part.get_filename() or ""
        parts.append((name, filename, part.get_payload(decode=True) or b""))
    return parts


_ERROR_BODY_MAX = 2000


def _handler(stub: KfpApiStub) -> type[QuietHandler]:
    """A handler class that reads, records and answers each request through ``stub.handle``."""

    class Handler(QuietHandler):
        def _serve(self) -> None:
            url = urlsplit(self.path)
            headers = {name.lower(): value for name, value in self.headers.items()}
            request = RecordedRequest(
                self.command, url.path, parse_qs(url.query, keep_blank_values=True), headers, self.body()
            )
            stub.requests.append(request)
            try:
                status, body = stub.handle(request)
            except StubError as error:
                status = error.status
                body = {"code": RPC_CODES.get(status, 2), "message": error.message[:_ERROR_BODY_MAX], "details": []}
            if isinstance(body, str):  # an HTML page
                self.reply(status, body.encode(), {"Content-Type": "text/html; charset=utf-8"})
            else:
                self.reply(status, body)

        do_GET = do_POST = do_DELETE = do_PATCH = _serve  # noqa: N815 - http.server's naming

    return Handler


@pytest.fixture
def kfp_api_stub_factory(tmp_path_factory: pytest.TempPathFactory):
    """Starts stubs: ``factory(required_token="", tls=False, html_pages=False)`` (HTML: a wrong host's login page)."""
    started: list[KfpApiStub] = []

    def factory(required_token: str = "", tls: bool = False, html_pages: bool = False) -> KfpApiStub:
        tls_directory = tmp_path_factory.mktemp("kfp-api-stub-tls") if tls else None
        stub = KfpApiStub(required_token=required_token, html_pages=html_pages).start(tls_directory)
        started.append(stub)
        return stub

    yield factory
    for stub in started:
        stub.stop()


@pytest.fixture
def kfp_api_stub(kfp_api_stub_factory) -> KfpApiStub:
    """A running plain-HTTP KFP v2beta1 API stub that accepts any (or no) bearer token; ``.url`` is its host."""
    return kfp_api_stub_factory()


__all__ = ["KfpApiStub", "RecordedRequest", "StubError", "write_self_signed_certificate"]


@pytest.fixture
def no_kfp_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's ``KFP_HOST``/``KFP_TOKEN`` kept out of the tests."""
    for name in ("KFP_HOST", "KFP_TOKEN"):
        monkeypatch.delenv(name, raising=False)
