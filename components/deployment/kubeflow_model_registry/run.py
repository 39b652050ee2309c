"""The whole ``model_registry`` step: skip or gate, find the serving URI, upload, register, summarise."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
from collections.abc import Callable, Mapping
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, NamedTuple

from components._common.arguments import artifact_path, require_arguments
from components._common.files import write_text_atomically
from components._common.masking import mask_data, masked
from components._common.namespace import pod_namespace
from components._common.s3 import s3_client

from .delta_gate import DeltaGateDecision, comparison_properties, evaluate_delta_gate
from .gate import GateDecision, evaluate_gate
from .kserve_deploy import Deployment
from .lineage import ArtifactInfo, RunInfo, known_run_value, lineage_properties, metric_values
from .model_uri import ServingUri, model_files_dir, parse_s3_uri, resolve_serving_uri
from .registration import (
    ModelRegistryResult,
    Registrar,
    VersionRequest,
    check_registration_names,
    default_model_name,
)
from .registry_client import RegistrySession, RetryPolicy
from .registry_endpoint import API_ROOT, make_endpoint
from .s3_upload import upload_model_files
from .serving import (
    ServingRequest,
    check_deployable,
    check_serving_request,
    deploy,
    modelcar_properties,
    publish,
    serving_details,
)
from .summary import render_summary

STATUS_SKIPPED = "skipped"
#: A gate (metric threshold, improvement or regression) kept the model out of the registry: reported, not an error.
STATUS_GATED_OUT = "gated_out"
#: Distributions whose versions are recorded as lineage when installed.
RECORDED_LIBRARIES = ("kfp-finetune", "kfp", "model-registry")
#: The input artifacts: each becomes an :class:`ArtifactInfo` under its own name.
ARTIFACTS = ("model", "eval_metrics", "train_metrics", "dataset", "eval_results")
#: lm_eval's results metadata recorded as ``eval.<key>`` properties of the model version (the evaluation's lineage).
EVALUATION_LINEAGE = ("eval_backend", "evaluated_model_location", "evaluated_model_digest", "hardware_profile")
#: The output artifact: the summary file, written by ``run_model_registration``, not part of the request.
OUTPUTS = ("summary",)


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


def _comparison(eval_results: ArtifactInfo | None) -> tuple[dict, str]:
    """The lm_eval results' ``comparison`` metadata, and why there is none when known."""
    if eval_results is None:
        return {}, ""
    metadata = eval_results.metadata
    unavailable = metadata.get("baseline_skipped") or metadata.get("skipped") or ""
    if unavailable:
        unavailable = f"the base model was not evaluated: {unavailable}"
    return dict(metadata.get("comparison") or {}), str(unavailable)


def _gates(
    metric_gate: GateDecision, delta_gate: DeltaGateDecision, summary_path: str, log: Callable[[str], None]
) -> ModelRegistryResult | None:
    """Logs each gate's reasons; when one failed, writes the summary and returns the ``gated_out`` result."""
    reasons = [metric_gate.reason, *delta_gate.reasons]
    for line in reasons:
        log(f"gate: {line}")
    if metric_gate.passed and delta_gate.passed:
        return None
    failed = ([] if metric_gate.passed else [metric_gate.reason]) + list(delta_gate.failures)
    reason = f"gate not met: {'; '.join(failed)}"
    details = [("Gate", line) for line in reasons]
    return _unregistered(STATUS_GATED_OUT, reason, summary_path, log, details, checks=delta_gate.checks)


@dataclasses.dataclass(frozen=True)
class ModelRegistryRequest:
    """``model_registry``'s arguments as the component received them; no defaults.

    One field per parameter, under its name (described once, in ``parameter_docs.py``); input artifacts as
    :class:`ArtifactInfo` (``None`` when absent); the modelcar and deploy parameters grouped in ``serving``
    (:class:`~.serving.ServingRequest`).
    """

    model: ArtifactInfo
    registry_address: str
    registry_port: int
    model_name: str
    model_version: str
    author: str
    description: str
    model_format_name: str
    model_format_version: str
    eval_metrics: ArtifactInfo | None
    train_metrics: ArtifactInfo | None
    dataset: ArtifactInfo | None
    min_metric_name: str
    min_metric_value: float
    eval_results: ArtifactInfo | None
    min_improvement_metric: str
    min_improvement: float
    max_regression: float
    max_regression_relative: bool
    model_uri: str
    s3_upload_prefix: str
    is_secure: bool
    ca_bundle_path: str
    allow_token_over_http: bool
    storage_key: str
    pipeline_run_id: str
    pipeline_run_name: str
    pvc_path: str
    serving: ServingRequest


