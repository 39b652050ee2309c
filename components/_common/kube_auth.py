"""Kubernetes credentials of ``train_model`` and the registry's deploy: the secret's env, else the service account."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from components._common.namespace import SERVICE_ACCOUNT_DIR

#: Env vars of the ``kubernetes-credentials`` secret (RHOAI guide) for out-of-cluster or cross-cluster access.
SERVER_URL_ENV = "KUBERNETES_SERVER_URL"
AUTH_TOKEN_ENV = "KUBERNETES_AUTH_TOKEN"


class KubeAuthError(ValueError):
    """No usable Kubernetes credentials (a setting to fix: the message says which)."""


def load_api_client(
    verify_ssl: bool = True,
    ca_bundle: str = "",
    *,
    environ: Mapping[str, str] | None = None,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
    log: Callable[[str], None] = print,
    kubeconfig: bool = False,
) -> Any:
    """A ``kubernetes.client.ApiClient``: the secret's env when set, else the service account, else the kubeconfig.

    The kubeconfig's current context only with ``kubeconfig``; ``verify_ssl=False`` is a logged opt-out.

    Raises:
        KubeAuthError: One env var without the other, a non-http(s) URL, no credentials at all, or no ``ca_bundle``.
    """
    from kubernetes import client
    from kubernetes.config.incluster_config import InClusterConfigLoader

    env = os.environ if environ is None else environ
    server, token = env.get(SERVER_URL_ENV, "").strip(), env.get(AUTH_TOKEN_ENV, "").strip()
    configuration = client.Configuration()
    if server or token:
        if not (server and token):
            have, missing = (SERVER_URL_ENV, AUTH_TOKEN_ENV) if server else (AUTH_TOKEN_ENV, SERVER_URL_ENV)
            raise KubeAuthError(
                f"{have} is set but {missing} is not: set both (kubernetes-credentials secret) or neither"
            )
        if not server.startswith(("https://", "http://")):
            raise KubeAuthError(f"{SERVER_URL_ENV}={server!r}: must be an http(s):// URL of the API server")
        configuration.host = server.rstrip("/")
        configuration.api_key = {"authorization": token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
    else:
        token_file = Path(service_account_dir) / "token"
        if token_file.is_file():
            loader = InClusterConfigLoader(
                token_filename=str(token_file), cert_filename=str(Path(service_account_dir) / "ca.crt"), environ=env
            )
            loader.load_and_set(configuration)
        elif kubeconfig:
            from kubernetes import config

            try:
                config.load_kube_config(config_file=os.environ.get("KUBECONFIG"), client_configuration=configuration)
            except (config.ConfigException, OSError) as error:
                raise KubeAuthError(
                    f"no Kubernetes credentials: {SERVER_URL_ENV} / {AUTH_TOKEN_ENV} are not set, no service account "
                    f"token at {token_file}, and no usable kubeconfig ({error})"
                ) from None
        else:
            raise KubeAuthError(
                f"no Kubernetes credentials: no service account token at {token_file} and {SERVER_URL_ENV} / "
                f"{AUTH_TOKEN_ENV} are not set (mount the kubernetes-credentials secret as env, or run in a pod)"
            )
    configuration.verify_ssl = verify_ssl
    if ca_bundle:
        if not Path(ca_bundle).is_file():
            raise KubeAuthError(f"ca_bundle={ca_bundle!r}: no such file")
        configuration.ssl_ca_cert = ca_bundle
    if not verify_ssl:
        log(f"WARNING: TLS certificate verification of {configuration.host} is disabled (verify_ssl=False)")
    return client.ApiClient(configuration)
