"""The registry side of ``oci://`` pulls: the pull secret, and the ``oras`` SDK's client, bounded.

Per-request timeouts and urllib3 retries replace the SDK's own loop; every byte is verified against its digest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components._common import oci_reference
from components._common.oci_reference import OciReference

#: The pull secret's Docker config.json (the guide's key), else its ``.dockerconfigjson`` key, as env vars.
PULL_SECRET_ENV = "OCI_PULL_SECRET_MODEL_DOWNLOAD"
DOCKERCONFIGJSON_ENV = "OCI_PULL_SECRET_DOCKERCONFIGJSON"
#: The secret the pipelines mount (``--oci-pull-secret`` at compile time changes it).
PULL_SECRET_NAME = "oci-pull-secret-model-download"
SECRET_HINT = (
    f"secret {PULL_SECRET_NAME!r} (or the one named at compile time), key {PULL_SECRET_ENV!r} (or '.dockerconfigjson')"
)
ATTEMPTS = 3
#: (connect, read) timeout of one request in seconds; a read timeout applies between chunks of a blob.
TIMEOUT = (15.0, 120.0)
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)


class OciModelError(ValueError):
    """An ``oci://`` base model cannot be used; the one-line message says what to fix (never a secret)."""


def parse_oci_uri(uri: str, source: str = "training_base_model") -> OciReference:
    """Parses an ``oci://`` base model reference (:class:`OciModelError` when it is not one)."""
    return oci_reference.parse_oci_uri(uri, source, OciModelError, "oci://quay.io/org/granite:1.0")


def pull_credentials(env: Mapping[str, str], registry: str) -> tuple[tuple[str, str] | None, str]:
    """``((username, password) or None, the variable read)`` for ``registry`` from the pull secret's env vars.

    Raises:
        OciModelError: The value is not a Docker config.json, or its entry for ``registry`` is malformed (naming the
            variable and host, never the value).
    """
    config, variable = oci_reference.docker_config_from_env(
        env, (PULL_SECRET_ENV, DOCKERCONFIGJSON_ENV), OciModelError, SECRET_HINT
    )

    def refuse(entry: str, problem: str) -> OciModelError:
        return OciModelError(f"{entry} in {variable} (from {SECRET_HINT}): {problem}")

    return oci_reference.credentials_for(config, registry, malformed=refuse), variable


def _registry_class() -> type:
    import oras.provider

    class Registry(oras.provider.Registry):
        """oras' registry client without its slow retry decorator: the session retries (:func:`retry_transient`)."""

        do_request = oras.provider.Registry.do_request.__wrapped__

    return Registry


def retry_transient(session: Any) -> None:
    """Makes ``session`` retry connection errors, 429 and 5xx (:data:`ATTEMPTS` tries); TLS failures are final."""
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    retry = Retry(
        total=ATTEMPTS - 1,
        other=0,
        status_forcelist=(429, 500, 502, 503, 504),
        backoff_factor=0.5,
        raise_on_status=False,
        respect_retry_after_header=False,
    )
    for prefix in ("https://", "http://"):
        session.mount(prefix, HTTPAdapter(max_retries=retry))


def _session(verify: bool | str) -> Any:
    from http.cookiejar import DefaultCookiePolicy

    import requests

    class Session(requests.Session):
        def request(self, method: str, url: str, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", TIMEOUT)
            if kwargs.get("verify") is None:
                kwargs["verify"] = verify
            return super().request(method, url, **kwargs)

    session = Session()
    session.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))
    return session


