"""Where and how to reach a Model Registry: the base URL, TLS and the bearer token, checked before any request."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from components._common.masking import register_secret
from components._common.namespace import SERVICE_ACCOUNT_DIR

from .request import RegistryOptions

API_ROOT = "/api/model_registry/"
#: API versions in the order they are tried.
API_VERSIONS = ("v1", "v1alpha3")
#: The version the installed client's generated code is written for.
CLIENT_API_VERSION = "v1"

#: Where the bearer token is looked for, in this order (README: *Environment*): a secret env var, an env var naming a
#: token file, the one KFP sets to the pipeline's service-account token file, the pod's service-account token.
TOKEN_ENV = "MODEL_REGISTRY_TOKEN"
TOKEN_PATH_ENV = "MODEL_REGISTRY_TOKEN_PATH"
KFP_TOKEN_PATH_ENV = "KF_PIPELINES_SA_TOKEN_PATH"
SERVICE_ACCOUNT_TOKEN_PATH = f"{SERVICE_ACCOUNT_DIR}/token"


@dataclasses.dataclass(frozen=True)
class RegistryEndpoint:
    """Where and how to reach the registry; the bearer token (``None``: none sent) is kept out of ``repr``."""

    base_url: str
    is_secure: bool
    ca_bundle_path: str
    token: str | None = dataclasses.field(repr=False)
    token_source: str


def registry_base_url(registry_address: str, registry_port: int, is_secure: bool) -> str:
    """``scheme://host:port`` of a host name or URL (a port in the URL wins; a bare host gets ``https://`` when secure).

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
    """``(bearer token or None, its source)`` (the source, safe to log, never holds the token).

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
    options: RegistryOptions,
    environ: Mapping[str, str] | None = None,
    service_account_token_path: str = SERVICE_ACCOUNT_TOKEN_PATH,
    log: Callable[[str], None] | None = None,
) -> RegistryEndpoint:
    """Validates the connection options and finds the token (registered as a secret; README: *Overview*).

    Raises:
        ValueError: Inconsistent options (http with ``is_secure``, missing CA bundle, no token for TLS).
    """
    registry_address, is_secure, ca_bundle_path = options.registry_address, options.is_secure, options.ca_bundle_path
    base_url = registry_base_url(registry_address, options.registry_port, is_secure)
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
    if token is not None and base_url.startswith("http://") and not options.allow_token_over_http:
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
