"""Reaching the KFP API: the connection (host, token, TLS, timeout), the health check, errors.

Every request carries a ``(connect, read)`` timeout (``_request_timeout``: a float is silently ignored) and is tried
once. ``kfp.Client`` passes no timeout (measured in docs/running.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pipelines.kfp_api.arguments import read_option_file

if TYPE_CHECKING:
    import kfp_server_api


LOGGER = logging.getLogger("pipelines.kfp_api")

HOST_ENV = "KFP_HOST"
TOKEN_ENV = "KFP_TOKEN"
HEALTH_ACTION = "check health (GET /apis/v2beta1/healthz)"
#: The default ``--request-timeout``, and the most a connect may take.
DEFAULT_TIMEOUT_SECONDS = 60.0
CONNECT_TIMEOUT_SECONDS = 10.0
_ERROR_TEXT_MAX = 500
_STATUS_HINTS = {
    401: " (the bearer token is missing, expired or wrong: refresh it with `oc whoami -t`)",
    403: " (the token's user may not do this: check its role in the project/namespace)",
    404: " (check that --host is the pipelines API route, not the dashboard URL)",
}


class KfpApiError(RuntimeError):
    """The KFP API could not be reached, or refused a request."""


@dataclass(frozen=True, repr=False)
class Connection:
    """Where the KFP API is (the Data Science Pipelines route) and how to authenticate to it.

    ``token`` (``oc whoami -t``) is never shown by ``repr``; ``timeout_seconds`` bounds each request's answer
    (connecting: at most 10 s).
    """

    host: str
    token: str = ""
    verify_ssl: bool = True
    ca_bundle: str = ""
    namespace: str = ""
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS

    @property
    def request_timeout(self) -> tuple[float, float]:
        """The ``(connect, read)`` timeout of every request."""
        return (min(CONNECT_TIMEOUT_SECONDS, self.timeout_seconds), self.timeout_seconds)

    def __repr__(self) -> str:
        """The connection with the token hidden."""
        token = "<hidden>" if self.token else "<none>"
        return (
            f"Connection(host={self.host!r}, token={token}, verify_ssl={self.verify_ssl}, "
            f"ca_bundle={self.ca_bundle!r}, namespace={self.namespace!r}, timeout_seconds={self.timeout_seconds:g})"
        )


def connection_from_options(
    host: str = "",
    token_file: str = "",
    insecure_skip_tls_verify: bool = False,
    ca_bundle: str = "",
    namespace: str = "",
    environ: Mapping[str, str] | None = None,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
) -> Connection:
    """A :class:`Connection` from the CLI options and ``KFP_HOST``/``KFP_TOKEN``; a :class:`ValueError` if bad."""
    if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, int | float) or timeout_seconds <= 0:
        raise ValueError(
            f"request timeout {timeout_seconds!r} (--request-timeout) must be a positive number of seconds"
        )
    environ = os.environ if environ is None else environ
    host, host_source = (host.strip(), "--host") if host.strip() else (environ.get(HOST_ENV, "").strip(), HOST_ENV)
    if not host:
        raise ValueError(
            f"no KFP API host: pass --host URL or set {HOST_ENV} (on OpenShift AI: the Data Science Pipelines "
            "route, e.g. https://ds-pipeline-dspa-<namespace>.apps.<cluster>)"
        )
    url = urlsplit(host)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ValueError(f"KFP host {host!r} (from {host_source}) must be an http:// or https:// URL")
    if insecure_skip_tls_verify and ca_bundle:
        raise ValueError("--insecure-skip-tls-verify and --ca-bundle contradict each other: pass one of them")
    if ca_bundle and not Path(ca_bundle).is_file():
        raise ValueError(f"CA bundle {ca_bundle!r} (--ca-bundle) is not a readable file")
    token = environ.get(TOKEN_ENV, "").strip()
    if token_file:  # the errors never quote the file's content
        token = read_option_file(token_file, "the bearer token file", "--token-file").strip()
        if not token:
            raise ValueError(
                f"the bearer token file {token_file!r} (--token-file) is empty: write it with `oc whoami -t`"
            )
        if any(character.isspace() for character in token):
            raise ValueError(
                f"the bearer token file {token_file!r} (--token-file) holds more than one word: it must hold only the "
                "token, as `oc whoami -t` prints it"
            )
    if token and url.scheme == "http":
        LOGGER.warning("the bearer token is sent unencrypted to %s: use https:// outside a local test", host)
    return Connection(
        host=host.rstrip("/"),
        token=token,
        verify_ssl=not insecure_skip_tls_verify,
        ca_bundle=str(Path(ca_bundle).resolve()) if ca_bundle else "",
        namespace=namespace.strip(),
        timeout_seconds=float(timeout_seconds),
    )


def api_configuration(connection: Connection) -> kfp_server_api.Configuration:
    """The ``kfp_server_api.Configuration`` of a connection (one try per request)."""
    import kfp_server_api

    from components._common.retry import single_try_transport

    configuration = kfp_server_api.Configuration(host=connection.host)
    configuration.verify_ssl = connection.verify_ssl
    configuration.ssl_ca_cert = connection.ca_bundle or None
    if connection.token:
        configuration.api_key["authorization"] = connection.token
        configuration.api_key_prefix["authorization"] = "Bearer"
    configuration.retries = single_try_transport()
    return configuration


def check_health(connection: Connection, timeout: tuple[float, float] | None = None) -> dict:
    """The answer of ``GET /apis/v2beta1/healthz`` (``{"multi_user": false}``); ``timeout`` overrides the connection's.

    Raises:
        KfpApiError: Unreachable, refused, or an answer that is not a JSON object (not a KFP API).
    """
    import kfp_server_api

    with kfp_server_api.ApiClient(api_configuration(connection)) as client, api_errors(connection, HEALTH_ACTION):
        response = kfp_server_api.HealthzServiceApi(client).healthz_service_get_healthz(
            _preload_content=False, _request_timeout=timeout or connection.request_timeout
        )
    with contextlib.suppress(ValueError):
        answer = json.loads(response.data)
        if isinstance(answer, dict):
            return answer
    content_type = response.headers.get("Content-Type", "unknown")
    raise KfpApiError(
        f"KFP API at {connection.host}: {HEALTH_ACTION} answered {content_type}, not a KFP health report: check that "
        "--host is the pipelines API route (ds-pipeline-...), not the dashboard, and that the token is accepted"
    )


@contextlib.contextmanager
def api_errors(connection: Connection, action: str) -> Iterator[None]:
    """Turns ``kfp_server_api``/urllib3 failures into a :class:`KfpApiError` naming ``action``, secrets masked."""
    import kfp_server_api
    import urllib3

    try:
        yield
    except kfp_server_api.ApiException as error:
        body = error.body.decode("utf-8", "replace") if isinstance(error.body, bytes) else str(error.body or "")
        with contextlib.suppress(ValueError, AttributeError):  # a google.rpc.Status JSON body
            parsed = json.loads(body)
            body = str(parsed.get("message") or parsed.get("error_message") or parsed.get("error") or body)
        message = body[:_ERROR_TEXT_MAX] or error.reason or ""
        hint = "" if error.status == 404 and action != HEALTH_ACTION else _STATUS_HINTS.get(error.status, "")
        text = f"KFP API at {connection.host}: {action} failed: HTTP {error.status} {error.reason}: {message}{hint}"
        raise KfpApiError(_redact(text, connection.token)) from None
    except urllib3.exceptions.HTTPError as error:
        reason = getattr(error, "reason", None) or error
        hint = ""
        if isinstance(reason, urllib3.exceptions.SSLError) or "CERTIFICATE" in str(reason).upper():
            hint = "; to trust the server's certificate pass --ca-bundle FILE (or --insecure-skip-tls-verify)"
        elif isinstance(reason, urllib3.exceptions.NameResolutionError):
            hint = "; the host name does not resolve: check --host"
        elif isinstance(reason, urllib3.exceptions.NewConnectionError):  # before TimeoutError: urllib3 subclasses it
            hint = "; the connection was refused at once: check --host and its port, and that the KFP API is running"
        elif isinstance(reason, urllib3.exceptions.TimeoutError):
            hint = (
                f"; no answer within {connection.timeout_seconds:g} s: check --host and the route, or allow longer "
                "with --request-timeout"
            )
        text = f"cannot reach the KFP API at {connection.host} to {action}: {reason}{hint}"
        raise KfpApiError(_redact(text, connection.token)) from None


def _redact(text: str, token: str) -> str:
    from components._common.masking import mask_text

    return mask_text(text, extra=[token] if token else ())
