"""The launcher (and runtime) the run will train with, the TrainJob API it meets, and the permissions it needs.

The launcher resolves through the training step's own discovery; the permissions are ``rbac.yaml``'s rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from components.training import finetuning
from components.training.finetuning.cluster.discovery import discover_trainjob_api
from components.training.finetuning.cluster.errors import JobError
from components.training.finetuning.cluster.runtimes import RUNTIME_PLURALS
from components.training.finetuning.config import runtime_name_of
from components.training.finetuning.manifests.api_generations import POD_TEMPLATE_OVERRIDES, TrainJobApi
from components.training.finetuning.pod import hub_compat
from pipelines.doctor import facts as keys
from pipelines.doctor.cluster import ApiUnavailable, Cluster, Forbidden
from pipelines.doctor.facts import RunValues
from pipelines.doctor.report import Check, fail, ok, warn

#: The training step's RBAC manifest: the one source of truth of the calls it makes.
RBAC_FILE = Path(finetuning.__file__).resolve().with_name("rbac.yaml")
TRAINJOB, PYTORCHJOB, LOCAL, AUTO = "trainjob", "pytorchjob", "local", "auto"
#: Permissions the training step runs without, losing a safety net (reading its pod: the job's ownerReference).
OPTIONAL = {("", "pods", "get"): "the job gets no ownerReference: deleting the run will not delete the job"}


@dataclasses.dataclass(frozen=True)
class Permission:
    """One (group, resource ``plural[/subresource]``, verb) the training step needs; ``cluster``: a ClusterRole's."""

    group: str
    resource: str
    verb: str
    cluster: bool


def _named(permissions: list[Permission]) -> str:
    """``create trainjobs.trainer.kubeflow.org, get pods``."""
    return ", ".join(f"{p.verb} {p.resource}{'.' + p.group if p.group else ''}" for p in permissions)


def rbac_permissions() -> list[Permission]:
    """Every (group, resource, verb) the Roles and ClusterRoles of ``rbac.yaml`` grant, in file order."""
    found: list[Permission] = []
    for document in yaml.safe_load_all(RBAC_FILE.read_text(encoding="utf-8")):
        if not document or document.get("kind") not in ("Role", "ClusterRole"):
            continue
        for rule in document.get("rules") or []:
            for group in rule.get("apiGroups") or [""]:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        found.append(Permission(group, resource, verb, document["kind"] == "ClusterRole"))
    return found


