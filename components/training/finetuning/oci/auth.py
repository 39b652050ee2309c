"""OCI references and registry credentials for ``oci://`` base models.

* :func:`parse_oci_uri`: ``oci://<registry>/<repository>[:<tag>|@sha256:<digest>]`` checked against the OCI
  distribution grammar, so a typo fails before anything is pulled or submitted.
* :func:`docker_config_from_env` / :func:`credentials_for`: the pull secret, a Docker ``config.json``
  (``{"auths": {"<host>": {"auth": base64("user:pass")}}}`` or ``username``/``password``), from the environment
  variable the pipelines fill from the ``oci-pull-secret-model-download`` secret. Credentials are returned to the
  caller only; nothing here logs or formats them into a message.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
from collections.abc import Mapping

#: The env var holding the pull secret's Docker config.json: the guide's key ``OCI_PULL_SECRET_MODEL_DOWNLOAD``.
PULL_SECRET_ENV = "OCI_PULL_SECRET_MODEL_DOWNLOAD"
#: Also read: the same secret's ``.dockerconfigjson`` key (a ``kubernetes.io/dockerconfigjson`` pull secret, as made
#: by ``oc create secret docker-registry``), which the pipelines mount under this name.
DOCKERCONFIGJSON_ENV = "OCI_PULL_SECRET_DOCKERCONFIGJSON"
#: The secret the pipelines mount (default name; ``--oci-pull-secret`` at compile time changes it).
PULL_SECRET_NAME = "oci-pull-secret-model-download"
SECRET_HINT = (
    f"secret {PULL_SECRET_NAME!r} (or the one named at compile time), key {PULL_SECRET_ENV!r} (or '.dockerconfigjson')"
)

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = re.compile(
    r"^(?P<registry>(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
    r"(?::[0-9]+)?|\[[0-9a-fA-F:]+\](?::[0-9]+)?)"
    rf"/(?P<repository>{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)
_DOCKER_HUB_ALIASES = ("docker.io", "index.docker.io", "registry-1.docker.io")


class OciModelError(ValueError):
    """An ``oci://`` base model cannot be used; the one-line message says what and what to fix (never a secret)."""


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


def parse_oci_uri(uri: str, source: str = "training_base_model") -> OciReference:
    """Parses ``oci://<registry>/<repository>[:<tag>|@sha256:<digest>]``.

    Args:
        uri: The reference.
        source: The parameter it came from (named in the error).

    Returns:
        The parsed reference.

    Raises:
        OciModelError: Not an ``oci://`` URI or not a valid OCI reference.
    """
    if not uri.startswith("oci://"):
        raise OciModelError(f"{source}={uri!r}: not an oci:// reference")
    match = _REFERENCE.match(uri[len("oci://") :])
    if not match:
        raise OciModelError(
            f"{source}={uri!r}: not a valid OCI reference; expected oci://<registry>[:port]/<repository>"
            "[:<tag>|@sha256:<64 hex digits>] with a lowercase repository (e.g. oci://quay.io/org/granite:1.0)"
        )
    tag, digest = match["tag"] or "", match["digest"] or ""
    return OciReference(match["registry"], match["repository"], tag or ("" if digest else "latest"), digest)


def docker_config_from_env(env: Mapping[str, str]) -> tuple[dict | None, str]:
    """The pull secret's Docker config.json, and the env var it came from.

    Args:
        env: The environment (:data:`PULL_SECRET_ENV` first, then :data:`DOCKERCONFIGJSON_ENV`).

    Returns:
        ``(config, variable)``; ``(None, "")`` when neither is set.

    Raises:
        OciModelError: The value is not a JSON object (the message names the variable, never the value).
    """
    for variable in (PULL_SECRET_ENV, DOCKERCONFIGJSON_ENV):
        text = (env.get(variable) or "").strip()
        if not text:
            continue
        try:
            config = json.loads(text)
        except json.JSONDecodeError as error:
            raise OciModelError(
                f"environment variable {variable} (from {SECRET_HINT}): not a Docker config.json "
                f"(invalid JSON at line {error.lineno} column {error.colno}); store the file's contents"
            ) from None
        if not isinstance(config, dict):
            raise OciModelError(f"environment variable {variable} (from {SECRET_HINT}): not a JSON object")
        return config, variable
    return None, ""


def _host_of(key: str) -> str:
    """``https://quay.io/v1/`` -> ``quay.io``: config.json keys may be URLs."""
    host = re.sub(r"^[a-z]+://", "", key.strip().lower())
    return host.split("/", 1)[0]


def _hosts(registry: str) -> tuple[str, ...]:
    registry = registry.lower()
    return _DOCKER_HUB_ALIASES if registry in _DOCKER_HUB_ALIASES else (registry,)


def credentials_for(config: Mapping | None, registry: str, variable: str = PULL_SECRET_ENV) -> tuple[str, str] | None:
    """The ``(username, password)`` a Docker config.json holds for ``registry``, or ``None``.

    Entries are matched by host (``quay.io``, ``https://quay.io``, ``quay.io/v1/`` all match ``quay.io``); an entry
    has ``auth`` (base64 ``user:password``) or ``username`` and ``password``. A config without ``auths`` is read as a
    legacy ``.dockercfg`` (the host entries at the top level).

    Raises:
        OciModelError: The matching entry is malformed (names the host and variable, never the value).
    """
    if not config:
        return None
    auths = config.get("auths") if isinstance(config.get("auths"), dict) else config
    wanted = _hosts(registry)
    for key, entry in auths.items():
        if _host_of(str(key)) not in wanted or not isinstance(entry, dict):
            continue
        where = f"auths[{key!r}] in {variable} (from {SECRET_HINT})"
        if entry.get("auth"):
            try:
                username, separator, password = (
                    base64.b64decode(str(entry["auth"]), validate=True).decode().partition(":")
                )
            except (binascii.Error, UnicodeDecodeError):
                raise OciModelError(f"{where}: 'auth' is not base64 of 'user:password'") from None
            if not separator:
                raise OciModelError(f"{where}: 'auth' decodes to no 'user:password' pair")
            return username, password
        if entry.get("username") and entry.get("password"):
            return str(entry["username"]), str(entry["password"])
        raise OciModelError(f"{where}: needs 'auth' (base64 user:password) or 'username' and 'password'")
    return None
