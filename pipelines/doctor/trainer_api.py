"""The TrainJob API generation the cluster serves, what follows from it, and the image the training pods run.

The generation comes from the training step's own discovery; the image from ``training_image``, else the runtime's
trainer container, with the Training Hub version the known RHOAI images carry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.training.finetuning.cluster.discovery import discover_trainjob_api
from components.training.finetuning.cluster.runtimes import RUNTIME_PLURALS
from components.training.finetuning.config import runtime_name_of
from components.training.finetuning.manifests.api_generations import POD_TEMPLATE_OVERRIDES, TrainJobApi
from components.training.finetuning.pod import hub_compat
from pipelines.doctor import facts as keys
from pipelines.doctor.cluster import ApiUnavailable, Cluster, Forbidden
from pipelines.doctor.facts import RunValues
from pipelines.doctor.report import Check, ok, warn

#: The Training Hub the RHOAI runtime images carry (their image definitions' pins; tests/specs/crds/odh-*/).
KNOWN_IMAGES = {
    "quay.io/modh/training:py312-cuda128-torch280": ("RHOAI 3.3", "0.3.0"),
    "quay.io/opendatahub/odh-th06-cuda130-torch210-py312:odh-3.5-ea1": ("RHOAI 3.5", "0.6.0"),
}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2] if part.isdigit())


#: Training Hub's ``enable_jit_checkpoint`` (a checkpoint on SIGTERM, when a job is paused): the pod command's fact.
JIT_CHECKPOINT_SINCE = _version(hub_compat.JIT_CHECKPOINT_SINCE)


def jit_checkpoints(api: TrainJobApi, hub_version: str) -> str:
    """Whether a paused job saves a just-in-time checkpoint, from the runtime's Training Hub (or the generation)."""
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
    """The image of the trainer container ``node`` of job ``node`` in a (Cluster)TrainingRuntime (``""``: none)."""
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
    """The TrainJob API generation and what follows, then the training pods' image (TrainJob launchers only)."""
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