def check_launcher(cluster: Cluster, values: RunValues) -> tuple[list[Check], str]:
    """The launcher's CRDs are served and its runtime exists; returns the launcher ``auto`` resolves to.

    ``auto``: ``trainjob`` when Trainer serves ``trainjobs`` and the runtime exists, else ``pytorchjob`` if served.
    """
    from components.training.finetuning.cluster import discovery, launchers

    launcher = str(values.get(keys.LAUNCHER) or AUTO)
    setting = values.label(keys.LAUNCHER)
    if launcher not in (AUTO, TRAINJOB, PYTORCHJOB, LOCAL):
        remedy = f"set {setting} to one of {AUTO}, {TRAINJOB}, {PYTORCHJOB}, {LOCAL}"
        return [fail("launcher", f"launcher {launcher!r} is not a launcher", remedy)], TRAINJOB
    if launcher == LOCAL:
        what = "launcher 'local': training runs in the pipeline step's pod (CPU); no Trainer nor Operator needed"
        return [ok("launcher", what)], LOCAL
    runtime_name = runtime_name_of(str(values.get(keys.RUNTIME_NAME) or ""), str(values.get(keys.BACKEND) or ""))
    runtime_kind = str(values.get(keys.RUNTIME_KIND))
    namespace = values.get(keys.JOB_NAMESPACE) or cluster.namespace
    trainer = launchers.LAUNCHER_RESOURCES[TRAINJOB]
    operator = launchers.LAUNCHER_RESOURCES[PYTORCHJOB]
    runtime_setting = f"{values.label(keys.RUNTIME_NAME)} / {values.label(keys.RUNTIME_KIND)}"
    if runtime_kind not in RUNTIME_PLURALS:
        remedy = f"set {values.label(keys.RUNTIME_KIND)} to one of {sorted(RUNTIME_PLURALS)}"
        return [fail("launcher", f"runtime kind {runtime_kind!r} is not a training runtime kind", remedy)], launcher
    try:
        trainer_served = launcher != PYTORCHJOB and all(
            discovery.resource_served(cluster.api, trainer[0], trainer[1], plural)
            for plural in (trainer[2], RUNTIME_PLURALS[runtime_kind])
        )
        runtime = launchers.runtime_state(cluster.api, runtime_name, runtime_kind, namespace) if trainer_served else ""
        operator_served = launcher != TRAINJOB and discovery.resource_served(cluster.api, *operator)
    except (JobError, ApiUnavailable) as error:
        return [warn("launcher", f"could not discover the training APIs: {error}", "check the API server")], launcher
    trainer_crds = f"Kubeflow Trainer v2 CRDs ({trainer[2]}, {RUNTIME_PLURALS[runtime_kind]}.{trainer[0]})"
    operator_crd = f"PyTorchJob CRD ({operator[2]}.{operator[0]}/{operator[1]})"
    runtime_what = f"{runtime_kind} {runtime_name!r}"
    if launcher == PYTORCHJOB:
        if operator_served:
            return [ok("launcher", f"launcher 'pytorchjob': {operator_crd} is served")], PYTORCHJOB
        remedy = f"install the Kubeflow Training Operator v1, or set {setting} to trainjob or auto"
        return [fail("launcher", f"launcher 'pytorchjob': {operator_crd} is not served", remedy)], PYTORCHJOB
    if trainer_served and runtime in ("found", "forbidden"):
        note = "exists" if runtime == "found" else "exists or cannot be read (forbidden; see the permissions lines)"
        return [ok("launcher", f"launcher {launcher!r}: {trainer_crds} are served and {runtime_what} {note}")], TRAINJOB
    if not trainer_served:
        problem = f"{trainer_crds} are not served"
        remedy = "enable Kubeflow Trainer (OpenShift AI: the trainer component of the DataScienceCluster)"
    else:
        problem = f"{runtime_what} is {runtime}"
        remedy = f"set {runtime_setting} to an existing runtime, or create {runtime_what}"
    if launcher == AUTO and operator_served:
        image = values.get(keys.TRAINING_IMAGE)
        fallback = f"launcher 'auto' will use the {operator_crd} because {problem}"
        if not image:
            remedy = f"{remedy}; or set {values.label(keys.TRAINING_IMAGE)} (a PyTorchJob needs an image)"
            return [
                fail("launcher", fallback + f", but {values.label(keys.TRAINING_IMAGE)} is empty", remedy)
            ], PYTORCHJOB
        return [warn("launcher", fallback, remedy)], PYTORCHJOB
    if launcher == AUTO:
        remedy += f"; or install the Training Operator v1 (PyTorchJob), or set {setting} to local for a CPU run"
    return [fail("launcher", f"launcher {launcher!r}: {problem}", remedy)], TRAINJOB


def check_permissions(cluster: Cluster, values: RunValues, launcher: str) -> list[Check]:
    """A SelfSubjectAccessReview of each rbac.yaml permission the launcher uses (a ClusterRole's denied: a WARN)."""
    if launcher == LOCAL:
        return [ok("permissions", "launcher 'local': the training step makes no Kubernetes API calls")]
    from components.training.finetuning.cluster.launchers import LAUNCHER_RESOURCES

    other_launcher_group = LAUNCHER_RESOURCES[PYTORCHJOB if launcher == TRAINJOB else TRAINJOB][0]
    needed = [p for p in rbac_permissions() if p.group != other_launcher_group]
    namespace = values.get(keys.JOB_NAMESPACE) or cluster.namespace
    try:
        denied = [
            p for p in needed if not cluster.allowed(p.group, p.resource, p.verb, None if p.cluster else namespace)
        ]
    except (Forbidden, ApiUnavailable) as error:
        what = f"could not review access (SelfSubjectAccessReview): {error}"
        return [warn("permissions", what, "check the API server")]
    rbac = f"apply {RBAC_FILE.relative_to(RBAC_FILE.parents[3])} (edit its namespace and service account)"
    identity = "the identity doctor runs as"
    checks = []
    optional = [p for p in denied if (p.group, p.resource, p.verb) in OPTIONAL]
    role = [p for p in denied if not p.cluster and p not in optional]
    cluster_role = [p for p in denied if p.cluster]
    if role:
        checks.append(fail("permissions", f"{identity} may not {_named(role)} in namespace {namespace}", rbac))
    if cluster_role:
        what = f"{identity} may not {_named(cluster_role)} (cluster-wide)"
        consequence = "the training step cannot check the runtime exists"
        checks.append(warn("permissions", f"{what}: {consequence}", rbac + " (its ClusterRole part)"))
    for permission in optional:
        consequence = OPTIONAL[(permission.group, permission.resource, permission.verb)]
        what = f"{identity} may not {_named([permission])} in namespace {namespace}: {consequence}"
        checks.append(warn("permissions", what, rbac))
    if not denied:
        what = f"{identity} may make all {len(needed)} calls the training step makes ({launcher})"
        checks.append(ok("permissions", f"{what} in namespace {namespace}"))
    return checks


