"""An EvalHub server on 127.0.0.1 that follows its OpenAPI document and runs the REAL ``lm_eval``.

EvalHub ``v1.0.1``'s job endpoints (``tests/specs/openapi/eval-hub.yaml``), each request and answer validated against
the document; no ``X-Tenant``: ``400``; a job is visible only to its tenant and goes ``pending`` → ``running`` → a final
state; its ``test_data_ref.pvc`` claim is a local directory (``claims``) mapped at ``/test_data``. Scripted:
``forbidden`` (``403``), ``never_complete``, ``partially_failed``, ``blackhole`` (never answers).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import yaml

from tests.harness.http_server import LoopbackServer, QuietHandler
from tests.harness.trustyai_controller import run_lm_eval_cli

SPEC = Path(__file__).resolve().parents[1] / "specs" / "openapi" / "eval-hub.yaml"
JOBS = "/api/v1/evaluations/jobs"
TEST_DATA = "/test_data"


def _validator(schema_name: str) -> Any:
    import jsonschema

    document = yaml.safe_load(SPEC.read_text())
    schema = {"$ref": f"#/components/schemas/{schema_name}", "components": document["components"]}
    return jsonschema.Draft202012Validator(schema)


@dataclass
class SeenRequest:
    """One request: method, path, tenant header, JSON body."""

    method: str
    path: str
    tenant: str
    body: Any


@dataclass
class EvalHub:
    """The running server: its URL, the jobs by id, the requests seen, and the scripted behaviours."""

    url: str
    claims: dict[str, Path]
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[SeenRequest] = field(default_factory=list)
    forbidden: bool = False
    never_complete: bool = False
    partially_failed: bool = False
    blackhole: bool = False
    commands: list[list[str]] = field(default_factory=list)


def _local(value: str, root: Path) -> str:
    return value.replace(TEST_DATA, str(root))


def _run_lm_eval(hub: EvalHub, job: dict[str, Any]) -> dict[str, Any]:
    """Runs every benchmark of the job in one real ``lm_eval`` (same model and parameters); lm-eval's results."""
    benchmarks = job["benchmarks"]
    claim = benchmarks[0]["test_data_ref"]["pvc"]
    root = hub.claims[claim["claim_name"]] / claim.get("sub_path", "")
    parameters = benchmarks[0].get("parameters") or {}
    with tempfile.TemporaryDirectory(prefix="evalhub-job-") as scratch:
        tasks = Path(scratch) / "tasks"
        tasks.mkdir()
        for benchmark in benchmarks:
            include = (benchmark.get("parameters") or {}).get("include_path")
            if include:
                shutil.copytree(_local(include, root), tasks, dirs_exist_ok=True)
        for yaml_file in tasks.glob("*.yaml"):
            yaml_file.write_text(_local(yaml_file.read_text(), root))
        model = _local(job["model"]["parameters"]["pretrained"], root)
        names = ",".join(benchmark["id"] for benchmark in benchmarks)
        command = ["--model", "hf", "--model_args", f"pretrained={model}", "--tasks", names]
        command += ["--include_path", str(tasks), "--batch_size", str(parameters.get("batch_size", "1"))]
        for key in ("limit", "num_fewshot"):
            if key in parameters:
                command += [f"--{key}", str(parameters[key])]
        if parameters.get("apply_chat_template"):
            command.append("--apply_chat_template")
        return run_lm_eval_cli(command, Path(scratch), 600, hub.commands)


