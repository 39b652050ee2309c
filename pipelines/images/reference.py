"""Container image references as a container runtime reads them (``python:3.11`` is ``docker.io/library/python:3.11``).

As distribution's ``reference/normalize.go``: the first path component is a registry when it contains ``.`` or ``:``
or is ``localhost``, else the image is on Docker Hub; no tag and no digest means ``:latest``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re

DOCKER_HUB = "docker.io"
#: The host that serves Docker Hub's registry API (``docker.io`` itself does not).
DOCKER_HUB_API = "registry-1.docker.io"
_NAME = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclasses.dataclass(frozen=True)
class ImageReference:
    """A parsed image reference.

    ``registry`` (``docker.io`` for Docker Hub), ``repository`` (``library/python``), ``tag`` (``""`` with only a
    digest), ``digest`` (``sha256:<hex>`` or ``""``), ``text`` (as the pipeline names it).
    """

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
    """Parses ``[registry/]repository[:tag][@sha256:<hex>]``.

    Raises:
        ValueError: Not a valid image reference (one line naming it and the expected form).
    """
    rest, _, digest = text.strip().partition("@")
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, remainder
    else:
        registry, path = DOCKER_HUB, rest
    name, _, tag = path.rpartition(":") if ":" in path else (path, "", "")
    if registry == DOCKER_HUB and "/" not in name:
        name = f"library/{name}"
    if not _NAME.match(name) or (tag and not _TAG.match(tag)) or (digest and not _DIGEST.match(digest)):
        raise ValueError(
            f"image {text!r} is not a valid image reference; expected [registry/]repository[:tag][@sha256:<hex>] "
            "with a lowercase repository"
        )
    return ImageReference(registry, name, tag or ("" if digest else "latest"), digest, text.strip())
