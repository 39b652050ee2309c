"""The remote evaluation backends (``lmevaljob``, ``evalhub``) and the hardware profile of every backend.

The remote ones read the model and held-out tasks on the workspace PVC, check the model is the trained one, and return
lm-eval's results dict.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import inspect
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from components._common.model_location import STORAGE_ARTIFACT, build_manifest, read_manifest
from components.evaluation.lm_eval import custom_task
from components.evaluation.lm_eval.config import HarnessOptions, LmEvalRequest, RemoteOptions
from components.evaluation.lm_eval.custom_task import HELDOUT_TASKS

#: Where the remote backends' inputs go on the workspace.
WORKSPACE_DIR = "lm_eval"
#: Seconds between two polls of a remote evaluation's state (default 10).
POLL_SECONDS_ENV = "KFP_FINETUNE_EVAL_POLL_SECONDS"
#: The module the held-out YAMLs' ``!function`` tags name on the PVC (a copy of the two functions they use).
HELDOUT_FUNCTIONS_MODULE = "heldout_functions"
#: The Model artifact's metadata key that records the trained model's manifest digest (``sha256:<hex>``).
DIGEST_KEY = "weights_digest"


class WrongModelError(ValueError):
    """The model evaluated is not the trained one (one line)."""


@dataclasses.dataclass(frozen=True)
class RemoteEvaluation:
    """One evaluation for a remote backend: the model and tasks on the workspace PVC (relative), options, profile."""

    name: str
    namespace: str
    pvc_name: str
    model_relative: str
    model_digest: str
    task_names: tuple[str, ...]
    tasks_relative: str
    harness: HarnessOptions
    remote: RemoteOptions
    profile: Any
    poll_seconds: float
    log: Callable[[str], None]


def trained_model_digest(model_path: str, model_dir: Path, metadata: Mapping[str, Any]) -> str:
    """The manifest digest of the model evaluated; ``WrongModelError`` when not the artifact's ``weights_digest``."""
    manifest = read_manifest(model_path) if model_path else None
    actual = (manifest or build_manifest(model_dir, STORAGE_ARTIFACT, in_artifact=True)).digest
    expected = str(metadata.get(DIGEST_KEY) or "")
    if expected and expected != actual:
        raise WrongModelError(
            f"refusing to evaluate {model_dir}: its manifest digest {actual} is not the trained model's {DIGEST_KEY} "
            f"{expected} (Model artifact metadata); the artifact or the workspace holds another model than the one "
            "train_model wrote"
        )
    return actual


def check_same_location(submitted: str, evaluated: str, where: str) -> None:
    """Refuses (``WrongModelError``) the results of an evaluation whose model is not the one submitted."""
    if evaluated.rstrip("/") != submitted.rstrip("/"):
        raise WrongModelError(
            f"refusing the results of {where}: it evaluated {evaluated or '(no model)'}, not the trained model "
            f"{submitted}; delete that evaluation or let the step create its own"
        )


def workspace_claim(pod: Mapping[str, Any], pvc_path: str) -> str:
    """The PVC mounted at ``pvc_path`` in a pod; ``ValueError`` when none is."""
    spec = pod.get("spec") or {}
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    for container in spec.get("containers") or []:
        for mount in container.get("volumeMounts") or []:
            if mount.get("mountPath", "").rstrip("/") == pvc_path.rstrip("/"):
                claim = (volumes.get(mount.get("name")) or {}).get("persistentVolumeClaim") or {}
                if claim.get("claimName"):
                    return str(claim["claimName"])
    raise ValueError(f"pvc_path={pvc_path!r}: no PVC of this step's pod is mounted there")


def profile_mismatches(profile: Any, pod: Mapping[str, Any]) -> list[str]:
    """What the step's own pod lacks of a profile (resources, tolerations, node selector), one item each."""
    spec = pod.get("spec") or {}
    container = (spec.get("containers") or [{}])[0]
    requests = (container.get("resources") or {}).get("requests") or {}
    missing = [f"{key}={value}" for key, value in profile.counts.items() if str(requests.get(key)) != str(value)]
    missing += [f"toleration {dict(t)}" for t in profile.tolerations if dict(t) not in (spec.get("tolerations") or [])]
    selector = spec.get("nodeSelector") or {}
    missing += [f"nodeSelector {k}={v}" for k, v in profile.node_selector.items() if selector.get(k) != v]
    return missing


def evaluation_name(model_location: str, task_names: Sequence[str], prefix: str = "lmeval") -> str:
    """The remote evaluation's name: this pod's, plus a hash of what it evaluates (a retried pod gets a new one)."""
    pod = os.environ.get("HOSTNAME", "lm-eval")
    return f"{prefix}-" + hashlib.sha256(f"{pod}/{model_location}/{','.join(task_names)}".encode()).hexdigest()[:10]


def _copy_to(source: Path, target: Path) -> Path:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    return target


