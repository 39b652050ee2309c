"""KServe objects serving the registered model (OpenShift AI's vLLM ``ServingRuntime``, an ``InferenceService``)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from .request import DeployOptions

ISVC_API_VERSION = "serving.kserve.io/v1beta1"
RUNTIME_API_VERSION = "serving.kserve.io/v1alpha1"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "kfp-finetune"
#: The registered model an object was made for (a label value: see :func:`label_value`).
MODEL_LABEL = "kfp-finetune.opendatahub.io/registered-model"
#: Shows the object in the OpenShift AI dashboard.
DASHBOARD_LABEL = "opendatahub.io/dashboard"
MODEL_FORMAT = "vLLM"
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
#: Storage a served InferenceService can outlive the run with (``pvc://`` of the run's workspace is deleted with it).
DEPLOYABLE_SCHEMES = ("oci", "s3")
#: KServe's own limit leaves room for the predictor suffixes of the generated Deployment and Route names.
MAX_SERVICE_NAME = 45


def label_value(text: str) -> str:
    """``text`` as a Kubernetes label value (63 characters of ``[A-Za-z0-9_.-]``, alphanumeric at both ends)."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value)


def owner_labels(model_name: str) -> dict[str, str]:
    """The labels that mark an object as made by this step for ``model_name``."""
    return {MANAGED_BY_LABEL: MANAGED_BY, MODEL_LABEL: label_value(model_name), DASHBOARD_LABEL: "true"}


def is_owned(obj: dict[str, Any], model_name: str) -> bool:
    """Whether ``obj`` carries this step's ownership labels for ``model_name``."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY and labels.get(MODEL_LABEL) == label_value(model_name)


def service_name(explicit: str, model_name: str) -> str:
    """The InferenceService name: ``deploy_service_name``, else derived from the registered model's name.

    Raises:
        ValueError: The explicit name is not a DNS-1035 label of at most :data:`MAX_SERVICE_NAME` characters, or
            nothing usable can be derived.
    """
    if explicit.strip():
        name = explicit.strip()
        if not _DNS_1035.match(name) or len(name) > MAX_SERVICE_NAME:
            raise ValueError(
                f"deploy_service_name={explicit!r}: must be a DNS-1035 label (lowercase letters, digits, '-', starting "
                f"with a letter) of at most {MAX_SERVICE_NAME} characters"
            )
        return name
    name = re.sub(r"[^a-z0-9-]+", "-", model_name.lower()).strip("-")
    name = re.sub(r"^[^a-z]+", "", name)[:MAX_SERVICE_NAME].rstrip("-")
    if not name:
        raise ValueError(f"model_name={model_name!r} gives no InferenceService name: set deploy_service_name")
    return name


def build_serving_runtime(name: str, namespace: str, image: str, model_name: str) -> dict[str, Any]:
    """The vLLM ``ServingRuntime`` of OpenShift AI's template, labelled as this step's."""
    return {
        "apiVersion": RUNTIME_API_VERSION,
        "kind": "ServingRuntime",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": owner_labels(model_name),
            "annotations": {
                "openshift.io/display-name": "vLLM ServingRuntime for KServe (kfp-finetune)",
                "opendatahub.io/recommended-accelerators": '["nvidia.com/gpu"]',
            },
        },
        "spec": {
            "annotations": {"prometheus.io/port": "8080", "prometheus.io/path": "/metrics"},
            "multiModel": False,
            "supportedModelFormats": [{"name": MODEL_FORMAT, "autoSelect": True}],
            "containers": [
                {
                    "name": "kserve-container",
                    "image": image,
                    "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],  # in both vLLM images
                    "args": ["--port=8080", "--model=/mnt/models", "--served-model-name={{.Name}}"],
                    "env": [{"name": "HF_HOME", "value": "/tmp/hf_home"}],
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                }
            ],
        },
    }


def build_inference_service(
    name: str,
    namespace: str,
    storage_uri: str,
    runtime: str,
    model_name: str,
    gpus: int,
    storage_key: str = "",
    profile: Any = None,
) -> dict[str, Any]:
    """A single-model ``InferenceService`` serving ``storage_uri`` with ``runtime``, labelled for ``model_name``.

    ``name`` is also the served model's name; ``storage_key`` the data connection of an ``s3://`` URI; ``profile`` a
    ``HardwareProfile`` applied by ``hardware_profiles.apply_to_inference_service`` (replacing ``gpus``).
    """
    storage: dict[str, Any] = {"storageUri": storage_uri}
    if urlsplit(storage_uri).scheme == "s3" and storage_key:  # the data connection, as the dashboard writes it
        storage = {"storage": {"key": storage_key, "path": urlsplit(storage_uri).path.lstrip("/")}}
    resources: dict[str, Any] = {"requests": {"cpu": "1", "memory": "8Gi"}, "limits": {"cpu": "4", "memory": "16Gi"}}
    if gpus:
        resources["requests"]["nvidia.com/gpu"] = str(gpus)
        resources["limits"]["nvidia.com/gpu"] = str(gpus)
    isvc = {
        "apiVersion": ISVC_API_VERSION,
        "kind": "InferenceService",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": owner_labels(model_name),
            "annotations": {"openshift.io/display-name": model_name},
        },
        "spec": {
            "predictor": {
                "minReplicas": 1,
                "model": {
                    "modelFormat": {"name": MODEL_FORMAT},
                    "runtime": runtime,
                    **storage,
                    "resources": resources,
                },
            }
        },
    }
    if profile is not None:
        from components._common.hardware_profiles import apply_to_inference_service

        return apply_to_inference_service(isvc, profile)
    return isvc


def check_deploy_options(options: DeployOptions, model_name: str, registry_on: bool) -> None:
    """Checks the deploy options before anything is pushed, registered or deployed.

    Raises:
        ValueError: One line naming the parameter, its value and the rule.
    """
    if not options.inference_service:
        return
    if not registry_on:
        raise ValueError("deploy_inference_service needs registry_address: only a registered model is deployed")
    service_name(options.service_name, model_name)
    if options.timeout_seconds < 1 or options.gpus < 0:
        raise ValueError(
            f"deploy_timeout_seconds={options.timeout_seconds} must be >= 1 and deploy_gpus={options.gpus} >= 0"
        )
    if not options.runtime.strip():
        raise ValueError("deploy_runtime is empty: name the ServingRuntime to use (e.g. vllm-runtime)")


def check_deployable(options: DeployOptions, uri: str) -> None:
    """With deploy on, ``uri`` must be ``oci://`` or ``s3://`` storage a service outlives the run with (ValueError)."""
    if options.inference_service and urlsplit(uri).scheme not in DEPLOYABLE_SCHEMES:
        raise ValueError(
            f"deploy_inference_service: the model's URI {uri!r} is not oci:// or s3:// storage that a service "
            "outlives the run with; set modelcar_uri (or s3_upload_prefix)"
        )
