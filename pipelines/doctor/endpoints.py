"""The Model Registry (when an address is set) and the KFP API (when a host is given) answer one probe each."""

from __future__ import annotations

from urllib.parse import urlsplit

from pipelines.doctor import facts as keys
from pipelines.doctor.facts import RunValues
from pipelines.doctor.report import Check, fail, ok, warn

#: (connect, read) seconds of one probe (kfp_server_api ignores a float).
PROBE_TIMEOUT = (5, 10)
IN_CLUSTER_SUFFIXES = (".svc", ".svc.cluster.local", ".cluster.local")


def check_registry(values: RunValues, ca_bundle: str = "") -> Check:
    """The Model Registry at the run's address answers over HTTP(S), TLS verified (any answer, 401 included, is OK)."""
    import certifi
    import urllib3

    from components.deployment.kubeflow_model_registry.registration import check_registration_names
    from components.deployment.kubeflow_model_registry.registry_endpoint import (
        API_ROOT,
        API_VERSIONS,
        registry_base_url,
    )

    address = str(values.get(keys.REGISTRY_ADDRESS) or "").strip()
    setting = values.label(keys.REGISTRY_ADDRESS)
    if not address:
        return ok("endpoints", f"Model Registry: no address set ({setting}); registration will be skipped")
    names = {"model_name": keys.REGISTRY_MODEL_NAME, "model_version": keys.REGISTRY_MODEL_VERSION}
    try:
        check_registration_names(address, *(str(values.get(key) or "") for key in names.values()))
    except ValueError as error:
        wrong = next((key for name, key in names.items() if f"{name}=" in str(error)), keys.REGISTRY_MODEL_NAME)
        return fail("endpoints", f"Model Registry: {error}", f"fix {values.label(wrong)} (or leave it empty)")
    is_secure = values.get(keys.REGISTRY_IS_SECURE) not in (False, "false", "False")
    try:
        base = registry_base_url(address, values.integer(keys.REGISTRY_PORT), is_secure)
    except ValueError as error:
        return fail("endpoints", f"Model Registry address: {error}", f"fix {setting}")
    timeout = urllib3.Timeout(connect=PROBE_TIMEOUT[0], read=PROBE_TIMEOUT[1])
    verified = {"cert_reqs": "CERT_REQUIRED", "ca_certs": ca_bundle or certifi.where()}
    verify = verified if is_secure and base.startswith("https://") else {"cert_reqs": "CERT_NONE"}
    pool = urllib3.PoolManager(retries=False, timeout=timeout, **verify)
    try:
        for version in API_VERSIONS:
            url = f"{base}{API_ROOT}{version}/registered_models?pageSize=1"
            status = pool.request("GET", url, preload_content=True).status
            if status != 404:
                break
    except urllib3.exceptions.SSLError as error:
        what = f"Model Registry at {base}: TLS verification failed ({error.__class__.__name__})"
        return fail(
            "endpoints", what, "pass --ca-bundle FILE with the CA that signed it, or fix the route's certificate"
        )
    except urllib3.exceptions.HTTPError as error:
        in_cluster = (urlsplit(base).hostname or "").endswith(IN_CLUSTER_SUFFIXES)
        if in_cluster and isinstance(error, urllib3.exceptions.NameResolutionError):
            what = f"Model Registry at {base}: an in-cluster address, not resolvable from here"
            remedy = "run doctor in a pod of the namespace to check it, or use the registry's route"
            return warn("endpoints", what, remedy)
        remedy = (
            f"check that the Model Registry is installed and running, that {setting} and "
            f"{values.label(keys.REGISTRY_PORT)} are right, and that network policies allow the namespace"
        )
        reason = getattr(error, "reason", None) or error
        return fail("endpoints", f"Model Registry at {base} is unreachable: {reason}", remedy)
    tls = "" if base.startswith("https://") and is_secure else " (TLS not verified: plain HTTP or is_secure=false)"
    if status >= 500:
        return warn(
            "endpoints", f"Model Registry at {base} answers HTTP {status}", "check the registry's pods and logs"
        )
    if status == 404:
        what = f"Model Registry at {base}: no Model Registry API under {API_ROOT}{{{', '.join(API_VERSIONS)}}}"
        return warn("endpoints", what, f"check {setting}: it must be the registry's REST route/service")
    return ok("endpoints", f"Model Registry at {base} answers (HTTP {status}){tls}")


def check_kfp(host: str, token_file: str = "", ca_bundle: str = "", namespace: str = "") -> Check:
    """The KFP API at ``host`` reports healthy (``GET /apis/v2beta1/healthz``)."""
    from pipelines import kfp_api

    connection = kfp_api.connection_from_options(
        host=host, token_file=token_file, ca_bundle=ca_bundle, namespace=namespace
    )
    remedy = (
        "check that the pipeline server is running (OpenShift AI: Pipelines > Configure pipeline server) and --kfp-host"
    )
    try:
        answer = kfp_api.check_health(connection, timeout=PROBE_TIMEOUT)
    except kfp_api.KfpApiError as error:
        return fail("endpoints", str(error), remedy)
    multi_user = answer.get("multi_user", answer.get("multiUser"))
    detail = f", multi_user={str(multi_user).lower()}" if multi_user is not None else ""
    return ok("endpoints", f"KFP API at {connection.host} is healthy{detail}")
