"""The ``model_registry`` component: registers the trained model, with lineage, in a Kubeflow Model Registry."""

from typing import NamedTuple

from kfp import dsl

from components._common.runtime import runtime_component
from components.deployment.kubeflow_model_registry.parameter_docs import PARAMETER_DOCS


@runtime_component(parameter_docs=PARAMETER_DOCS)
def model_registry(
    model: dsl.Input[dsl.Model],
    summary: dsl.Output[dsl.Markdown],
    registry_address: str = "",
    registry_port: int = 443,
    model_name: str = "",
    model_version: str = "",
    author: str = "",
    description: str = "",
    model_format_name: str = "pytorch",
    model_format_version: str = "1",
    eval_metrics: dsl.Input[dsl.Metrics] = None,
    train_metrics: dsl.Input[dsl.Metrics] = None,
    dataset: dsl.Input[dsl.Dataset] = None,
    min_metric_name: str = "",
    min_metric_value: float = 0.0,
    eval_results: dsl.Input[dsl.Artifact] = None,
    min_improvement_metric: str = "",
    min_improvement: float = 0.0,
    max_regression: float = -1.0,
    max_regression_relative: bool = False,
    model_uri: str = "",
    s3_upload_prefix: str = "",
    is_secure: bool = True,
    ca_bundle_path: str = "",
    allow_token_over_http: bool = False,
    storage_key: str = "",
    pipeline_run_id: str = dsl.PIPELINE_JOB_ID_PLACEHOLDER,
    pipeline_run_name: str = dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
    modelcar_uri: str = "",
    modelcar_base_image: str = "registry.access.redhat.com/ubi9/ubi-micro:latest",
    modelcar_lora_weights: str = "as_trained",
    modelcar_insecure: bool = False,
    deploy_inference_service: bool = False,
    deploy_service_name: str = "",
    deploy_namespace: str = "",
    deploy_runtime: str = "vllm-runtime",
    deploy_runtime_image: str = "docker.io/vllm/vllm-openai:v0.11.0",
    deploy_gpus: int = 1,
    deploy_timeout_seconds: int = 900,
    deploy_hardware_profile: str = "",
    pvc_path: str = "",
) -> NamedTuple(
    "Outputs",
    [("status", str), ("model_id", str), ("version_id", str), ("model_uri", str), ("endpoint_url", str)],
):
    """Registers ``model`` (version + artifact + lineage) idempotently; skips without a registry, gates on metrics.

    The bearer token never comes from a parameter (README.md: *Environment*).

    Returns:
        status (``registered``, ``already_registered``, ``gated_out`` or ``skipped``), model_id and version_id ("" when
        not registered), model_uri (the registered or published URI) and endpoint_url (the served endpoint, or "").
    """
    arguments = dict(locals())  # every argument by name, taken before the imports below add names
    from components._common.files import with_extension
    from components.deployment.kubeflow_model_registry.request import model_registry_request
    from components.deployment.kubeflow_model_registry.run import component_outputs, run_model_registration

    result = run_model_registration(model_registry_request(arguments), with_extension(summary, ".md"))
    return component_outputs(result)
