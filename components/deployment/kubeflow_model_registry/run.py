"""The whole ``model_registry`` step: skip or gate, find the serving URI, upload, register, summarise."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
from collections.abc import Callable, Mapping
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import NamedTuple

from components._common.files import write_text_atomically
from components._common.masking import mask_data, masked
from components._common.namespace import pod_namespace
from components._common.s3 import s3_client

from .gates import comparison_of, evaluate_gates
from .kserve_deploy import Deployment, deploy
from .kserve_manifests import check_deploy_options, check_deployable
from .lineage import RunInfo, evaluation_values, known_run_value, lineage_properties, metric_values
from .model_uri import ServingUri, model_files_dir, parse_s3_uri, resolve_serving_uri, upload_model_files
from .modelcar import PublishedModelcar, check_modelcar_options, publish_modelcar
from .registration import ModelRegistryResult, Registrar, VersionRequest, check_registration_names, default_model_name
from .registry_client import RegistrySession, RetryPolicy
from .registry_endpoint import API_ROOT, make_endpoint
from .request import ModelRegistryRequest
from .summary import render_summary, serving_rows

STATUS_SKIPPED = "skipped"
#: A gate kept the model out of the registry: reported, not an error.
STATUS_GATED_OUT = "gated_out"
#: Distributions whose versions are recorded as lineage when installed.
RECORDED_LIBRARIES = ("kfp-finetune", "kfp", "model-registry")


class Outputs(NamedTuple):
    """The component's return values (its ``NamedTuple`` outputs, in their order)."""

    status: str
    model_id: str
    version_id: str
    model_uri: str
    endpoint_url: str


def _log(message: str) -> None:
    print(f"[model_registry] {message}", flush=True)


def library_versions() -> dict[str, str]:
    """Versions of :data:`RECORDED_LIBRARIES` that are installed here."""
    versions = {}
    for name in RECORDED_LIBRARIES:
        with contextlib.suppress(importlib_metadata.PackageNotFoundError):
            versions[name] = importlib_metadata.version(name)
    return versions


def _unregistered(
    status: str, reason: str, summary_path: str, log: Callable[[str], None], details=(), uri: str = "", checks=()
) -> ModelRegistryResult:
    """Ends the step without registering (``skipped`` or ``gated_out``): logs why, writes the summary."""
    log(f"{'skipped' if status == STATUS_SKIPPED else 'gated out (not registered)'}: {reason}")
    write_text_atomically(summary_path, render_summary(status, reason, details, checks=checks))
    return ModelRegistryResult(status, uri=uri, reason=reason)


def component_outputs(result: ModelRegistryResult) -> Outputs:
    """The component's outputs from the step's result."""
    return Outputs(result.status, result.model_id, result.version_id, result.uri, result.endpoint_url)


def _publish(request: ModelRegistryRequest, log: Callable[[str], None]) -> PublishedModelcar | None:
    """Pushes the modelcar when ``modelcar_uri`` is set, its layout built under ``<workspace>/model_registry/``."""
    if not request.modelcar.uri.strip():
        return None
    scratch = None
    if request.storage.pvc_path.strip():  # the layout (the model's size) does not fill this pod's disk
        scratch = Path(request.storage.pvc_path) / "model_registry"
        scratch.mkdir(parents=True, exist_ok=True)
    model = request.model
    return publish_modelcar(model_files_dir(model), model.metadata, request.modelcar, log, scratch=scratch)


