"""Image references as a container runtime reads them, and whether a registry serves one.

``HEAD /v2/<repository>/manifests/<reference>``; a ``401`` is answered by distribution's token flow or basic auth, all
within one deadline; credentials never reach a message.
"""

from __future__ import annotations

import base64
import dataclasses
import ipaddress
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from components._common.oci_reference import parse_oci_uri

DOCKER_HUB = "docker.io"
#: The host that serves Docker Hub's registry API (``docker.io`` itself does not).
DOCKER_HUB_API = "registry-1.docker.io"


@dataclasses.dataclass(frozen=True)
class ImageReference:
    """A parsed image reference (``tag`` ``""`` with only a digest; ``text`` as the pipeline names it)."""

    registry: str
    repository: str
    tag: str
    digest: str
    text: str

    @property
    def api_host(self) -> str:
        """The host of the registry API (``registry-1.docker.io`` for Docker Hub)."""
        return DOCKER_HUB_API if self.registry in (DOCKER_HUB, "index.docker.io") else self.registry

    @property
    def manifest_reference(self) -> str:
        """What the manifest is fetched by: the digest when pinned, else the tag."""
        return self.digest or self.tag

    @property
    def loopback(self) -> bool:
        """Whether the registry is on this machine (``localhost``, 127.0.0.0/8, ``::1``): plain HTTP, as in Docker."""
        host = self.registry.rsplit(":", 1)[0] if not self.registry.startswith("[") else self.registry[1:].split("]")[0]
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    @property
    def name(self) -> str:
        """``registry/repository`` (the image without tag or digest)."""
        return f"{self.registry}/{self.repository}"


def parse_image(text: str) -> ImageReference:
    """Parses ``[registry/]repository[:tag][@sha256:<hex>]`` ; a :class:`ValueError` when it is not one."""
    written = text.strip()
    first, slash, rest = written.partition("/")
    if not (slash and ("." in first or ":" in first or first == "localhost")):  # on Docker Hub
        first, rest = DOCKER_HUB, written if slash else f"library/{written}"
    try:
        parsed = parse_oci_uri(f"oci://{first}/{rest}", "image")
    except ValueError:
        raise ValueError(
            f"image {text!r} is not a valid image reference; expected [registry/]repository[:tag][@sha256:<hex>] "
            "with a lowercase repository"
        ) from None
    return ImageReference(parsed.registry, parsed.repository, parsed.tag, parsed.digest, written)


MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
#: Seconds one request may take.
REQUEST_TIMEOUT = 5.0

FOUND, MISSING, DENIED, UNREACHABLE = "found", "missing", "denied", "unreachable"


@dataclasses.dataclass(frozen=True)
class ManifestAnswer:
    """What the registry said about one image.

    Attributes:
        status: :data:`FOUND`, :data:`MISSING` (404), :data:`DENIED` (401/403 after the authentication flow) or
            :data:`UNREACHABLE` (no answer, TLS failure, a 5xx, the deadline).
        detail: A short reason (``HTTP 404``, ``[Errno 111] Connection refused``); never a credential.
        authenticated: Whether credentials from a pull secret were sent.
    """

    status: str
    detail: str
    digest: str = ""
    authenticated: bool = False


class _Deadline:
    def __init__(self, seconds: float, timeout: float) -> None:
        self.end, self.timeout = time.monotonic() + seconds, timeout

    def next_timeout(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError("the check's deadline passed")
        return min(self.timeout, left)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:  # a manifest answers in place
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _send(method: str, url: str, headers: Mapping[str, str], deadline: _Deadline) -> tuple[int, Any, bytes]:
    """``(status, headers, body)`` of one request (the body of a ``GET`` only, at most 1 MiB)."""
    request = urllib.request.Request(url, method=method, headers=dict(headers))
    try:
        with _OPENER.open(request, timeout=deadline.next_timeout()) as response:
            return response.status, response.headers, response.read(1 << 20) if method == "GET" else b""
    except urllib.error.HTTPError as error:
        error.close()
        return error.code, error.headers, b""


def _basic(credentials: tuple[str, str]) -> str:
    return "Basic " + base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()


def _reason(error: BaseException) -> str:
    reason = getattr(error, "reason", None) or error
    return (str(reason) or type(error).__name__)[:200]


def check_manifest(
    image: ImageReference, credentials: tuple[str, str] | None = None, *, deadline_seconds: float = 20.0
) -> ManifestAnswer:
    """The registry's answer about the image's manifest, asked with the pull secret's credentials if any."""
    deadline = _Deadline(deadline_seconds, REQUEST_TIMEOUT)
    scheme = "http" if image.loopback else "https"
    url = f"{scheme}://{image.api_host}/v2/{image.repository}/manifests/{image.manifest_reference}"
    headers = {"Accept": ", ".join(MANIFEST_TYPES), "User-Agent": "kfp-finetune-image-check"}
    try:
        status, answer_headers, _ = _send("HEAD", url, headers, deadline)
        if status == 401:
            scheme_name, _, challenge = answer_headers.get("WWW-Authenticate", "").strip().partition(" ")
            scheme_name, params = scheme_name.lower(), dict(re.findall(r'(\w+)="([^"]*)"', challenge))
            if scheme_name == "bearer" and params.get("realm"):
                query = {"scope": f"repository:{image.repository}:pull"}
                if params.get("service"):
                    query["service"] = params["service"]
                token_headers = {"User-Agent": headers["User-Agent"]}
                if credentials:
                    token_headers["Authorization"] = _basic(credentials)
                separator = "&" if "?" in params["realm"] else "?"
                token_url = params["realm"] + separator + urllib.parse.urlencode(query)
                token_status, _, body = _send("GET", token_url, token_headers, deadline)
                answer = json.loads(body or b"{}") if token_status == 200 else {}
                token = answer.get("token") or answer.get("access_token")
                if token_status != 200 or not token:
                    return ManifestAnswer(DENIED, f"token service HTTP {token_status}", "", bool(credentials))
                headers["Authorization"] = f"Bearer {token}"
                status, answer_headers, _ = _send("HEAD", url, headers, deadline)
            elif scheme_name == "basic" and credentials:
                headers["Authorization"] = _basic(credentials)
                status, answer_headers, _ = _send("HEAD", url, headers, deadline)
        if status == 405:  # a registry without HEAD on manifests
            status, answer_headers, _ = _send("GET", url, headers, deadline)
    except (urllib.error.URLError, OSError, TimeoutError, ValueError) as error:
        return ManifestAnswer(UNREACHABLE, _reason(error), "", bool(credentials))
    verdict = {200: FOUND, 404: MISSING, 401: DENIED, 403: DENIED}.get(status, UNREACHABLE)
    digest = answer_headers.get("Docker-Content-Digest", "") or "" if verdict == FOUND else ""
    return ManifestAnswer(verdict, f"HTTP {status}", digest, bool(credentials))
