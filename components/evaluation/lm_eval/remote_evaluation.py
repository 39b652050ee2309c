"""The evaluation backends besides the in-step ``lm-eval``: dispatch, the workspace, the profile, the lineage.

``eval_backend``:

* ``lm-eval`` (default): lm-eval runs in this step (``run.py``); a ``hardware_profile`` is read and compared with
  what the step's own pod got (KFP compiled its resources, tolerations and node selector): differences are logged and
  recorded, never applied;
* ``lmevaljob``: a TrustyAI ``LMEvalJob`` (:mod:`.lmevaljob_backend`), the profile applied to its ``pod`` and labels;
* ``evalhub``: EvalHub's REST API (:mod:`.evalhub_backend`), the profile passed as ``hardware_config``.

Every backend returns lm-eval's results dict, so the comparison with the base model, the deltas, the forgetting
report, the registry's gates and the HTML report are the same code. The model evaluated is checked
(:mod:`.model_identity`) and recorded: ``evaluated_model_location``, ``evaluated_model_digest``, ``eval_backend``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from components.evaluation.lm_eval.custom_task import HELDOUT_TASKS

LOCAL_BACKEND = "lm-eval"
EVAL_BACKENDS = (LOCAL_BACKEND, "lmevaljob", "evalhub")
#: Where the remote backends' inputs go on the workspace.
WORKSPACE_DIR = "lm_eval"


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
    """The PVC mounted at ``pvc_path`` in a pod (its first container's mounts).

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


def evaluate_remotely(
    backend: str,
    api_client: Any,
    namespace: str,
    workspace: Path,
    pvc_name: str,
    model_dir: Path,
    model_digest: str,
    task_names: Sequence[str],
    staged_heldout: Path | None,
    options: Mapping[str, Any],
    profile: Any,
    settings: Any,
    evalhub_url: str,
    log: Callable[[str], None],
) -> tuple[dict[str, Any], str]:
    """Evaluates on ``backend`` (``lmevaljob``/``evalhub``); returns ``(lm-eval results, location evaluated)``."""
    from components.evaluation.lm_eval import evalhub_backend, lmevaljob_backend

    benchmarks = [name for name in task_names if name not in HELDOUT_TASKS]
    heldout = [name for name in task_names if name in HELDOUT_TASKS]
    name = (
        lmevaljob_backend.evaluation_job_name(str(model_dir), task_names)
        if backend == "lmevaljob"
        else evalhub_backend.evaluation_name(str(model_dir))
    )
    heldout_dir = None
    if staged_heldout is not None and heldout:
        heldout_dir = workspace / WORKSPACE_DIR / name / "heldout"
        if heldout_dir.exists():
            shutil.rmtree(heldout_dir)
        shutil.copytree(staged_heldout, heldout_dir)
    model_dir = _on_workspace(model_dir, workspace, name, log)
    if backend == "lmevaljob":
        return lmevaljob_backend.evaluate_with_lmevaljob(
            api_client, namespace, pvc_name, workspace, model_dir, task_names, heldout_dir, options, profile,
            settings, log, name,
        )  # fmt: skip
    from components.evaluation.lm_eval.model_identity import check_same_location

    model_relative = lmevaljob_backend.relative_to_workspace(model_dir, workspace, "the model")
    tasks_relative = ""
    if heldout_dir is not None:
        tasks_relative = lmevaljob_backend.relative_to_workspace(heldout_dir, workspace, "the held-out tasks")
        lmevaljob_backend.make_tasks_portable(heldout_dir, f"{evalhub_backend.TEST_DATA_PATH}/{tasks_relative}")
    body = evalhub_backend.build_job_request(
        name, pvc_name, model_relative, model_digest, benchmarks, heldout, tasks_relative, options, profile
    )
    deadline = time.monotonic() + (settings.timeout_seconds or 7 * 24 * 3600)
    client = evalhub_backend.EvalHubClient(evalhub_url, namespace, evalhub_backend.service_account_token(), deadline)
    job = evalhub_backend.run_evalhub_job(client, body, poll_seconds=settings.poll_seconds, log=log)
    submitted = f"{evalhub_backend.TEST_DATA_PATH}/{model_relative}"
    echoed = (job.get("model") or {}).get("parameters") or {}
    check_same_location(submitted, str(echoed.get("pretrained") or ""), f"EvalHub job {name}")
    if echoed.get("weights_digest") != model_digest:
        check_same_location(model_digest, str(echoed.get("weights_digest") or ""), f"EvalHub job {name} (digest)")
    return evalhub_backend.lm_eval_results(job, evalhub_backend.metric_directions(heldout_dir)), submitted


def _on_workspace(model_dir: Path, workspace: Path, name: str, log: Callable[[str], None]) -> Path:
    """The model's directory on the workspace: itself, or a copy under ``lm_eval/<name>/model`` (the artifact's)."""
    try:
        model_dir.resolve().relative_to(workspace.resolve())
        return model_dir
    except ValueError:
        copy = workspace / WORKSPACE_DIR / name / "model"
        if copy.exists():
            shutil.rmtree(copy)
        shutil.copytree(model_dir, copy)
        log(f"model {model_dir} copied onto the workspace: {copy}")
        return copy
