"""The connection to a Model Registry: address, TLS, bearer token, API version detection and retries.

Requests go through the ``model-registry`` Python client's API layer (``model_registry.core.ModelRegistryAPIClient``,
generated from the registry's OpenAPI spec). Clients >= 0.3.12 speak ``/api/model_registry/v1``; registries older
than that serve the same operations under ``/api/model_registry/v1alpha3`` only. :func:`connect` probes ``v1`` first,
falls back to ``v1alpha3`` when the server has no ``v1`` API, and reports which one it used.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from components._common.masking import register_secret
from components._common.retry import GaveUp, call_with_retries_async
from components._common.retry import RetryPolicy as SharedRetryPolicy

T = TypeVar("T")

API_ROOT = "/api/model_registry/"
#: API versions in the order they are tried.
API_VERSIONS = ("v1", "v1alpha3")
#: The version the installed client's generated code is written for.
CLIENT_API_VERSION = "v1"

#: Secret env var holding a bearer token (e.g. injected from a Kubernetes secret).
TOKEN_ENV = "MODEL_REGISTRY_TOKEN"
#: Env var naming a file that holds the bearer token (e.g. a projected service-account token).
TOKEN_PATH_ENV = "MODEL_REGISTRY_TOKEN_PATH"
#: Env var KFP sets to the pipeline's service-account token file.
KFP_TOKEN_PATH_ENV = "KF_PIPELINES_SA_TOKEN_PATH"
#: The pod's mounted service-account token.
SERVICE_ACCOUNT_TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount/token"


class RegistryRequestError(RuntimeError):
    """The registry could not be reached or refused a request (after retries where they apply)."""


class RegistryAuthError(RegistryRequestError):
    """The registry answered 401/403: the bearer token is missing, invalid or lacks access."""


@dataclasses.dataclass(frozen=True)
class RetryPolicy(SharedRetryPolicy):
    """The shared retry policy (:mod:`components._common.retry`) with the registry's short waits."""

    initial_delay_s: float = 0.5
    max_delay_s: float = 8.0


@dataclasses.dataclass(frozen=True)
class RegistryEndpoint:
    """Where and how to reach the registry. The token is kept out of ``repr`` so it can never be logged by accident.

    Attributes:
        base_url: ``scheme://host:port`` of the registry's REST service.
        is_secure: Whether the registry's TLS certificate is verified.
        ca_bundle_path: PEM bundle to verify the certificate with ("" = the system trust store).
        token: Bearer token, or ``None`` to send none.
        token_source: Where the token came from, safe to log (never the token itself).
    """

    base_url: str
    is_secure: bool
    ca_bundle_path: str
    token: str | None = dataclasses.field(repr=False)
    token_source: str


def registry_base_url(registry_address: str, registry_port: int, is_secure: bool) -> str:
    """Builds ``scheme://host:port`` from the component's address parameters.

    Args:
        registry_address: Host name or URL (``https://host``); a port in the URL wins over ``registry_port``.
        registry_port: Port used when the address carries none.
        is_secure: Whether TLS is verified; a bare host then gets ``https://`` (``http://`` otherwise).

    Returns:
        The base URL, without a trailing slash or path.

    Raises:
        ValueError: The address has a path, an unknown scheme, or the port is out of range.
    """
    address = registry_address.strip().rstrip("/")
    if "://" not in address:
        address = ("https://" if is_secure else "http://") + address
    parts = urlsplit(address)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"registry_address={registry_address!r}: expected a host name or an http(s):// URL of the Model Registry "
            "REST service, e.g. 'https://model-registry-rest.apps.example.com'"
        )
    if parts.path or parts.query:
        raise ValueError(
            f"registry_address={registry_address!r}: give the host only; the API path {API_ROOT}<version> is added "
            "by the client"
        )
    port = parts.port or registry_port
    if not 0 < int(port) < 65536:
        raise ValueError(f"registry_port={registry_port!r}: must be between 1 and 65535")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port}"


def read_bearer_token(
    environ: Mapping[str, str] | None = None, service_account_token_path: str = SERVICE_ACCOUNT_TOKEN_PATH
) -> tuple[str | None, str]:
    """Finds the bearer token: secret env var, then token files, then the pod's service-account token.

    Order: ``$MODEL_REGISTRY_TOKEN``; the file named by ``$MODEL_REGISTRY_TOKEN_PATH``; the file named by
    ``$KF_PIPELINES_SA_TOKEN_PATH``; the mounted service-account token.

    Args:
        environ: Environment to read (default ``os.environ``).
        service_account_token_path: The mounted service-account token file.

    Returns:
        ``(token or None, description of its source)``; the description never contains the token.

    Raises:
        ValueError: An env var names a token file that cannot be read, or the file is empty.
    """
    environ = os.environ if environ is None else environ
    token = environ.get(TOKEN_ENV, "").strip()
    if token:
        return token, f"env var {TOKEN_ENV}"
    for variable in (TOKEN_PATH_ENV, KFP_TOKEN_PATH_ENV):
        path = environ.get(variable, "").strip()
        if path:
            return _read_token_file(Path(path), f"file {path} (from env var {variable})"), f"file {path}"
    if Path(service_account_token_path).is_file():
        source = f"service-account token {service_account_token_path}"
        return _read_token_file(Path(service_account_token_path), source), source
    return None, "none found (no token env var, token file or service-account token)"