@dataclasses.dataclass
class _Connection:
    registry: Any
    ref: OciReference
    source: str
    has_credentials: bool
    credentials_from: str

    def url(self, kind: str, reference: str) -> str:
        return f"{self.registry.prefix}://{self.ref.registry}/v2/{self.ref.repository}/{kind}/{reference}"

    def get(self, kind: str, reference: str, headers: dict | None = None, stream: bool = False) -> Any:
        try:
            response = self.registry.do_request(self.url(kind, reference), "GET", headers=headers or {}, stream=stream)
        except ValueError:  # the SDK could not answer the authentication challenge
            raise self.denied(401) from None
        except Exception as error:  # noqa: BLE001 - connection problems become one line naming the registry
            raise OciModelError(f"{self.source}: cannot reach registry {self.ref.registry}: {_reason(error)}") from None
        if response.status_code in (401, 403):
            raise self.denied(response.status_code)
        return response

    def denied(self, status: int) -> OciModelError:
        host, repo = self.ref.registry, self.ref.repository
        if not self.has_credentials:
            return OciModelError(
                f"{self.source}: registry {host} refused anonymous access to {repo} (HTTP {status}); no credentials "
                f"for {host} in the pull secret: put a Docker config.json with auths[{host!r}] into {SECRET_HINT}"
            )
        return OciModelError(
            f"{self.source}: registry {host} rejected the credentials for {host} from {self.credentials_from} "
            f"(HTTP {status}); fix auths[{host!r}] in {SECRET_HINT}, whose user needs pull access to {repo}"
        )


def _reason(error: BaseException) -> str:
    """The useful tail of a requests/urllib3 error (``[Errno 111] Connection refused``, the SSL reason)."""
    text = str(error)
    found = re.search(r"\[Errno -?\d+\] [^'\")]+", text) or re.search(r"\[SSL[^\]]*\] [^'\")(]+", text)
    return (found.group(0) if found else text).strip()[:200] or type(error).__name__


def connect(ref: OciReference, env: Mapping[str, str], insecure: bool, ca_bundle: str, source: str) -> _Connection:
    """Probes ``/v2/``, picks the SDK's auth backend from the challenge (bearer token or basic), logs in.

    Raises:
        OciModelError: Unreachable, TLS failure, not a registry, or basic auth required without credentials.
    """
    import requests

    credentials, variable = pull_credentials(env, ref.registry)
    attempts = [("https", False), ("http", False)] if insecure else [("https", ca_bundle or True)]
    for scheme, verify in attempts:
        session = _session(verify)
        try:
            probe = session.get(f"{scheme}://{ref.registry}/v2/")
        except requests.exceptions.SSLError as error:
            if insecure:
                continue  # a plain-HTTP registry answers a TLS handshake with garbage: try http://
            reason = _reason(error)
            if "WRONG_VERSION_NUMBER" in reason:
                reason += ": it seems to speak plain HTTP"
            raise OciModelError(
                f"{source}: TLS verification of registry {ref.registry} failed ({reason}); set "
                "training_oci_ca_bundle to the CA bundle (PEM) that signed its certificate, or "
                "training_oci_insecure=True for an in-cluster HTTP registry"
            ) from None
        except requests.RequestException as error:
            if insecure and scheme == "https":
                continue
            raise OciModelError(f"{source}: cannot reach registry {ref.registry}: {_reason(error)}") from None
        challenge = probe.headers.get("WWW-Authenticate", "")
        if probe.status_code not in (200, 401):
            raise OciModelError(
                f"{source}: {scheme}://{ref.registry}/v2/ answered HTTP {probe.status_code} (an OCI registry answers "
                "200 or 401); check the registry host and port"
            )
        backend = "basic" if challenge.lower().startswith("basic") else "token"
        registry = _registry_class()(
            hostname=ref.registry, insecure=scheme == "http", tls_verify=verify, auth_backend=backend
        )
        retry_transient(session)  # after the probe, which is tried once per scheme
        registry.session = registry.auth.session = session
        connection = _Connection(registry, ref, source, credentials is not None, variable)
        if credentials:
            registry.auth.set_basic_auth(*credentials)
        elif backend == "basic":
            raise connection.denied(401)
        return connection
    raise OciModelError(f"{source}: cannot reach registry {ref.registry} over https:// or http://")