def make_tasks_portable(task_dir: Path, pod_dir: str, written_in: Path) -> None:
    """Rewrites the held-out YAMLs in ``task_dir`` (copied from ``written_in``) for a pod mounting it at ``pod_dir``.

    That pod lacks this project: the ``!function`` tags name a copy of the two functions beside the YAMLs.
    """
    functions = [custom_task.perplexity_process_results, custom_task.token_loss]
    module = "from __future__ import annotations\n\n\n" + "\n\n".join(inspect.getsource(f) for f in functions)
    (task_dir / f"{HELDOUT_FUNCTIONS_MODULE}.py").write_text(module, encoding="utf-8")
    for yaml_file in task_dir.glob("*.yaml"):
        text = yaml_file.read_text(encoding="utf-8").replace(f"{custom_task.__name__}.", f"{HELDOUT_FUNCTIONS_MODULE}.")
        yaml_file.write_text(text.replace(str(written_in), pod_dir), encoding="utf-8")


def _own_pod(api_client: Any, namespace: str) -> dict[str, Any]:
    """This step's pod (``{}`` when it cannot be read: outside a cluster, no permission)."""
    from kubernetes import client

    name = os.environ.get("KFP_POD_NAME") or os.environ.get("HOSTNAME", "")
    try:
        pod = client.CoreV1Api(api_client).read_namespaced_pod(name, namespace, _request_timeout=(5.0, 30.0))
    except client.ApiException:
        return {}
    return api_client.sanitize_for_serialization(pod)


def evaluate_on_backend(
    request: LmEvalRequest,
    spec: Any,
    names: Sequence[str],
    staged_heldout: Path | None,
    log: Callable[[str], None],
    api_client: Any = None,
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """Reads the hardware profile, evaluates on ``eval_backend``; returns ``(results or None for lm-eval, lineage)``.

    Raises:
        HardwareProfileError: The profile is missing or disabled (the line lists those that exist), or does not fit.
        WrongModelError: The model evaluated is not the trained one.
        ValueError: The model is not a local directory the backend can read from the workspace.
    """
    from components._common.hardware_profiles import PLATFORM_NAMESPACES, read_hardware_profile
    from components._common.kube_auth import load_api_client
    from components._common.namespace import pod_namespace

    api_client = api_client or load_api_client()
    namespace, remote = pod_namespace(), request.remote
    backend = remote.eval_backend
    lineage: dict[str, Any] = {"eval_backend": backend}
    profile = None
    if remote.hardware_profile:
        namespaces = [namespace, *PLATFORM_NAMESPACES]
        profile = read_hardware_profile(api_client, remote.hardware_profile, namespaces, "hardware_profile")
        lineage["hardware_profile"] = profile.name
        log(f"hardware profile {profile.summary()}")
    pod = _own_pod(api_client, namespace)
    if not remote.is_remote:
        missing = (profile_mismatches(profile, pod) if pod else ["(this pod could not be read)"]) if profile else []
        if missing:  # compared with this pod (KFP compiled it), never applied
            log(f"this step's pod lacks what hardware profile {profile.name} sets: {'; '.join(missing)}")
            lineage["hardware_profile_missing"] = missing
        return None, lineage
    if spec.is_adapter:
        raise ValueError(
            f"eval_backend={backend!r}: {spec.source} is a PEFT adapter on {spec.base_model}; the LMEvalJob and "
            "EvalHub load one full model (pretrained=<path>): evaluate it with eval_backend='lm-eval', or train with "
            "merged LoRA weights"
        )
    model_dir = Path(spec.source)  # the manifest's weights on the workspace, or model_source's directory
    if not model_dir.is_dir():
        raise ValueError(
            f"eval_backend={backend!r}: the model {spec.source} is not a local directory; the remote backends "
            "evaluate a model on the workspace (wire train_model's output_model, pass pvc_path)"
        )
    model_path = "" if request.load.model_source else request.model.path
    digest = trained_model_digest(model_path, model_dir, request.model.metadata)
    workspace = Path(request.pvc_path).resolve()
    name = evaluation_name(str(model_dir), names, "lmeval" if backend == "lmevaljob" else "kfp-finetune")
    tasks_relative = ""
    if staged_heldout is not None and set(names) & set(HELDOUT_TASKS):
        heldout_dir = _copy_to(staged_heldout, workspace / WORKSPACE_DIR / name / "heldout")
        tasks_relative = str(heldout_dir.relative_to(workspace))
    if not model_dir.resolve().is_relative_to(workspace):  # a local base model, the local launcher's artifact
        model_dir = _copy_to(model_dir, workspace / WORKSPACE_DIR / name / "model")
        log(f"model {spec.source} copied onto the workspace: {model_dir}")
    model_relative = str(model_dir.resolve().relative_to(workspace))
    evaluation = RemoteEvaluation(
        name=name,
        namespace=namespace,
        pvc_name=workspace_claim(pod, request.pvc_path),
        model_relative=model_relative,
        model_digest=digest,
        task_names=tuple(names),
        tasks_relative=tasks_relative,
        harness=request.harness,
        remote=remote,
        profile=profile,
        poll_seconds=float(os.environ.get(POLL_SECONDS_ENV) or 10.0),
        log=log,
    )
    module = importlib.import_module(f"{__package__}.{backend}_backend")
    if tasks_relative:
        make_tasks_portable(workspace / tasks_relative, module.tasks_dir_in_pod(tasks_relative), staged_heldout)
    results, location = module.evaluate(api_client, evaluation)
    if "evalhub" in results:
        lineage["evalhub"] = results["evalhub"]
    lineage.update({"evaluated_model_location": location, "evaluated_model_digest": digest})
    return results, lineage