def _execute(hub: EvalHub, job_id: str) -> None:
    job = hub.jobs[job_id]
    job["status"] = {"state": "running", "message": {"message": "Evaluation job running.", "message_code": "running"}}
    if hub.never_complete:
        return
    if hub.partially_failed:
        message = "1 of 1 benchmarks failed"
        job["status"] = {"state": "partially_failed", "message": {"message": message, "message_code": "partial"}}
        return
    try:
        results = _run_lm_eval(hub, job)
    except Exception as error:  # noqa: BLE001 - the job's failure
        job["status"] = {"state": "failed", "message": {"message": str(error), "message_code": "evaluation_failed"}}
        return
    if job["status"]["state"] == "cancelled":
        return
    benchmark_results = []
    for index, benchmark in enumerate(job["benchmarks"]):
        raw = results["results"].get(benchmark["id"]) or {}
        metrics = {
            key.removesuffix(",none"): value
            for key, value in raw.items()
            if "," in key and isinstance(value, (int, float)) and not isinstance(value, bool)
        }
        entry = {"id": benchmark["id"], "provider_id": benchmark["provider_id"], "benchmark_index": index}
        benchmark_results.append({**entry, "metrics": metrics})
    job["results"] = {
        "benchmarks": benchmark_results,
        "test": {"score": 1.0, "threshold": 0.5, "pass": True},
        "mlflow_experiment_url": f"http://mlflow.example/#/experiments/{job_id}",
    }
    done = {"message": "Evaluation job completed.", "message_code": "completed"}
    job["status"] = {"state": "completed", "message": done}


def _handler(hub: EvalHub) -> type[BaseHTTPRequestHandler]:
    config, resource = _validator("EvaluationJobConfig"), _validator("EvaluationJobResource")

    class Handler(QuietHandler):
        protocol_version = "HTTP/1.0"

        def _send(self, status: int, body: Any = None) -> None:
            if isinstance(body, dict) and "resource" in body:
                resource.validate(body)  # what this server answers follows the document
            self.reply(status, body, {"Content-Type": "application/json"})

        def _error(self, status: int, code: str, message: str) -> None:
            self._send(status, {"message_code": code, "message": message})

        def _begin(self, method: str) -> tuple[str, Any] | None:
            body = json.loads(self.body() or "null")
            tenant = self.headers.get("X-Tenant", "")
            hub.requests.append(SeenRequest(method, self.path, tenant, body))
            if hub.blackhole:
                threading.Event().wait(30)
                return None
            if hub.forbidden:
                self._error(403, "forbidden", "the user may not create evaluation jobs in this tenant")
                return None
            if not tenant:
                self._error(400, "missing_tenant_header", "The request is missing a required header X-Tenant.")
                return None
            return tenant, body

        def _job(self, tenant: str) -> dict[str, Any] | None:
            job = hub.jobs.get(self.path.rsplit("/", 1)[-1].split("?")[0])
            if job is None or job["resource"]["tenant"] != tenant:
                self._error(404, "not_found", "The evaluation job was not found.")
                return None
            return job

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            begun = self._begin("POST")
            if begun is None:
                return
            tenant, body = begun
            errors = sorted(config.iter_errors(body), key=str)
            if self.path != JOBS or errors:
                self._error(400, "bad_request", errors[0].message if errors else f"no route {self.path}")
                return
            job_id = str(uuid.uuid4())
            now = "2026-12-06T10:00:00Z"
            job = {
                **body,
                "resource": {"id": job_id, "tenant": tenant, "created_at": now, "updated_at": now, "owner": "step"},
                "status": {"state": "pending", "message": {"message": "created", "message_code": "created"}},
            }
            hub.jobs[job_id] = job
            self._send(202, job)
            threading.Thread(target=_execute, args=(hub, job_id), daemon=True).start()

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            begun = self._begin("GET")
            if begun is not None and (job := self._job(begun[0])) is not None:
                self._send(200, job)

        def do_DELETE(self) -> None:  # noqa: N802 - stdlib name
            begun = self._begin("DELETE")
            if begun is not None and (job := self._job(begun[0])) is not None:
                if job["status"]["state"] in ("completed", "failed", "cancelled", "partially_failed"):
                    self._error(409, "conflict", "The evaluation job already finished.")
                    return
                job["status"] = {"state": "cancelled", "message": {"message": "cancelled", "message_code": "cancelled"}}
                self._send(204)

    return Handler


@contextlib.contextmanager
def running_evalhub(claims: dict[str, Path]) -> Iterator[EvalHub]:
    """Starts the server for the block."""
    hub = EvalHub(url="", claims=claims)
    server = LoopbackServer(_handler(hub), "evalhub")
    hub.url = server.url
    try:
        yield hub
    finally:
        hub.blackhole = False
        server.stop()