def _not_found(connection: _Connection, reference: str) -> OciModelError:
    ref, source = connection.ref, connection.source
    tags = connection.get("tags", "list")
    if tags.status_code == 404:
        return OciModelError(
            f"{source}: repository {ref.repository} not found in registry {ref.registry}; check the repository path"
        )
    listed = (tags.json().get("tags") or []) if tags.status_code == 200 else []
    shown = ", ".join(sorted(listed)[:20]) or "none"
    what = "digest" if reference.startswith("sha256:") else "tag"
    return OciModelError(
        f"{source}: {what} {reference!r} not found in {ref.registry}/{ref.repository} (tags there: {shown})"
    )


def fetch_manifest(connection: _Connection, reference: str) -> tuple[dict, str]:
    """The manifest at ``reference`` (tag or digest) and its verified digest.

    Raises:
        OciModelError: Unknown repository/tag, refused access, or the content does not match the digest.
    """
    accept = ", ".join(MANIFEST_TYPES + INDEX_TYPES)
    response = connection.get("manifests", reference, headers={"Accept": accept})
    if response.status_code == 404:
        raise _not_found(connection, reference)
    if response.status_code != 200:
        raise OciModelError(
            f"{connection.source}: registry {connection.ref.registry} answered HTTP {response.status_code} for "
            f"manifest {reference}: {response.text[:200]}"
        )
    digest = "sha256:" + hashlib.sha256(response.content).hexdigest()
    expected = reference if reference.startswith("sha256:") else response.headers.get("Docker-Content-Digest", "")
    if expected.startswith("sha256:") and expected != digest:
        raise OciModelError(
            f"{connection.source}: digest mismatch for manifest {reference}: expected {expected}, the registry sent "
            f"content with {digest}; refusing it (check the reference, or a proxy rewriting the registry's answers)"
        )
    return json.loads(response.content), digest


def resolve_image_manifest(connection: _Connection, manifest: dict) -> dict:
    """The image manifest itself, or for an index the ``linux/amd64`` entry (else the first)."""
    if manifest.get("mediaType") in INDEX_TYPES or ("manifests" in manifest and "layers" not in manifest):
        entries = manifest.get("manifests") or []
        if not entries:
            raise OciModelError(f"{connection.source}: the image index lists no manifests")
        linux_amd64 = {"os": "linux", "architecture": "amd64"}
        chosen = next((e for e in entries if linux_amd64.items() <= (e.get("platform") or {}).items()), entries[0])
        manifest, _ = fetch_manifest(connection, chosen["digest"])
    if "layers" not in manifest:
        raise OciModelError(
            f"{connection.source}: unsupported manifest (mediaType {manifest.get('mediaType')!r}, schemaVersion "
            f"{manifest.get('schemaVersion')}); push an OCI or Docker v2 image"
        )
    return manifest


def download_blob(connection: _Connection, descriptor: Mapping[str, Any], target: Path) -> None:
    """Streams a blob to ``target``, checking its SHA-256 against the descriptor's digest.

    Raises:
        OciModelError: HTTP error, non-sha256 digest or digest mismatch (``target`` is removed).
    """
    digest, source = str(descriptor.get("digest", "")), connection.source
    if not digest.startswith("sha256:"):
        raise OciModelError(f"{source}: layer digest {digest!r} is not sha256:<hex>; only sha256 is supported")
    hasher, size = hashlib.sha256(), 0
    with connection.get("blobs", digest, stream=True) as response:
        if response.status_code != 200:
            raise OciModelError(
                f"{source}: registry {connection.ref.registry} answered HTTP {response.status_code} for layer {digest}"
            )
        with target.open("wb") as handle:
            for chunk in response.iter_content(chunk_size=1 << 20):
                hasher.update(chunk)
                handle.write(chunk)
                size += len(chunk)
    actual = "sha256:" + hasher.hexdigest()
    if actual != digest:
        target.unlink(missing_ok=True)
        raise OciModelError(
            f"{source}: digest mismatch for layer {digest}: the {size} bytes received hash to {actual}; "
            "the registry (or a proxy) served different content, so nothing was kept"
        )
