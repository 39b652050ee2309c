"""``run_lm_eval``'s one call into the evaluation backends and Hardware Profiles (:mod:`.remote_evaluation`).

Returns lm-eval's results (``None`` for the in-step backend, which ``run.py`` evaluates itself) and the lineage
recorded in the results' metadata.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from components.evaluation.lm_eval.remote_evaluation import LOCAL_BACKEND

#: Seconds the evaluation may take to start, and the Kubernetes API may stay unreachable while it is followed.
START_TIMEOUT_SECONDS = 1800.0
API_OUTAGE_TOLERANCE_SECONDS = 600.0
#: Seconds between two polls of a remote evaluation's state (default 10).
POLL_SECONDS_ENV = "KFP_FINETUNE_EVAL_POLL_SECONDS"


def _own_pod(api_client: Any, namespace: str) -> dict[str, Any]:
    """This step's pod (``{}`` when it cannot be read: outside a cluster, no permission)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    name = os.environ.get("KFP_POD_NAME") or os.environ.get("HOSTNAME", "")
    try:
        pod = client.CoreV1Api(api_client).read_namespaced_pod(name, namespace, _request_timeout=(5.0, 30.0))
    except ApiException:
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
    """Reads the hardware profile, checks the model, evaluates on ``request.eval_backend`` (``lm-eval``: not here).

    Raises:
        HardwareProfileError: The profile is missing or disabled (the line lists those that exist), or does not fit.
        WrongModelError: The model evaluated is not the trained one.
        ValueError: The model is not a local directory the backend can read from the workspace.
    """
    from components._common.hardware_profiles import PLATFORM_NAMESPACES, read_hardware_profile
    from components._common.kube_auth import load_api_client
    from components._common.namespace import pod_namespace
    from components.evaluation.lm_eval.lmevaljob_backend import RemoteJobSettings
    from components.evaluation.lm_eval.model_identity import trained_model_digest
    from components.evaluation.lm_eval.remote_evaluation import (
        evaluate_remotely,
        profile_mismatches,
        workspace_claim,
    )

    api_client = api_client or load_api_client()
    namespace = pod_namespace()
    lineage: dict[str, Any] = {"eval_backend": request.eval_backend}
    profile = None
    if request.hardware_profile:
        profile = read_hardware_profile(
            api_client, request.hardware_profile, [namespace, *PLATFORM_NAMESPACES], "hardware_profile"
        )
        lineage["hardware_profile"] = profile.name
        log(f"hardware profile {profile.summary()}")
    pod = _own_pod(api_client, namespace)
    if request.eval_backend == LOCAL_BACKEND:
        if profile is not None:
            missing = profile_mismatches(profile, pod) if pod else ["(this pod could not be read)"]
            if missing:
                log(f"this step's pod lacks what hardware profile {profile.name} sets: {'; '.join(missing)}")
                lineage["hardware_profile_missing"] = missing
        return None, lineage
    if spec.is_adapter:
        raise ValueError(
            f"eval_backend={request.eval_backend!r}: {spec.source} is a PEFT adapter on {spec.base_model}; the "
            "LMEvalJob and EvalHub load one full model (pretrained=<path>): evaluate it with eval_backend='lm-eval', "
            "or train with merged LoRA weights"
        )
    # the model where run.py found it: resolve_model_dir's weights on the workspace (checked against the manifest,
    # read in place), or model_source's directory (a Hub id, s3:// or oci:// one staged on the workspace)
    model_dir = Path(spec.source)
    if not model_dir.is_dir():
        raise ValueError(
            f"eval_backend={request.eval_backend!r}: the model {spec.source} is not a local directory; the remote "
            "backends evaluate a model on the workspace (wire train_model's output_model, pass pvc_path)"
        )
    artifact = "" if request.model_source else request.model_path
    digest = trained_model_digest(artifact, model_dir, request.model_metadata)
    workspace = Path(request.pvc_path)
    pvc_name = workspace_claim(pod, request.pvc_path)
    settings = RemoteJobSettings(
        start_timeout_seconds=START_TIMEOUT_SECONDS,
        timeout_seconds=float(request.eval_timeout_seconds),
        api_outage_tolerance_seconds=API_OUTAGE_TOLERANCE_SECONDS,
        cleanup_policy=request.eval_cleanup_policy,
        poll_seconds=float(os.environ.get(POLL_SECONDS_ENV) or 10.0),
    )
    results, location = evaluate_remotely(
        request.eval_backend,
        api_client,
        namespace,
        workspace,
        pvc_name,
        model_dir,
        digest,
        names,
        staged_heldout,
        {**options, "log_samples": request.log_samples},
        profile,
        settings,
        request.evalhub_url,
        log,
    )
    lineage.update({"evaluated_model_location": location, "evaluated_model_digest": digest})
    if "evalhub" in results:
        lineage["evalhub"] = results["evalhub"]
    return results, lineage
