"""Container image references as a container runtime reads them (``python:3.11`` is ``docker.io/library/python:3.11``).

As distribution's ``reference/normalize.go``: the first path component is a registry when it contains ``.`` or ``:``
or is ``localhost``, else the image is on Docker Hub; no tag and no digest means ``:latest``.
"""

from __future__ import annotations

import dataclasses
import ipaddress

from components._common.oci_reference import parse_oci_uri

DOCKER_HUB = "docker.io"
#: The host that serves Docker Hub's registry API (``docker.io`` itself does not).
DOCKER_HUB_API = "registry-1.docker.io"


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
