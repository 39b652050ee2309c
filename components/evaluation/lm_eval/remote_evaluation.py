"""The evaluation backends besides the in-step ``lm-eval``: dispatch, the workspace, the profile, the lineage.

``eval_backend``:

* ``lm-eval`` (default): lm-eval runs in this step (``run.py``); a ``hardware_profile`` is read and compared with
  what the step's own pod got (KFP compiled its resources, tolerations and node selector): differences are logged and
  recorded, never applied;
* ``lmevaljob``: a TrustyAI ``LMEvalJob`` (:mod:`.lmevaljob_backend`), the profile applied to its ``pod`` and labels;
* ``evalhub``: EvalHub's REST API (:mod:`.evalhub_backend`), the profile passed as ``hardware_config``.

Every backend returns lm-eval's results dict, so the comparison, the report and the registry's gates are the same
code. Both remote backends read the model and the held-out tasks on the workspace PVC; the model evaluated is checked
(:mod:`.model_identity`) and recorded: ``evaluated_model_location``, ``evaluated_model_digest``, ``eval_backend``.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from components.evaluation.lm_eval import custom_task
from components.evaluation.lm_eval.custom_task import HELDOUT_TASKS

LOCAL_BACKEND = "lm-eval"
EVAL_BACKENDS = (LOCAL_BACKEND, "lmevaljob", "evalhub")
#: Where the remote backends' inputs go on the workspace.
WORKSPACE_DIR = "lm_eval"
#: Seconds between two polls of a remote evaluation's state (default 10).
POLL_SECONDS_ENV = "KFP_FINETUNE_EVAL_POLL_SECONDS"
#: The module the held-out YAMLs' ``!function`` tags name on the PVC (a copy of the two functions they use).
HELDOUT_FUNCTIONS_MODULE = "heldout_functions"


class WorkspaceError(ValueError):
    """A path that is not on the workspace PVC the remote evaluation reads (one line)."""


def check_backend(eval_backend: str, custom_tasks_path: str, evalhub_url: str, pvc_path: str) -> None:
    """Refuses a backend setting in one line (the rule, the value, what to do).

    Raises:
        ValueError: Unknown backend; custom tasks or no workspace with a remote one; ``evalhub`` without a URL.
    """
    if eval_backend not in EVAL_BACKENDS:
        raise ValueError(f"eval_backend={eval_backend!r}: must be one of {list(EVAL_BACKENDS)}")
    if eval_backend == LOCAL_BACKEND:
        return
    if custom_tasks_path:
        raise ValueError(f"custom_tasks: only eval_backend='lm-eval' runs them (got eval_backend={eval_backend!r})")
    if not pvc_path:
        raise ValueError(
            f"eval_backend={eval_backend!r} reads the model and the held-out task from the workspace PVC: pass "
            "pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER"
        )
    if eval_backend == "evalhub" and not evalhub_url.startswith(("http://", "https://")):
        raise ValueError(f"evalhub_url={evalhub_url!r}: eval_backend='evalhub' needs EvalHub's http(s) URL")


def workspace_claim(pod: Mapping[str, Any], pvc_path: str) -> str:
    """The PVC mounted at ``pvc_path`` in a pod (its containers' mounts).

    Raises:
        ValueError: Nothing of the pod's is mounted there, or it is not a PVC.
    """
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


def relative_to_workspace(path: Path, workspace: Path, what: str) -> str:
    """``path`` relative to the workspace root.

    Raises:
        WorkspaceError: ``path`` is outside the workspace.
    """
    try:
        return str(path.resolve().relative_to(workspace.resolve()))
    except ValueError:
        raise WorkspaceError(
            f"{what} {path} is not on the workspace {workspace}: eval_backend=lmevaljob/evalhub read it from the "
            "workspace PVC; give pvc_path (the pipeline's dsl.WORKSPACE_PATH_PLACEHOLDER)"
        ) from None


def _copy_to(source: Path, target: Path) -> Path:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    return target


def make_tasks_portable(task_dir: Path, pod_dir: str, written_in: Path) -> None:
    """Rewrites the held-out YAMLs in ``task_dir`` (a copy of ``written_in``) to run where it is mounted at ``pod_dir``.

    The remote evaluation's image carries lm-eval but not this project: the ``!function`` references point to a
    stdlib-only copy of the two functions (``heldout_functions.py`` beside the YAMLs, which lm-eval's loader reads
    first) and the documents file is named by its path in the pod.
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
    request: Any,
    spec: Any,
    names: Sequence[str],
    staged_heldout: Path | None,
    options: Mapping[str, Any],
    log: Callable[[str], None],
    api_client: Any = None,
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """Reads the hardware profile, evaluates on ``request.eval_backend``; returns ``(results, lineage)``.

    The results are ``None`` for ``lm-eval``, which ``run.py`` evaluates itself.

    Raises:
        HardwareProfileError: The profile is missing or disabled (the line lists those that exist), or does not fit.
        WrongModelError: The model evaluated is not the trained one.
        ValueError: The model is not a local directory the backend can read from the workspace.
    """
    from components._common.hardware_profiles import PLATFORM_NAMESPACES, read_hardware_profile
    from components._common.kube_auth import load_api_client
    from components._common.namespace import pod_namespace
    from components.evaluation.lm_eval.model_identity import trained_model_digest

    api_client = api_client or load_api_client()
    namespace = pod_namespace()
    backend = request.eval_backend
    lineage: dict[str, Any] = {"eval_backend": backend}
    profile = None
    if request.hardware_profile:
        namespaces = [namespace, *PLATFORM_NAMESPACES]
        profile = read_hardware_profile(api_client, request.hardware_profile, namespaces, "hardware_profile")
        lineage["hardware_profile"] = profile.name
        log(f"hardware profile {profile.summary()}")
    pod = _own_pod(api_client, namespace)
    if backend == LOCAL_BACKEND:
        if profile is not None:  # compared with this pod (KFP compiled it), never applied
            missing = profile_mismatches(profile, pod) if pod else ["(this pod could not be read)"]
            if missing:
                log(f"this step's pod lacks what hardware profile {profile.name} sets: {'; '.join(missing)}")
                lineage["hardware_profile_missing"] = missing
        return None, lineage
    if spec.is_adapter:
        raise ValueError(
            f"eval_backend={backend!r}: {spec.source} is a PEFT adapter on {spec.base_model}; the LMEvalJob and "
            "EvalHub load one full model (pretrained=<path>): evaluate it with eval_backend='lm-eval', or train with "
            "merged LoRA weights"
        )
    # the model where run.py found it: the manifest's weights on the workspace (read in place), or model_source's
    # directory (a Hub id, s3:// or oci:// one staged on the workspace)
    model_dir = Path(spec.source)
    if not model_dir.is_dir():
        raise ValueError(
            f"eval_backend={backend!r}: the model {spec.source} is not a local directory; the remote backends "
            "evaluate a model on the workspace (wire train_model's output_model, pass pvc_path)"
        )
    digest = trained_model_digest("" if request.model_source else request.model_path, model_dir, request.model_metadata)
    workspace = Path(request.pvc_path)
    pvc_name = workspace_claim(pod, request.pvc_path)
    name = evaluation_name(str(model_dir), names, "lmeval" if backend == "lmevaljob" else "kfp-finetune")
    tasks_relative = ""
    if staged_heldout is not None and set(names) & set(HELDOUT_TASKS):
        heldout_dir = _copy_to(staged_heldout, workspace / WORKSPACE_DIR / name / "heldout")
        tasks_relative = relative_to_workspace(heldout_dir, workspace, "the held-out task directory")
    try:
        model_relative = relative_to_workspace(model_dir, workspace, "the model")
    except WorkspaceError:  # a model elsewhere (a local base model, the local launcher's artifact): copied there
        model_dir = _copy_to(model_dir, workspace / WORKSPACE_DIR / name / "model")
        log(f"model {spec.source} copied onto the workspace: {model_dir}")
        model_relative = relative_to_workspace(model_dir, workspace, "the model")
    poll_seconds = float(os.environ.get(POLL_SECONDS_ENV) or 10.0)
    remote_options = {**options, "log_samples": request.log_samples}
    if backend == "lmevaljob":
        from components.evaluation.lm_eval.lmevaljob_backend import TASKS_PATH, evaluate_with_lmevaljob

        if tasks_relative:
            make_tasks_portable(workspace / tasks_relative, TASKS_PATH, staged_heldout)
        results, location = evaluate_with_lmevaljob(
            api_client, namespace, pvc_name, name, model_relative, names, tasks_relative, remote_options, profile,
            request, poll_seconds, log,
        )  # fmt: skip
    else:
        from components.evaluation.lm_eval.evalhub_backend import TEST_DATA_PATH, evaluate_with_evalhub

        if tasks_relative:
            make_tasks_portable(workspace / tasks_relative, f"{TEST_DATA_PATH}/{tasks_relative}", staged_heldout)
        results, location = evaluate_with_evalhub(
            request.evalhub_url, namespace, pvc_name, name, model_relative, digest, names, tasks_relative,
            remote_options, profile, float(request.eval_timeout_seconds), poll_seconds, log,
        )  # fmt: skip
        lineage["evalhub"] = results["evalhub"]
    lineage.update({"evaluated_model_location": location, "evaluated_model_digest": digest})
    return results, lineage