#: The Training Hub the RHOAI runtime images carry (their image definitions' pins; tests/specs/crds/odh-*/).
KNOWN_IMAGES = {
    "quay.io/modh/training:py312-cuda128-torch280": ("RHOAI 3.3", "0.3.0"),
    "quay.io/opendatahub/odh-th06-cuda130-torch210-py312:odh-3.5-ea1": ("RHOAI 3.5", "0.6.0"),
}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2] if part.isdigit())


#: Training Hub's ``enable_jit_checkpoint`` (a checkpoint on SIGTERM, when a job is paused).
JIT_CHECKPOINT_SINCE = _version(hub_compat.JIT_CHECKPOINT_SINCE)


def jit_checkpoints(api: TrainJobApi, hub_version: str) -> str:
    """Whether a paused job saves a just-in-time checkpoint (from the runtime's Training Hub, or the generation)."""
    if hub_version:
        if _version(hub_version) >= JIT_CHECKPOINT_SINCE:
            return f"JIT checkpoints on pause: available (Training Hub {hub_version})"
        return (
            f"JIT checkpoints on pause: not available (Training Hub {hub_version} has no enable_jit_checkpoint; "
            "a paused job resumes from its last periodic checkpoint)"
        )
    if api.generation == POD_TEMPLATE_OVERRIDES:
        return "JIT checkpoints on pause: not in RHOAI 3.3-3.5's runtime images (Training Hub 0.3.0 / 0.6.0)"
    return (
        f"JIT checkpoints on pause: available where the runtime's Training Hub is >= {hub_compat.JIT_CHECKPOINT_SINCE} "
        "(not in RHOAI 3.6's images: 0.9.x)"
    )


def runtime_image(runtime: Mapping[str, Any]) -> str:
    """The image of the trainer container ``node`` of a (Cluster)TrainingRuntime (``""``: none)."""
    job = "node"
    jobs = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or []
    for replicated in jobs:
        if replicated.get("name") != job:
            continue
        pod = (((replicated.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod.get("containers") or []:
            if container.get("name") == job and container.get("image"):
                return str(container["image"])
    return ""


def image_check(cluster: Cluster, values: RunValues) -> tuple[Check, str]:
    """The line naming the training pods' image, and the Training Hub version it is known to carry (``""``)."""
    image = str(values.get(keys.TRAINING_IMAGE) or "")
    source = values.label(keys.TRAINING_IMAGE)
    if not image:
        name = runtime_name_of(str(values.get(keys.RUNTIME_NAME) or ""), str(values.get(keys.BACKEND) or ""))
        kind = str(values.get(keys.RUNTIME_KIND))
        if kind not in RUNTIME_PLURALS:
            return ok("launcher", f"runtime kind {kind!r} is not a runtime kind: no image to name"), ""
        namespace = values.get(keys.JOB_NAMESPACE) or cluster.namespace
        try:
            runtime = cluster.training_runtime(name, kind, namespace)
        except (Forbidden, ApiUnavailable) as error:
            return ok("launcher", f"the runtime's image is unknown: {kind} {name!r} cannot be read ({error})"), ""
        if runtime is None:
            return ok("launcher", f"the runtime's image is unknown: {kind} {name!r} does not exist"), ""
        image, source = runtime_image(runtime), f"{kind} {name!r}"
        if not image:
            return ok("launcher", f"{source} names no image for its trainer container 'node'"), ""
    release, hub = KNOWN_IMAGES.get(image, ("", ""))
    carries = f" ({release}'s image: Training Hub {hub})" if hub else ""
    return ok("launcher", f"training pods run {image} (from {source}){carries}"), hub


def check_trainer_api(cluster: Cluster, values: RunValues, launcher: str) -> list[Check]:
    """The TrainJob API generation and what follows, then the training pods' image (``trainjob`` only)."""
    if launcher != "trainjob":
        return []
    served = discover_trainjob_api(cluster.api)  # a failed discovery answers the assumed generation
    image_line, hub = image_check(cluster, values)
    what = f"{served.describe()}: {served.consequences()}; {jit_checkpoints(served, hub)}"
    if served.discovered:
        return [ok("launcher", f"{what} (OpenAPI v3 discovery)"), image_line]
    remedy = (
        "the training step makes the same assumption and a Strict create corrects it once; to let it ask, allow GET "
        "on /openapi/v3/* (the system:discovery ClusterRole)"
    )
    return [warn("launcher", f"{what} ({served.source})", remedy), image_line]
