"""``oci://`` references and Docker ``config.json`` secrets (base models, modelcar targets, image checks)."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence

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
    """A parsed ``oci://`` reference (``tag`` ``latest`` when neither tag nor digest is given)."""

    registry: str
    repository: str
    tag: str
    digest: str

    @property
    def reference(self) -> str:
        """What the manifest is fetched by: the digest when pinned, else the tag."""
        return self.digest or self.tag

    def uri(self, digest: str = "") -> str:
        """``oci://registry/repository`` with the tag, or pinned to ``digest`` (or its own) when known."""
        base = f"oci://{self.registry}/{self.repository}"
        pinned = digest or self.digest
        return f"{base}@{pinned}" if pinned else f"{base}:{self.tag}"


def parse_oci_uri(uri: str, source: str, error: type[ValueError] = ValueError, example: str = "") -> OciReference:
    """Parses an ``oci://`` reference given as ``source`` (raising ``error`` naming the form when it is not one)."""
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
        error: The value is not a JSON object (naming the variable, never the value).
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


#: Docker Hub's names: an entry for any of them serves all of them.
DOCKER_HUB_ALIASES = ("docker.io", "index.docker.io", "registry-1.docker.io")


def auths_of(config: Mapping | None) -> dict:
    """The host entries of a Docker ``config.json`` (its ``auths``), or of a legacy ``.dockercfg`` (the top level)."""
    if not isinstance(config, Mapping):
        return {}
    return dict(config["auths"] if isinstance(config.get("auths"), Mapping) else config)


def credentials_for(
    config: Mapping | None, registry: str, malformed: Callable[[str, str], Exception] | None = None
) -> tuple[str, str] | None:
    """The ``(username, password)`` a Docker config.json holds for ``registry`` (matched by host), or ``None``.

    ``malformed(entry, problem)`` builds the error raised for a malformed matching entry; ``None`` skips it.
    """
    registry = registry.lower()
    wanted = DOCKER_HUB_ALIASES if registry in DOCKER_HUB_ALIASES else (registry,)
    for key, entry in auths_of(config).items():
        host = re.sub(r"^[a-z]+://", "", str(key).strip().lower()).split("/", 1)[0]
        if host not in wanted or not isinstance(entry, Mapping):
            continue
        problem = "needs 'auth' (base64 user:password) or 'username' and 'password'"
        if entry.get("auth"):
            try:
                username, separator, password = (
                    base64.b64decode(str(entry["auth"]), validate=True).decode().partition(":")
                )
            except (binascii.Error, UnicodeDecodeError):
                separator, problem = "", "'auth' is not base64 of 'user:password'"
            else:
                problem = "'auth' decodes to no 'user:password' pair"
            if separator:
                return username, password
        elif entry.get("username") and entry.get("password"):
            return str(entry["username"]), str(entry["password"])
        if malformed is not None:
            raise malformed(f"auths[{key!r}]", problem)
    return None
