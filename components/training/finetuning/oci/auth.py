"""OCI references and pull-secret credentials for ``oci://`` base models (never logged or put in a message)."""

from __future__ import annotations

from collections.abc import Mapping

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


class OciModelError(ValueError):
    """An ``oci://`` base model cannot be used; the one-line message says what to fix (never a secret)."""


def parse_oci_uri(uri: str, source: str = "training_base_model") -> OciReference:
    """Parses an ``oci://`` base model reference (:class:`OciModelError` when it is not one)."""
    return oci_reference.parse_oci_uri(uri, source, OciModelError, "oci://quay.io/org/granite:1.0")


def docker_config_from_env(env: Mapping[str, str]) -> tuple[dict | None, str]:
    """``(config.json, variable)`` from :data:`PULL_SECRET_ENV` or :data:`DOCKERCONFIGJSON_ENV`; ``(None, "")``.

    Raises:
        OciModelError: The value is not a JSON object (naming the variable, never the value).
    """
    variables = (PULL_SECRET_ENV, DOCKERCONFIGJSON_ENV)
    return oci_reference.docker_config_from_env(env, variables, OciModelError, SECRET_HINT)


def credentials_for(config: Mapping | None, registry: str, variable: str = PULL_SECRET_ENV) -> tuple[str, str] | None:
    """The ``(username, password)`` for ``registry``, or ``None``.

    Raises:
        OciModelError: The matching entry is malformed (naming the host and variable, never the value).
    """

    def refuse(entry: str, problem: str) -> OciModelError:
        return OciModelError(f"{entry} in {variable} (from {SECRET_HINT}): {problem}")

    return oci_reference.credentials_for(config, registry, malformed=refuse)