def _artifact_info(name: str, artifact: Any) -> ArtifactInfo | None:
    path = artifact_path("model_registry", name, artifact)
    return None if artifact is None else ArtifactInfo(artifact.uri, path, dict(artifact.metadata))


def model_registry_request(arguments: Mapping[str, Any]) -> ModelRegistryRequest:
    """``model_registry``'s arguments (the wrapper's ``dict(locals())``) as its request.

    Parameters keep their names; input artifacts become :class:`ArtifactInfo` (``None`` when absent); the modelcar
    and deploy parameters form the request's ``serving`` group.

    Raises:
        TypeError: A name is missing or unknown, or an input artifact is not artifact-like.
    """
    serving = [field.name for field in dataclasses.fields(ServingRequest)]
    fields = [field.name for field in dataclasses.fields(ModelRegistryRequest) if field.name != "serving"]
    require_arguments("model_registry", arguments, [*fields, *serving, *OUTPUTS])
    values = {name: _artifact_info(name, arguments[name]) if name in ARTIFACTS else arguments[name] for name in fields}
    return ModelRegistryRequest(**values, serving=ServingRequest(**{name: arguments[name] for name in serving}))


def scratch_root(pvc_path: str) -> Path | None:
    """Where the modelcar's image layout is built: ``<workspace>/model_registry/`` (``None``: a temporary directory).

    On the workspace, the layout (the model's size) does not fill this pod's disk.
    """
    if not pvc_path.strip():
        return None
    root = Path(pvc_path) / "model_registry"
    root.mkdir(parents=True, exist_ok=True)
    return root


