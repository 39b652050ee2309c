"""OCI references and registry credentials for ``oci://`` base models.

Credentials (a Docker ``config.json`` from the pull secret's environment variable) are returned to the caller only;
nothing here logs or formats them into a message.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping

from components._common import oci_reference
from components._common.oci_reference import OciReference

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

_DOCKER_HUB_ALIASES = ("docker.io", "index.docker.io", "registry-1.docker.io")


class OciModelError(ValueError):
    """An ``oci://`` base model cannot be used; the one-line message says what and what to fix (never a secret)."""


def parse_oci_uri(uri: str, source: str = "training_base_model") -> OciReference:
    """Parses an ``oci://`` base model reference (:func:`components._common.oci_reference.parse_oci_uri`).

    Raises:
        OciModelError: Not an ``oci://`` URI or not a valid OCI reference.
    """
    return oci_reference.parse_oci_uri(uri, source, OciModelError, "oci://quay.io/org/granite:1.0")


def docker_config_from_env(env: Mapping[str, str]) -> tuple[dict | None, str]:
    """The pull secret's config.json (:data:`PULL_SECRET_ENV`, else :data:`DOCKERCONFIGJSON_ENV`) and its variable.

    ``(None, "")`` when neither is set.

    Raises:
        OciModelError: The value is not a JSON object (the message names the variable, never the value).
    """
    variables = (PULL_SECRET_ENV, DOCKERCONFIGJSON_ENV)
    return oci_reference.docker_config_from_env(env, variables, OciModelError, SECRET_HINT)


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
