"""``kube_auth.load_api_client``: the credentials secret's env (URL checked, token never logged), else the service
account (its CA, or a CA bundle), TLS opt-out logged; each misconfiguration is one clear error."""

import pytest

from components._common.kube_auth import KubeAuthError, load_api_client
from tests.harness.follow_doubles import Log

NS = "team-a"


def test_token_from_env_reaches_the_api_and_never_the_log(kube_api):
    log = Log()
    api_client = load_api_client(
        environ={"KUBERNETES_SERVER_URL": kube_api.url, "KUBERNETES_AUTH_TOKEN": "sha256~s3cr3t"}, log=log
    )
    from kubernetes import client

    client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", NS, "trainjobs"
    )
    assert kube_api.emulator._requests[-1].headers["Authorization"] == "Bearer sha256~s3cr3t"
    assert api_client.configuration.verify_ssl is True and log == []
    insecure = load_api_client(
        False, environ={"KUBERNETES_SERVER_URL": "https://api.x:6443", "KUBERNETES_AUTH_TOKEN": "t"}, log=log
    )
    assert insecure.configuration.verify_ssl is False
    assert log == ["WARNING: TLS certificate verification of https://api.x:6443 is disabled (verify_ssl=False)"]
    assert "s3cr3t" not in "".join(log)


def test_in_cluster_service_account_and_ca_bundle(tmp_path):
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    bundle = tmp_path / "bundle.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    environ = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    api_client = load_api_client(environ=environ, service_account_dir=str(tmp_path))
    configuration = api_client.configuration
    assert configuration.host == "https://10.0.0.1:443"
    assert configuration.get_api_key_with_prefix("authorization").lower() == "bearer sa-token"
    assert configuration.ssl_ca_cert == str(tmp_path / "ca.crt") and configuration.verify_ssl
    custom = load_api_client(ca_bundle=str(bundle), environ=environ, service_account_dir=str(tmp_path))
    assert custom.configuration.ssl_ca_cert == str(bundle)


@pytest.mark.parametrize(
    ("environ", "kwargs", "message"),
    [
        ({"KUBERNETES_SERVER_URL": "https://x"}, {}, "KUBERNETES_SERVER_URL is set but KUBERNETES_AUTH_TOKEN is not"),
        ({"KUBERNETES_AUTH_TOKEN": "t"}, {}, "KUBERNETES_AUTH_TOKEN is set but KUBERNETES_SERVER_URL is not"),
        ({"KUBERNETES_SERVER_URL": "api.x:6443", "KUBERNETES_AUTH_TOKEN": "t"}, {}, "must be an http"),
        ({}, {}, "no Kubernetes credentials"),
        (
            {"KUBERNETES_SERVER_URL": "https://x", "KUBERNETES_AUTH_TOKEN": "t"},
            {"ca_bundle": "/nope.pem"},
            "no such file",
        ),
    ],
)
def test_auth_errors_are_clear(tmp_path, environ, kwargs, message):
    with pytest.raises(KubeAuthError, match=message):
        load_api_client(environ=environ, service_account_dir=str(tmp_path), **kwargs)
