"""``oci://`` references and Docker ``config.json`` secrets, for ``oci://`` base models and modelcar push targets."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = re.compile(
    r"^(?P<registry>(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
    r"(?::[0-9]+)?|\[[0-9a-fA-F:]+\](?::[0-9]+)?)"
    rf"/(?P<repository>{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)
#: The form named in every error.
EXPECTED_FORM = "oci://<registry>[:port]/<repository>[:<tag>|@sha256:<64 hex digits>] with a lowercase repository"


@dataclasses.dataclass(frozen=True)
class OciReference:
    """A parsed ``oci://`` reference.

    Attributes:
        registry: ``host[:port]``.
        repository: ``path/name`` inside the registry.
        tag: The tag (``latest`` when neither tag nor digest is given; ``""`` when only a digest is).
        digest: ``sha256:<hex>`` when pinned, else ``""``.
    """

    registry: str
    repository: str
    tag: str
    digest: str

    @property
    def reference(self) -> str:
        """What the manifest is fetched by: the digest when pinned, else the tag."""
        return self.digest or self.tag

    def uri(self, digest: str = "") -> str:
        """``oci://registry/repository`` with the tag, or pinned to ``digest`` (or the given digest) when known."""
        base = f"oci://{self.registry}/{self.repository}"
        pinned = digest or self.digest
        return f"{base}@{pinned}" if pinned else f"{base}:{self.tag}"


def parse_oci_uri(uri: str, source: str, error: type[ValueError] = ValueError, example: str = "") -> OciReference:
    """Parses ``oci://<registry>/<repository>[:<tag>][@sha256:<digest>]`` (``source``: the parameter it came from).

    Raises:
        error: Not an ``oci://`` URI or not a valid OCI reference (one line naming ``source`` and the form).
    """
    match = _REFERENCE.match(uri[len("oci://") :]) if uri.startswith("oci://") else None
    if not match:
        why = "not a valid OCI reference" if uri.startswith("oci://") else "not an oci:// reference"
        raise error(f"{source}={uri!r}: {why}; expected {EXPECTED_FORM}" + (f" (e.g. {example})" if example else ""))
    tag, digest = match["tag"] or "", match["digest"] or ""
    return OciReference(match["registry"], match["repository"], tag or ("" if digest else "latest"), digest)


def docker_config_from_env(
    env: Mapping[str, str],
    variables: Sequence[str],
    error: type[ValueError],
    hint: str,
    remedy: str = "store the file's contents",
) -> tuple[dict | None, str]:
    """``(config, variable)``: a Docker ``config.json`` from the first of ``variables`` set, else ``(None, "")``.

    Raises:
        error: The value is not a JSON object (the message names the variable, never the value).
    """
    for variable in variables:
        text = (env.get(variable) or "").strip()
        if not text:
            continue
        try:
            config = json.loads(text)
        except json.JSONDecodeError as decode_error:
            why = f"invalid JSON at line {decode_error.lineno} column {decode_error.colno}"
        else:
            if isinstance(config, dict):
                return config, variable
            why = "not a JSON object"
        raise error(f"environment variable {variable} (from {hint}): not a Docker config.json ({why}); {remedy}")
    return None, ""