@masked
def run_model_registration(
    request: ModelRegistryRequest,
    summary_path: str,
    *,
    environ: Mapping[str, str] | None = None,
    retry_policy: RetryPolicy = RetryPolicy(),
    log: Callable[[str], None] = _log,
    now: datetime.datetime | None = None,
) -> ModelRegistryResult:
    """Registers the model with its lineage (``gated_out`` when a gate is not met); ``environ``: default ``os.environ``.

    Raises:
        ValueError: Bad parameters or metadata (names the parameter and the rule), or a gate that cannot be
            evaluated (its metric is missing, or there is no comparison with the base model).
        VersionConflictError: The version exists and points elsewhere.
        RegistryRequestError: The registry failed, is unreachable or refused the token.
    """
    model, version, storage = request.model, request.version, request.storage
    environ = os.environ if environ is None else environ
    registry_on = bool(request.registry.registry_address.strip())
    if not registry_on and not request.modelcar.uri.strip():
        reason = "registry_address is empty, so no Model Registry is configured"
        return _unregistered(STATUS_SKIPPED, reason, summary_path, log)
    check_registration_names(request.registry.registry_address, version.model_name, version.model_version)
    model_name = version.model_name
    if not model_name.strip():
        model_name = default_model_name(
            str(model.metadata.get("algorithm", "")), str(model.metadata.get("base_model", ""))
        )
        log(f"model_name is empty: registering as {model_name!r} (the training algorithm and the base model)")
    if not version.model_format_name.strip():
        raise ValueError("model_format_name is empty: serving runtimes select on it (e.g. 'pytorch', 'vLLM')")
    if len([uri for uri in (storage.model_uri, storage.s3_upload_prefix, request.modelcar.uri) if uri.strip()]) > 1:
        raise ValueError("give one of model_uri, s3_upload_prefix and modelcar_uri: each decides the registered URI")
    check_modelcar_options(request.modelcar)
    check_deploy_options(request.deploy, model_name, registry_on)

    comparison, unavailable = comparison_of(request.eval_results)
    eval_values = evaluation_values(request.eval_metrics, request.eval_results, comparison)
    train_values = metric_values(request.train_metrics)
    gates = evaluate_gates(request.gates, metric_values(request.eval_metrics), train_values, comparison, unavailable)
    for line in gates.reasons:
        log(f"gate: {line}")
    gate_rows = [("Gate", line) for line in gates.reasons]
    if not gates.passed:
        reason = f"gate not met: {'; '.join(gates.failures)}"
        return _unregistered(STATUS_GATED_OUT, reason, summary_path, log, gate_rows, checks=gates.checks)
    if not registry_on:  # published only: nothing to register or deploy
        modelcar = _publish(request, log)
        reason = f"registry_address is empty: modelcar {modelcar.uri} published, not registered"
        return _unregistered(STATUS_SKIPPED, reason, summary_path, log, serving_rows(modelcar, None, ""), modelcar.uri)

    endpoint = make_endpoint(request.registry, environ, log=log)
    modelcar = _publish(request, log)  # once the registry settings are known to be usable
    s3_uri = ""
    if storage.s3_upload_prefix.strip():
        bucket, prefix = parse_s3_uri(storage.s3_upload_prefix)
        s3_uri = f"s3://{bucket}/{prefix}"
    if modelcar is not None:
        serving = ServingUri(modelcar.uri, f"modelcar pushed as {modelcar.tag_uri}")
    else:
        serving = resolve_serving_uri(model, storage.model_uri, s3_uri, environ)
    check_deployable(request.deploy, serving.uri)
    log(f"serving URI {serving.uri} (from {serving.source})")

    run = RunInfo(known_run_value(request.run.run_id), known_run_value(request.run.run_name), pod_namespace(environ))
    lineage = lineage_properties(
        model,
        run,
        dataset=request.dataset,
        train_metrics=train_values,
        eval_metrics=eval_values,
        library_versions=library_versions(),
    )
    lineage |= modelcar.properties() if modelcar else {}
    # metadata sent to the registry: secret values masked
    registration_request = VersionRequest(version, model_name, serving.uri, mask_data(lineage, patterns=False), run)

    def upload() -> None:
        if s3_uri:
            client = s3_client(environ, purpose="s3_upload_prefix is set")
            upload_model_files(model_files_dir(model), storage.s3_upload_prefix, log, client)

    session = RegistrySession(endpoint, retry_policy, log)
    session.open(version.author)
    registration = Registrar(session, log).register(registration_request, upload, now)
    api_version = session.registry.api_version
    reason = (
        "registered now"
        if registration.status == "registered"
        else "this exact registration already existed (re-run): nothing was created"
    )
    link = f"{endpoint.base_url}{API_ROOT}{api_version}/model_versions/{registration.version_id}"
    details = [
        ("Registered model", f"{model_name} (id {registration.model_id})"),
        ("Version", f"{registration.version_name} (id {registration.version_id})"),
        ("Model artifact", f"id {registration.artifact_id}"),
        ("URI", f"{serving.uri} (from {serving.source})"),
        ("Model format", f"{version.model_format_name} {version.model_format_version}"),
        ("Registry", f"{endpoint.base_url}, API {API_ROOT}{api_version}"),
        *gate_rows,
    ]

    def write_summary(deployed: Deployment | None, not_deployed: str) -> None:
        rows = details + serving_rows(modelcar, deployed, not_deployed)
        properties = registration_request.custom_properties
        summary = render_summary(registration.status, reason, rows, properties, link, checks=gates.checks)
        write_text_atomically(summary_path, summary)

    deployment = None
    if request.deploy.inference_service:
        write_summary(None, "in progress")
        try:
            deployment = deploy(request.deploy, serving.uri, model_name, version.storage_key, environ, log, run.run_id)
        except ValueError as error:
            write_summary(None, f"FAILED: {error}")
            raise
    write_summary(deployment, "off (deploy_inference_service is false)")
    return dataclasses.replace(
        registration,
        uri=serving.uri,
        reason=reason,
        api_version=api_version,
        endpoint_url=deployment.url if deployment else "",
        smoke_answer=deployment.smoke_answer if deployment else "",
    )
