"""The doctor's Kubernetes reads, through the training step's client layer: short timeouts, at most one retry."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from components._common import kube_auth as cluster_auth
from components.training.finetuning.cluster import api as cluster_api
from components.training.finetuning.cluster.errors import JobError

#: (connect, read) seconds of one API request (the Kubernetes client honours ints and 2-tuples).
REQUEST_TIMEOUT = (5, 15)
API_ATTEMPTS = 2


class Forbidden(Exception):
    """The identity doctor runs as may not make this call (HTTP 403); the message is the API's."""


class ApiUnavailable(Exception):
    """The call failed for another reason (5xx through the retry, a connection error, an unexpected 4xx)."""


def connect() -> tuple[Any, str]:
    """A ``kubernetes.client.ApiClient`` as the training step builds it (or from the kubeconfig), and its source.

    Raises:
        components._common.kube_auth.KubeAuthError: No usable credentials.
    """
    source = (
        f"{cluster_auth.SERVER_URL_ENV}/{cluster_auth.AUTH_TOKEN_ENV}"
        if os.environ.get(cluster_auth.SERVER_URL_ENV)
        else "service account"
        if Path(cluster_auth.SERVICE_ACCOUNT_DIR, "token").is_file()
        else "kubeconfig"
    )
    return cluster_auth.load_api_client(kubeconfig=True), source


def default_namespace() -> str:
    """The pod's namespace, else the kubeconfig's current context's (``""``: none)."""
    from components._common.namespace import pod_namespace

    namespace = pod_namespace()
    if namespace or os.environ.get(cluster_auth.SERVER_URL_ENV):
        return namespace
    from kubernetes import config

    try:
        _, current = config.list_kube_config_contexts(config_file=os.environ.get("KUBECONFIG"))
    except (config.ConfigException, OSError):
        return ""
    return str(((current or {}).get("context") or {}).get("namespace") or "")


class Cluster:
    """Reads one namespace's (the pipeline's) view of the cluster through ``api_client``; answers plain dicts."""

    def __init__(self, api_client: Any, namespace: str) -> None:
        import time

        from kubernetes import client

        connect, read = REQUEST_TIMEOUT
        self.api = cluster_api.Api(
            api_client, time.sleep, lambda line: None, API_ATTEMPTS, connect_timeout=connect, read_timeout=read
        )
        self.namespace = namespace
        self.api_client = api_client
        self.storage = client.StorageV1Api(api_client)
        self.authorization = client.AuthorizationV1Api(api_client)

    def read(self, what: str, func: Callable[..., Any], *args: Any, missing_ok: bool = False, **kwargs: Any) -> Any:
        """The JSON answer of a call; ``None`` on 404 when ``missing_ok``; :class:`Forbidden` on 403."""
        from kubernetes.client import ApiException

        try:
            response = self.api.call(what, func, *args, _preload_content=False, **kwargs)
        except ApiException as error:
            if error.status == 403:
                raise Forbidden(cluster_api.api_message(error)) from None
            if error.status == 404 and missing_ok:
                return None
            raise ApiUnavailable(f"{what}: {cluster_api.api_message(error)}") from None
        except JobError as error:
            raise ApiUnavailable(str(error)) from None
        return json.loads(response.data)

    def version(self) -> dict[str, Any]:
        """``GET /version`` (open to every authenticated user; ``VersionApi`` asks for ``/version/``)."""
        client = self.api.core.api_client
        return self.read(
            "reading the server version",
            client.call_api,
            "/version",
            "GET",
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )

    def allowed(self, group: str, resource: str, verb: str, namespace: str | None) -> bool:
        """Whether this identity may ``verb`` ``resource`` (``pods/log``: a subresource) — a SelfSubjectAccessReview."""
        from kubernetes import client

        plural, _, subresource = resource.partition("/")
        attributes = client.V1ResourceAttributes(
            group=group, resource=plural, subresource=subresource or None, verb=verb, namespace=namespace
        )
        body = client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes)
        )
        answer = self.read(
            f"reviewing access to {verb} {resource}",
            self.authorization.create_self_subject_access_review,
            body,
            field_validation="Strict",
        )
        return bool((answer.get("status") or {}).get("allowed"))

    def training_runtime(self, name: str, kind: str, namespace: str) -> dict[str, Any] | None:
        """A ClusterTrainingRuntime, or a TrainingRuntime in ``namespace``; ``None`` when it does not exist."""
        from components.training.finetuning.cluster.runtimes import RUNTIME_PLURALS
        from components.training.finetuning.manifests.spec import API_GROUP, API_VERSION

        what, custom = f"reading {kind} {name!r}", self.api.custom
        if kind == "ClusterTrainingRuntime":
            args = (custom.get_cluster_custom_object, API_GROUP, API_VERSION, RUNTIME_PLURALS[kind], name)
        else:
            args = (custom.get_namespaced_custom_object, API_GROUP, API_VERSION, namespace, RUNTIME_PLURALS[kind], name)
        return self.read(what, *args, missing_ok=True)

    def storage_class(self, name: str) -> dict[str, Any] | None:
        """The StorageClass, or ``None`` when it does not exist."""
        return self.read(f"reading storage class {name!r}", self.storage.read_storage_class, name, missing_ok=True)

    def storage_classes(self) -> list[dict[str, Any]]:
        """Every StorageClass."""
        return self.read("listing storage classes", self.storage.list_storage_class).get("items") or []

    def nodes(self, label_selector: str = "") -> list[dict[str, Any]]:
        """The nodes (matching ``label_selector``)."""
        answer = self.read("listing nodes", self.api.core.list_node, label_selector=label_selector)
        return answer.get("items") or []

    def quotas(self) -> list[dict[str, Any]]:
        """The namespace's ResourceQuotas."""
        what = f"listing resource quotas in {self.namespace}"
        return self.read(what, self.api.core.list_namespaced_resource_quota, self.namespace).get("items") or []

    def secret_keys(self, name: str) -> list[str] | None:
        """The key names of a secret (``None``: it does not exist); the values are dropped unread."""
        what = f"reading secret {name!r}"
        secret = self.read(what, self.api.core.read_namespaced_secret, name, self.namespace, missing_ok=True)
        if secret is None:
            return None
        keys = sorted({*(secret.get("data") or {}), *(secret.get("stringData") or {})})
        secret.clear()
        return keys