def _read_token_file(path: Path, source: str) -> str:
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise ValueError(f"bearer token {source} cannot be read: {exc.strerror}") from None
    if not token:
        raise ValueError(f"bearer token {source} is empty")
    return token


def make_endpoint(
    registry_address: str,
    registry_port: int,
    is_secure: bool,
    ca_bundle_path: str,
    environ: Mapping[str, str] | None = None,
    service_account_token_path: str = SERVICE_ACCOUNT_TOKEN_PATH,
    allow_token_over_http: bool = False,
    log: Callable[[str], None] | None = None,
) -> RegistryEndpoint:
    """Validates the connection parameters and finds the token.

    Transport rules: ``is_secure=False`` with an ``https://`` address keeps TLS but skips certificate verification,
    and says so in a warning; a token is never sent over plain ``http://`` unless ``allow_token_over_http`` asks for
    it (it is withheld, with a warning naming its source; a registry that needs it then answers 401).

    Args:
        registry_address: See :func:`registry_base_url`.
        registry_port: See :func:`registry_base_url`.
        is_secure: Verify TLS (``https://`` required).
        ca_bundle_path: PEM bundle to trust ("" = system trust store); must exist when given.
        environ: Environment to read the token from (default ``os.environ``).
        service_account_token_path: The mounted service-account token file.
        allow_token_over_http: Send the token to a plain-HTTP address (e.g. inside a trusted service mesh).
        log: Where the warnings go (default: printed).

    Returns:
        The endpoint.

    Raises:
        ValueError: Inconsistent parameters (http with ``is_secure``, missing CA bundle, no token for TLS).
    """
    base_url = registry_base_url(registry_address, registry_port, is_secure)
    if is_secure and base_url.startswith("http://"):
        raise ValueError(
            f"registry_address={registry_address!r} is plain http but is_secure=True: use https:// (TLS verified) or "
            "set is_secure=False for an in-cluster plain-HTTP registry"
        )
    if ca_bundle_path and not Path(ca_bundle_path).is_file():
        raise ValueError(f"ca_bundle_path={ca_bundle_path!r}: no such file (mount the CA bundle, e.g. a ConfigMap)")
    token, source = read_bearer_token(environ, service_account_token_path)
    register_secret(token)
    warn = log or (lambda message: print(f"[model_registry] {message}", flush=True))
    if not is_secure and base_url.startswith("https://"):
        warn(
            f"WARNING: is_secure=False with {base_url}: TLS is used but the certificate is NOT verified, so the "
            "bearer token goes to a server whose identity is unchecked; set is_secure=True (with ca_bundle_path for "
            "a private CA)"
        )
    if token is not None and base_url.startswith("http://") and not allow_token_over_http:
        warn(
            f"WARNING: the bearer token ({source}) is NOT sent to {base_url}: plain HTTP would expose it; use "
            "https://, or set allow_token_over_http=True for a trusted in-cluster network"
        )
        token, source = None, f"withheld ({source} found; plain HTTP and allow_token_over_http=False)"
    if is_secure and token is None:
        raise ValueError(
            f"is_secure=True but no bearer token was found for {base_url}: set the secret env var {TOKEN_ENV}, "
            f"point {TOKEN_PATH_ENV} at a token file, or run with a service-account token mounted"
        )
    return RegistryEndpoint(base_url, is_secure, ca_bundle_path, token, source)


# --------------------------------------------------------------------------------------------------------------------
# Error classification and retries
# --------------------------------------------------------------------------------------------------------------------


def _is_tls_error(exc: BaseException) -> bool:
    import ssl

    import aiohttp

    return isinstance(exc, (ssl.SSLError, aiohttp.ClientSSLError)) or isinstance(
        getattr(exc, "os_error", None), ssl.SSLError
    )


def is_transient(exc: BaseException) -> bool:
    """Whether a failed request is worth retrying: a 5xx/429 answer, a dropped connection or a timeout."""
    import aiohttp
    from mr_openapi.exceptions import ApiException

    if isinstance(exc, ApiException):
        return exc.status is not None and (int(exc.status) >= 500 or int(exc.status) == 429)
    if _is_tls_error(exc):
        return False
    return isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, asyncio.TimeoutError))


