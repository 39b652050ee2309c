"""OCI references and registry credentials for ``oci://`` base models.

Credentials (a Docker ``config.json`` from the pull secret's environment variable) are returned to the caller only;
nothing here logs or formats them into a message.
"""

from __future__ import annotations

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


def credentials_for(config: Mapping | None, registry: str, variable: str = PULL_SECRET_ENV) -> tuple[str, str] | None:
    """The ``(username, password)`` a Docker config.json holds for ``registry`` (:func:`oci_reference.credentials_for`).

    Raises:
        OciModelError: The matching entry is malformed (names the host and variable, never the value).
    """

    def refuse(entry: str, problem: str) -> OciModelError:
        return OciModelError(f"{entry} in {variable} (from {SECRET_HINT}): {problem}")

    return oci_reference.credentials_for(config, registry, malformed=refuse)
