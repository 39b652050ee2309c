"""The registry step's KServe deploy, when the run turns it on: CRDs, permissions, and a model that outlives the run."""

from __future__ import annotations

from components.deployment.kubeflow_model_registry import kserve_deploy
from components.training.finetuning.cluster.discovery import resource_served
from components.training.finetuning.cluster.errors import JobError
from pipelines.doctor import facts as keys
from pipelines.doctor.cluster import ApiUnavailable, Cluster, Forbidden
from pipelines.doctor.facts import RunValues
from pipelines.doctor.report import Check, fail, ok, warn

DEPLOY = ("registry", "deploy_inference_service")
DEPLOY_NAMESPACE = ("registry", "deploy_namespace")
MODELCAR_URI = ("registry", "modelcar_uri")
MODEL_URI = ("registry", "model_uri")
CRDS = (("v1beta1", "inferenceservices"), ("v1alpha1", "servingruntimes"))
RBAC = "apply components/deployment/kubeflow_model_registry/rbac.yaml (edit its namespace and service account)"


def check_serving(cluster: Cluster, values: RunValues) -> list[Check]:
    """The deploy's CRDs, permissions and storage; ``[]`` when the run does not deploy."""
    if str(values.get(DEPLOY)).lower() not in ("true", "1"):
        return []
    namespace = values.get(DEPLOY_NAMESPACE) or cluster.namespace
    stored = [values.get(key) or "" for key in (MODELCAR_URI, keys.S3_UPLOAD_PREFIX, MODEL_URI)]
    checks = []
    if not any(uri.startswith(("oci://", "s3://")) for uri in stored):
        what = "deploy_inference_service is on but the model is not published as a modelcar nor uploaded to s3://"
        checks.append(fail("serving", what, f"set {values.label(MODELCAR_URI)} to oci://registry/repository:tag"))
    try:
        missing = [
            f"{kserve_deploy.GROUP}/{version} {plural}"
            for version, plural in CRDS
            if not resource_served(cluster.api, kserve_deploy.GROUP, version, plural)
        ]
        denied = [
            f"{verb} {resource}"
            for group, resource, verb in sorted(kserve_deploy.API_PERMISSIONS)
            if not cluster.allowed(group, resource, verb, namespace)
        ]
    except (Forbidden, ApiUnavailable, JobError) as error:
        return [*checks, warn("serving", f"could not check KServe: {error}", "check the API server")]
    if missing:
        what = f"KServe is not installed: {', '.join(missing)} not served, so the model cannot be deployed"
        checks.append(fail("serving", what, "enable KServe (OpenShift AI: the single-model serving platform)"))
    if denied:
        what = f"the identity doctor runs as may not {', '.join(denied)} (serving.kserve.io) in namespace {namespace}"
        checks.append(fail("serving", what, RBAC))
    if not missing and not denied:
        what = f"KServe serves InferenceService and ServingRuntime; all deploy calls allowed in namespace {namespace}"
        checks.append(ok("serving", what))
    return checks
