"""From registration to a served model: the modelcar publish and the optional KServe deploy (README: *Modelcar*)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from components._common.kube_auth import KubeAuthError, load_api_client
from components._common.namespace import pod_namespace

from .kserve_deploy import Deployment, DeploySettings, deploy_model
from .kserve_manifests import service_name
from .lineage import ArtifactInfo
from .model_uri import model_files_dir
from .modelcar import LORA_WEIGHTS, PublishedModelcar, parse_modelcar_uri, publish_modelcar

#: Storage a served InferenceService can outlive the run with (``pvc://`` of the run's workspace is deleted with it).
DEPLOYABLE_SCHEMES = ("oci", "s3")


@dataclasses.dataclass(frozen=True)
class ServingRequest:
    """The publish and deploy parameters of ``model_registry``, under their names (see its ``parameter_docs.py``)."""

    modelcar_uri: str
    modelcar_base_image: str
    modelcar_lora_weights: str
    modelcar_insecure: bool
    deploy_inference_service: bool
    deploy_service_name: str
    deploy_namespace: str
    deploy_runtime: str
    deploy_runtime_image: str
    deploy_gpus: int
    deploy_timeout_seconds: int
    deploy_hardware_profile: str


def check_serving_request(
    request: ServingRequest, model_name: str, model_uri: str, s3_upload_prefix: str, registry_on: bool
) -> None:
    """Checks the URI, publish and deploy parameters (before anything is pushed, registered or deployed).

    Raises:
        ValueError: One line naming the parameter, its value and the rule.
    """
    if len([uri for uri in (model_uri, s3_upload_prefix, request.modelcar_uri) if uri.strip()]) > 1:
        raise ValueError("give one of model_uri, s3_upload_prefix and modelcar_uri: each decides the registered URI")
    if request.modelcar_uri.strip():
        parse_modelcar_uri(request.modelcar_uri)
    if request.modelcar_lora_weights not in LORA_WEIGHTS:
        raise ValueError(f"modelcar_lora_weights={request.modelcar_lora_weights!r}: expected one of {LORA_WEIGHTS}")
    if not request.deploy_inference_service:
        return
    if not registry_on:
        raise ValueError("deploy_inference_service needs registry_address: only a registered model is deployed")
    service_name(request.deploy_service_name, model_name)
    if request.deploy_timeout_seconds < 1 or request.deploy_gpus < 0:
        raise ValueError(
            f"deploy_timeout_seconds={request.deploy_timeout_seconds} must be >= 1 and deploy_gpus="
            f"{request.deploy_gpus} >= 0"
        )
    if not request.deploy_runtime.strip():
        raise ValueError("deploy_runtime is empty: name the ServingRuntime to use (e.g. vllm-runtime)")


def publish(
    request: ServingRequest, model: ArtifactInfo, log: Callable[[str], None], scratch: Path | None = None
) -> PublishedModelcar | None:
    """Pushes the modelcar when ``modelcar_uri`` is set (its layout built under ``scratch``); ``None`` otherwise."""
    if not request.modelcar_uri.strip():
        return None
    return publish_modelcar(
        model_files_dir(model),
        model.metadata,
        request.modelcar_uri,
        request.modelcar_base_image,
        request.modelcar_lora_weights,
        request.modelcar_insecure,
        log,
        scratch=scratch,
    )


def modelcar_properties(modelcar: PublishedModelcar | None) -> dict[str, str]:
    """The modelcar's facts as version properties (``modelcar_*``)."""
    if modelcar is None:
        return {}
    properties = {"modelcar_uri": modelcar.uri, "modelcar_tag": modelcar.tag_uri, "modelcar_digest": modelcar.digest}
    if modelcar.lora_weights:
        properties["modelcar_lora_weights"] = modelcar.lora_weights
    if modelcar.base_model:
        properties["modelcar_base_model"] = modelcar.base_model
    return properties


def check_deployable(request: ServingRequest, uri: str) -> None:
    """With deploy on, ``uri`` must be storage a service outlives the run with (checked before registering).

    Raises:
        ValueError: Not ``oci://`` or ``s3://``.
    """
    if request.deploy_inference_service and urlsplit(uri).scheme not in DEPLOYABLE_SCHEMES:
        raise ValueError(
            f"deploy_inference_service: the model's URI {uri!r} is not oci:// or s3:// storage that a service "
            "outlives the run with; set modelcar_uri (or s3_upload_prefix)"
        )


def deploy(
    request: ServingRequest,
    registered_uri: str,
    model_name: str,
    storage_key: str,
    environ: Mapping[str, str] | None,
    log: Callable[[str], None],
    run_id: str = "",
) -> Deployment:
    """Serves ``registered_uri`` (``oci://`` or ``s3://``: :func:`check_deployable`) on KServe and smoke-tests it.

    ``run_id``: the pipeline run's id, recorded on the service (only this run updates it later).

    Raises:
        KubeAuthError: No usable Kubernetes credentials.
        DeployError: See :func:`.kserve_deploy.deploy_model`.
    """
    environ = os.environ if environ is None else environ
    try:
        api_client = load_api_client(environ=environ, log=log)
    except KubeAuthError as error:
        raise KubeAuthError(f"deploy_inference_service: {error}") from None
    try:
        namespace = request.deploy_namespace.strip() or pod_namespace(environ)
        profile = None
        if request.deploy_hardware_profile.strip():
            from components._common.hardware_profiles import PLATFORM_NAMESPACES, read_hardware_profile

            profile = read_hardware_profile(
                api_client, request.deploy_hardware_profile.strip(), [namespace, *PLATFORM_NAMESPACES],
                "deploy_hardware_profile",
            )  # fmt: skip
            log(f"hardware profile {profile.summary()}")
        settings = DeploySettings(
            namespace=namespace,
            service_name=service_name(request.deploy_service_name, model_name),
            runtime=request.deploy_runtime.strip(),
            runtime_image=request.deploy_runtime_image.strip(),
            gpus=request.deploy_gpus,
            timeout_seconds=float(request.deploy_timeout_seconds),
            hardware_profile=profile,
        )
        return deploy_model(api_client, settings, registered_uri, model_name, storage_key, log, run_id=run_id)
    finally:
        api_client.close()


def serving_details(modelcar: PublishedModelcar | None, deployment: Deployment | None, skipped: str) -> list:
    """Summary rows: the modelcar, then the served endpoint (or why it was not deployed)."""
    rows: list[tuple[str, str]] = []
    if modelcar is not None:
        rows.append(("Modelcar", f"{modelcar.uri} (pushed as {modelcar.tag_uri})"))
        if modelcar.base_model:
            rows.append(("Modelcar base model", f"{modelcar.base_model} (LoRA adapter published without merging)"))
    if deployment is not None:
        rows.append(("InferenceService", f"{deployment.service} ({deployment.action}, uid {deployment.uid})"))
        rows.append(("Endpoint", deployment.url))
        rows.append(("Smoke completion", repr(deployment.smoke_answer)))
    elif skipped:
        rows.append(("Deployment", skipped))
    return rows