def _server_message(exc: Any) -> str:
    import json

    body = getattr(exc, "body", None) or ""
    try:
        return str(json.loads(body).get("message", body))[:500]
    except (ValueError, AttributeError):
        return str(body)[:500]


def describe_failure(exc: BaseException, step: str, endpoint: RegistryEndpoint) -> RegistryRequestError:
    """Turns a client exception into an error that says what failed, where, and what to do. Never shows the token.

    Args:
        exc: What the client raised.
        step: What was being done (e.g. "create model version 'v1'").
        endpoint: The registry.

    Returns:
        A :class:`RegistryAuthError` for 401/403, a :class:`RegistryRequestError` otherwise.
    """
    from mr_openapi.exceptions import ApiException

    where = f"Model Registry at {endpoint.base_url}"
    if isinstance(exc, ApiException) and exc.status in (401, 403):
        verb = "rejected the bearer token" if exc.status == 401 else "denied access for the bearer token"
        return RegistryAuthError(
            f"{where} {verb} (HTTP {exc.status}) while trying to {step}; token source: {endpoint.token_source}. "
            f"Provide a valid token in the secret env var {TOKEN_ENV} or a service account allowed to use the "
            "registry (e.g. a RoleBinding to the registry's user role)."
        )
    if isinstance(exc, ApiException):
        return RegistryRequestError(
            f"{where} answered HTTP {exc.status} {exc.reason or ''} while trying to {step}: {_server_message(exc)}"
        )
    if _is_tls_error(exc):
        return RegistryRequestError(
            f"TLS verification of {where} failed while trying to {step}: {exc}. Pass ca_bundle_path with the CA "
            "that signed the registry's certificate (is_secure=False disables verification)."
        )
    answer = _unreadable_answer(exc)
    if answer is not None:
        html = "<html" in answer.lower() or "<!doctype" in answer.lower()
        hint = (
            "an HTML page: a login page of an OAuth proxy or a dashboard route, not the registry's REST service; "
            "check registry_address/registry_port and the bearer token"
            if html
            else "check registry_address/registry_port point at the registry's REST service"
        )
        shown = " ".join(answer.split())[:120]
        return RegistryRequestError(
            f"{where} answered while trying to {step}, but not with the registry's JSON ({type(exc).__name__}: "
            f"{shown!r}): {hint}"
        )
    return RegistryRequestError(f"{where} could not be reached while trying to {step}: {type(exc).__name__}: {exc}")


def _unreadable_answer(exc: BaseException) -> str | None:
    """The start of an answer the client could not read (not JSON, or JSON of another shape); ``None``: no answer.

    pydantic's ``ValidationError`` (JSON of the wrong shape, or an HTML page read as a string), ``JSONDecodeError``
    (a body that is not JSON) and the ``TypeError``/``AttributeError`` of a generated model fed something else mean
    the server answered, but not as the registry does.
    """
    import json

    if type(exc).__name__ == "ValidationError" and hasattr(exc, "errors"):
        try:
            first = exc.errors()[0]
        except (IndexError, TypeError, ValueError):
            return str(exc).splitlines()[0]
        value = first.get("input")
        return value if isinstance(value, str) else f"{first.get('msg', '')} at {first.get('loc', '')}"
    if isinstance(exc, json.JSONDecodeError):
        return exc.doc or ""
    if isinstance(exc, (TypeError, AttributeError, KeyError)) and _raised_in_client(exc):
        return f"{exc}"
    return None


def _raised_in_client(exc: BaseException) -> bool:
    """Whether ``exc`` was raised in the registry client's generated code (reading an answer), not in ours."""
    traceback = exc.__traceback__
    while traceback is not None:
        if any(part in traceback.tb_frame.f_code.co_filename for part in ("/mr_openapi/", "/model_registry/")):
            return True
        traceback = traceback.tb_next
    return False


async def with_retries(
    step: str,
    call: Callable[[], Awaitable[T]],
    endpoint: RegistryEndpoint,
    policy: RetryPolicy,
    log: Callable[[str], None],
) -> T:
    """Runs ``call`` and retries it with backoff while it fails transiently.

    ``call`` must be safe to repeat: callers pass idempotent find-or-create steps, so a create whose answer got lost
    is found on the next try instead of being made twice.

    Args:
        step: What the call does, for log lines and errors.
        call: Makes a fresh coroutine for each try.
        endpoint: The registry (for error messages).
        policy: How often and how long to retry.
        log: Where progress lines go.

    Returns:
        The call's result.

    Raises:
        RegistryRequestError: A permanent failure, or transient failures on every try.
    """

    def on_retry(number: int, delay: float, exc: BaseException) -> None:
        log(f"{step}: transient failure ({_short(exc)}); retry {number}/{policy.attempts - 1} in {delay:.1f}s")

    try:
        return await call_with_retries_async(call, policy, retryable=is_transient, on_retry=on_retry)
    except GaveUp as gave_up:
        error = describe_failure(gave_up.last, step, endpoint)
        raise RegistryRequestError(f"{error} (gave up after {gave_up.attempts} tries)") from gave_up.last
    except Exception as exc:  # noqa: BLE001 - not transient: re-raised as a clear error
        raise describe_failure(exc, step, endpoint) from exc


