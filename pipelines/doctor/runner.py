"""Every doctor check against one compiled pipeline, one run's parameters and one namespace."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.doctor import facts as keys
from pipelines.doctor.cluster import ApiUnavailable, Cluster, Forbidden, connect, default_namespace
from pipelines.doctor.endpoints import check_kfp, check_registry
from pipelines.doctor.facts import RunValues, read_package
from pipelines.doctor.gpus import check_gpu_memory, check_gpus
from pipelines.doctor.hardware import check_hardware_profiles
from pipelines.doctor.images import check_images_in_namespace
from pipelines.doctor.report import Check, Report, fail
from pipelines.doctor.secret_mounts import check_secrets
from pipelines.doctor.serving import check_serving
from pipelines.doctor.storage import check_storage
from pipelines.doctor.training import check_launcher, check_permissions, check_trainer_api


def _cluster_checks(cluster: Cluster, values: RunValues) -> list[Check]:
    """The checks that read the cluster, in order; the launcher the first resolves steers the others."""
    checks, launcher = check_launcher(cluster, values)
    if all(check.status != "FAIL" for check in checks):
        checks += check_trainer_api(cluster, values, launcher)
    checks += check_permissions(cluster, values, launcher)
    checks += check_storage(cluster, values.facts)
    checks += check_secrets(cluster, values)
    checks += check_gpus(cluster, values, launcher)
    if launcher != "local":
        checks += check_gpu_memory(cluster, values)
    checks += check_serving(cluster, values)
    checks += check_hardware_profiles(cluster, values)
    return checks


def _reachable(cluster: Cluster, host: str, source: str) -> Check | None:
    """A FAIL when the API server does not answer ``GET /version`` (the remedy fits the credentials used)."""
    from components._common.kube_auth import AUTH_TOKEN_ENV, SERVER_URL_ENV

    from_env = source.startswith(SERVER_URL_ENV)
    try:
        cluster.version()
    except Forbidden as error:
        remedy = f"set {AUTH_TOKEN_ENV} to a valid token (`oc whoami -t`)" if from_env else _LOGIN
        return fail("cluster", f"the Kubernetes API at {host} refuses these credentials: {error}", remedy)
    except ApiUnavailable as error:
        remedy = (
            f"check {SERVER_URL_ENV} (now {host}): the API server's URL and port, e.g. `oc whoami --show-server`"
            if from_env
            else _LOGIN
        )
        return fail("cluster", f"the Kubernetes API at {host} does not answer: {error}", remedy)
    return None


_LOGIN = (
    "log in (`oc login`), or set KUBERNETES_SERVER_URL and KUBERNETES_AUTH_TOKEN (as in the kubernetes-credentials "
    "secret)"
)


def run_doctor(
    package: str | Path,
    arguments: Mapping[str, Any],
    *,
    namespace: str = "",
    kfp_host: str = "",
    token_file: str = "",
    ca_bundle: str = "",
    image_check: bool = True,
    docker_config: Mapping | None = None,
) -> Report:
    """Runs every check of one run of the compiled ``package`` with ``arguments`` (by dashboard name).

    Args:
        package: The compiled pipeline YAML.
        arguments: The run's arguments.
        namespace: The pipeline's namespace (``""``: the pod's, or the kubeconfig context's).
        kfp_host: The KFP API URL to health-check (``""``: not checked).
        token_file: A file with the KFP bearer token (default: ``KFP_TOKEN``).
        ca_bundle: A CA bundle for the Model Registry and KFP API certificates.
        image_check: Check that the namespace can pull every step's image.
        docker_config: A Docker config.json with registry credentials (``--pull-secret-file``).

    Raises:
        ValueError: Bad run arguments, no namespace, or a bad ``kfp_host`` / ``token_file``.
    """
    from components._common.kube_auth import KubeAuthError

    values = RunValues(read_package(package), arguments)
    context: dict[str, Any] = {"pipeline": values.facts.name}
    checks: list[Check] = []
    try:
        api_client, source = connect()
    except KubeAuthError as error:
        checks.append(fail("cluster", f"cannot connect to Kubernetes: {error}", _LOGIN))
        if image_check:
            checks += check_images_in_namespace(None, values.facts.spec, docker_config)
    else:
        namespace = namespace or default_namespace()
        if not namespace:
            raise ValueError("no namespace: pass --namespace NS (your Data Science Project)")
        host = api_client.configuration.host
        job_namespace = values.get(keys.JOB_NAMESPACE) or namespace
        context.update(namespace=namespace, training_namespace=job_namespace, kubernetes=host, credentials=source)
        cluster = Cluster(api_client, namespace)
        try:
            problem = _reachable(cluster, host, source)
            checks += [problem] if problem else _cluster_checks(cluster, values)
            if image_check and not problem:
                checks += check_images_in_namespace(cluster, values.facts.spec, docker_config)
        finally:
            api_client.close()
    checks.append(check_registry(values, ca_bundle))
    if kfp_host:
        checks.append(check_kfp(kfp_host, token_file, ca_bundle, namespace))
    return Report(tuple(checks), context)
