"""The secrets the pipeline mounts exist with the keys the steps read (names only); the run's URIs make some needed."""

from __future__ import annotations

import dataclasses

from pipelines.doctor import facts as keys
from pipelines.doctor.cluster import ApiUnavailable, Cluster, Forbidden
from pipelines.doctor.facts import RunValues, SecretMount
from pipelines.doctor.report import Check, fail, ok, warn


@dataclasses.dataclass(frozen=True)
class SecretRole:
    """What a secret feeding ``env`` is for, the keys it needs (``any_one``: one is enough), the scheme needing it."""

    env: str
    required_env: tuple[str, ...]
    purpose: str
    scheme: str = ""
    any_one: bool = False


ROLES = (
    SecretRole(
        "KUBERNETES_AUTH_TOKEN",
        ("KUBERNETES_SERVER_URL", "KUBERNETES_AUTH_TOKEN"),
        "API access of the training step (without it: the pipeline's service account)",
    ),
    SecretRole("AWS_ACCESS_KEY_ID", ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"), "S3 access", "s3://"),
    SecretRole(
        "OCI_PULL_SECRET_MODEL_DOWNLOAD",
        ("OCI_PULL_SECRET_MODEL_DOWNLOAD", "OCI_PULL_SECRET_DOCKERCONFIGJSON"),
        "oci:// model pulls",
        "oci://",
        any_one=True,
    ),
    SecretRole("HF_TOKEN", ("HF_TOKEN",), "gated or private Hugging Face models and datasets"),
)
#: The run parameters whose URI scheme can make a secret necessary.
URI_PARAMETERS = (keys.DATASET_URI, keys.BASE_MODEL, keys.S3_UPLOAD_PREFIX)


def _create_command(mount: SecretMount, keys_: list[str], namespace: str) -> str:
    if ".dockerconfigjson" in keys_:
        return (
            f"`oc create secret docker-registry {mount.name} --docker-server=... --docker-username=... -n {namespace}`"
        )
    literals = " ".join(f"--from-literal={key}=..." for key in keys_)
    return f"`oc create secret generic {mount.name} {literals} -n {namespace}`"


def _one(cluster: Cluster, mount: SecretMount, values: RunValues) -> Check:
    envs = tuple(mount.keys.values())
    other = SecretRole("", envs, f"env {', '.join(sorted(envs))}")
    role = next((role for role in ROLES if role.env in envs), other)
    required = [key for key, env in mount.keys.items() if env in role.required_env]
    schemed = [key for key in URI_PARAMETERS if role.scheme and str(values.get(key) or "").startswith(role.scheme)]
    needed_by = [values.label(key) for key in schemed]  # the run parameters whose URI needs the secret
    present = cluster.secret_keys(mount.name)
    steps = ", ".join(mount.steps)
    if present is None:
        if needed_by:
            what = f"secret {mount.name!r} ({role.purpose}) is missing, and {', '.join(needed_by)} needs it"
            return fail("secrets", what, "create it: " + _create_command(mount, required, cluster.namespace))
        if role.env == "KUBERNETES_AUTH_TOKEN":
            what = f"secret {mount.name!r} is absent: the training step will use the pipeline's service account"
            return warn("secrets", what, "grant that service account rbac.yaml's permissions, or create the secret")
        return ok("secrets", f"secret {mount.name!r} is absent (optional: {role.purpose})")
    missing = [key for key in required if key not in present]
    if role.any_one and len(missing) < len(required):
        found = [key for key in required if key in present]
        return ok("secrets", f"secret {mount.name!r} has the key {found[0]} ({steps})")
    if not missing:
        return ok("secrets", f"secret {mount.name!r} has the keys {', '.join(required)} ({steps})")
    lacks = f"one of the keys {' / '.join(missing)}" if role.any_one else f"the key(s) {', '.join(missing)}"
    what = f"secret {mount.name!r} lacks {lacks} ({role.purpose}; it has {len(present)} key(s))"
    remedy = f"add {' or '.join(missing) if role.any_one else ', '.join(missing)} to it (`oc edit secret {mount.name}`)"
    if needed_by or role.env == "KUBERNETES_AUTH_TOKEN":
        return fail("secrets", what, remedy)
    return warn("secrets", what, remedy)


def check_secrets(cluster: Cluster, values: RunValues) -> list[Check]:
    """One finding per mounted secret; one WARN instead when secrets cannot be read."""
    checks = []
    for mount in values.facts.secrets.values():
        try:
            checks.append(_one(cluster, mount, values))
        except Forbidden as error:
            names = ", ".join(values.facts.secrets)
            what = (
                f"cannot read secrets in {cluster.namespace} (get secrets is forbidden: {error}); {names} not checked"
            )
            return [warn("secrets", what, "run doctor as a project admin, or check with `oc describe secret NAME`")]
        except ApiUnavailable as error:
            checks.append(warn("secrets", f"could not read secret {mount.name!r}: {error}", "check the API server"))
    return checks