def _short(exc: BaseException) -> str:
    status = getattr(exc, "status", None)
    return f"HTTP {status}" if status else type(exc).__name__


# --------------------------------------------------------------------------------------------------------------------
# The client, speaking v1 or v1alpha3
# --------------------------------------------------------------------------------------------------------------------


def _versioned_api_class():
    """A ``ModelRegistryAPIClient`` whose generated ``/api/model_registry/v1/...`` paths can be re-rooted."""
    from contextlib import asynccontextmanager

    from model_registry.core import ModelRegistryAPIClient
    from mr_openapi import ApiClient, ModelRegistryServiceApi

    client_prefix = API_ROOT + CLIENT_API_VERSION + "/"

    class _ReRootedApiClient(ApiClient):
        def __init__(self, configuration: Any, api_prefix: str):
            super().__init__(configuration)
            self.api_prefix = api_prefix

        def param_serialize(self, *args: Any, **kwargs: Any) -> Any:
            path = kwargs.get("resource_path")
            if path and path.startswith(client_prefix):
                kwargs["resource_path"] = self.api_prefix + path[len(client_prefix) :]
            return super().param_serialize(*args, **kwargs)

    @dataclasses.dataclass
    class VersionedRegistryAPI(ModelRegistryAPIClient):
        """One HTTP session for all calls (the stock client opens one, with a fresh TLS context, per call)."""

        api_version: str = CLIENT_API_VERSION
        _api_client: Any = None

        @asynccontextmanager
        async def get_client(self):
            if self._api_client is None:
                self._api_client = _ReRootedApiClient(self.config, API_ROOT + self.api_version + "/")
            yield ModelRegistryServiceApi(self._api_client)

        async def close(self) -> None:
            """Closes the HTTP session."""
            if self._api_client is not None:
                await self._api_client.close()
                self._api_client = None

    return VersionedRegistryAPI


def make_api(endpoint: RegistryEndpoint, api_version: str) -> Any:
    """A ``model_registry.core.ModelRegistryAPIClient`` for ``endpoint`` speaking ``api_version``.

    Args:
        endpoint: The registry.
        api_version: ``v1`` or ``v1alpha3``.

    Returns:
        The API client (its methods are coroutines).
    """
    api_class = _versioned_api_class()
    if endpoint.is_secure:
        api = api_class.secure_connection(
            endpoint.base_url, user_token=endpoint.token, custom_ca=endpoint.ca_bundle_path or None
        )
    else:
        api = api_class.insecure_connection(endpoint.base_url, 0, endpoint.token)
    api.api_version = api_version
    return api


async def connect(endpoint: RegistryEndpoint, policy: RetryPolicy, log: Callable[[str], None]) -> tuple[Any, str]:
    """Finds the API version the registry speaks (``v1`` first) with one cheap list call.

    Args:
        endpoint: The registry.
        policy: Retries for transient failures.
        log: Where progress lines go.

    Returns:
        ``(api client, api version)``; close the client with ``await api.close()``.

    Raises:
        RegistryRequestError: The registry is unreachable, refuses the token, or serves neither API version.
    """
    from model_registry.types import ListOptions
    from mr_openapi.exceptions import NotFoundException

    for api_version in API_VERSIONS:
        api = make_api(endpoint, api_version)
        try:
            await with_retries(
                f"list registered models under {API_ROOT}{api_version}",
                lambda api=api: api.get_registered_models(ListOptions(limit=1)),
                endpoint,
                policy,
                log,
            )
        except RegistryRequestError as exc:
            await api.close()
            if isinstance(exc.__cause__, NotFoundException):
                log(f"{endpoint.base_url} has no {API_ROOT}{api_version} API (HTTP 404)")
                continue
            raise
        log(f"connected to {endpoint.base_url} (API {API_ROOT}{api_version}, bearer token: {endpoint.token_source})")
        return api, api_version
    raise RegistryRequestError(
        f"{endpoint.base_url} serves no Model Registry REST API: tried "
        + ", ".join(API_ROOT + v for v in API_VERSIONS)
        + " (all HTTP 404). Check registry_address/registry_port point at the registry's REST service."
    )