def component_outputs(result: ModelRegistryResult) -> Outputs:
    """The component's outputs from the step's result."""
    return Outputs(result.status, result.model_id, result.version_id, result.uri, result.endpoint_url)


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
    """Registers the model with its lineage in a Kubeflow Model Registry (see the component for the parameters).

    ``environ`` holds the token, PVC and S3 settings (default ``os.environ``); ``now`` is the clock of derived version
    names. Status ``gated_out`` (nothing registered, the summary says why) when a gate is not met.

    Raises:
        ValueError: Bad parameters or metadata (names the parameter and the rule), or a gate that cannot be
            evaluated (its metric is missing, or there is no comparison with the base model).
        VersionConflictError: The version exists and points elsewhere.
        RegistryRequestError: The registry failed, is unreachable or refused the token.
    """
    model, model_name, serving_request = request.model, request.model_name, request.serving
    environ = os.environ if environ is None else environ
    registry_on = bool(request.registry_address.strip())
    if not registry_on and not serving_request.modelcar_uri.strip():
        reason = "registry_address is empty, so no Model Registry is configured"
        return _unregistered(STATUS_SKIPPED, reason, summary_path, log)
    check_registration_names(request.registry_address, model_name, request.model_version)
    if not model_name.strip():
        model_name = default_model_name(
            str(model.metadata.get("algorithm", "")), str(model.metadata.get("base_model", ""))
        )
        log(f"model_name is empty: registering as {model_name!r} (the training algorithm and the base model)")
    if not request.model_format_name.strip():
        raise ValueError("model_format_name is empty: serving runtimes select on it (e.g. 'pytorch', 'vLLM')")
    check_serving_request(serving_request, model_name, request.model_uri, request.s3_upload_prefix, registry_on)

    eval_values, train_values = metric_values(request.eval_metrics), metric_values(request.train_metrics)
    comparison, unavailable = _comparison(request.eval_results)
    decision = evaluate_gate(request.min_metric_name, request.min_metric_value, eval_values, train_values)
    delta_decision = evaluate_delta_gate(
        comparison,
        request.min_improvement_metric,
        request.min_improvement,
        request.max_regression,
        request.max_regression_relative,
        unavailable,
    )
    gated_out = _gates(decision, delta_decision, summary_path, log)
    if gated_out is not None:
        return gated_out
    for name, value in comparison_properties(comparison).items():
        eval_values.setdefault(name, value)
    if request.eval_results is not None and request.eval_results.metadata.get("verdict"):
        eval_values.setdefault("verdict", request.eval_results.metadata["verdict"])
    for key in EVALUATION_LINEAGE:  # which model the evaluation evaluated, and where (lm_eval's remote_evaluation.py)
        if request.eval_results is not None and request.eval_results.metadata.get(key):
            eval_values.setdefault(key, request.eval_results.metadata[key])
    if not registry_on:  # published only: nothing to register or deploy
        modelcar = publish(serving_request, model, log, scratch_root(request.pvc_path))
        reason = f"registry_address is empty: modelcar {modelcar.uri} published, not registered"
        details = serving_details(modelcar, None, "")
        return _unregistered(STATUS_SKIPPED, reason, summary_path, log, details, modelcar.uri)

    endpoint = make_endpoint(
        request.registry_address,
        request.registry_port,
        request.is_secure,
        request.ca_bundle_path,
        environ,
        allow_token_over_http=request.allow_token_over_http,
        log=log,
    )
    # once the registry settings are known to be usable
    modelcar = publish(serving_request, model, log, scratch_root(request.pvc_path))
    upload_source = None
    s3_uri = ""
    if request.s3_upload_prefix.strip():
        bucket, prefix = parse_s3_uri(request.s3_upload_prefix)
        s3_uri = f"s3://{bucket}/{prefix}"
        upload_source = model_files_dir(model)
    if modelcar is not None:
        serving = ServingUri(modelcar.uri, f"modelcar pushed as {modelcar.tag_uri}")
    else:
        serving = resolve_serving_uri(model, request.model_uri, s3_uri, environ)
    check_deployable(serving_request, serving.uri)
    log(f"serving URI {serving.uri} (from {serving.source})")

    run = RunInfo(
        known_run_value(request.pipeline_run_id), known_run_value(request.pipeline_run_name), pod_namespace(environ)
    )
    version = VersionRequest(
        model_name=model_name,
        version_name=request.model_version,
        uri=serving.uri,
        author=request.author,
        description=request.description,
        model_format_name=request.model_format_name,
        model_format_version=request.model_format_version,
        storage_key=request.storage_key,
        custom_properties=mask_data(  # metadata sent to the registry: secret values masked
            lineage_properties(
                model,
                run,
                dataset=request.dataset,
                train_metrics=train_values,
                eval_metrics=eval_values,
                library_versions=library_versions(),
            )
            | modelcar_properties(modelcar),
            patterns=False,
        ),
        run=run,
    )

    def upload() -> None:
        if upload_source is not None:
            upload_model_files(
                upload_source, request.s3_upload_prefix, log, s3_client(environ, purpose="s3_upload_prefix is set")
            )

    session = RegistrySession(endpoint, retry_policy, log)
    session.open(request.author)
    registration = Registrar(session, log).register(version, upload, now)
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
        ("Model format", f"{request.model_format_name} {request.model_format_version}"),
        ("Registry", f"{endpoint.base_url}, API {API_ROOT}{api_version}"),
        ("Gate", decision.reason),
        *(("Gate", line) for line in delta_decision.reasons),
    ]

    def write_summary(deployed: Deployment | None, not_deployed: str) -> None:
        rows = details + serving_details(modelcar, deployed, not_deployed)
        summary = render_summary(
            registration.status, reason, rows, version.custom_properties, link, checks=delta_decision.checks
        )
        write_text_atomically(summary_path, summary)

    deployment = None
    if serving_request.deploy_inference_service:
        write_summary(None, "in progress")
        try:
            deployment = deploy(serving_request, serving.uri, model_name, request.storage_key, environ, log, run.run_id)
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
