"""RHOAI Hardware Profiles: read from the emulated cluster, applied to each step's manifest, checked by its CRD."""

from __future__ import annotations

import dataclasses
import json

import jsonschema
import pytest

from components._common.hardware_profiles import (
    HardwareProfileError,
    parse_profile,
    read_hardware_profile,
    step_fit,
)
from components.deployment.kubeflow_model_registry.kserve_manifests import build_inference_service
from components.evaluation.lm_eval.evalhub_backend import build_job_request
from components.evaluation.lm_eval.lmevaljob_backend import build_lmevaljob
from components.training.finetuning.manifests.api_generations import POD_TEMPLATE_OVERRIDES, assumed
from components.training.finetuning.manifests.hardware_profile import apply_hardware_profile
from components.training.finetuning.manifests.trainjob import build_trainjob
from tests.harness.kube import ODH_3_3, UPSTREAM_2_3, crd_schema, validate_trainjob
from tests.harness.requests import job_spec, lm_eval_request, remote_evaluation

NAMESPACE = "team-a"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SELECTOR = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}


def _profile(name: str, scheduling: dict, disabled: bool = False, gpus: int = 1, namespace: str = NAMESPACE) -> dict:
    return {
        "apiVersion": "infrastructure.opendatahub.io/v1",
        "kind": "HardwareProfile",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {"opendatahub.io/disabled": str(disabled).lower(), "opendatahub.io/display-name": name},
        },
        "spec": {
            "identifiers": [
                {"identifier": key, "displayName": key, "resourceType": kind, "defaultCount": count, "minCount": 1}
                for key, kind, count in (
                    ("cpu", "CPU", 8),
                    ("memory", "Memory", "32Gi"),
                    ("nvidia.com/gpu", "Accelerator", gpus),
                )
            ],  # fmt: skip
            "scheduling": scheduling,
        },
    }


NODE_PROFILE = _profile("a100", {"type": "Node", "node": {"nodeSelector": SELECTOR, "tolerations": [TOLERATION]}})
QUEUE_PROFILE = _profile("a100-queued", {"type": "Queue", "kueue": {"localQueueName": "gpu-queue"}})
DISABLED_PROFILE = _profile("old-gpus", {"type": "Queue", "kueue": {"localQueueName": "q"}}, disabled=True)


def test_the_profiles_follow_the_vendored_crd():
    schema = crd_schema("infrastructure.opendatahub.io_hardwareprofiles.yaml")
    for profile in (NODE_PROFILE, QUEUE_PROFILE, DISABLED_PROFILE):
        jsonschema.Draft7Validator(schema).validate(profile)


@pytest.fixture
def profiles(kube_api):
    for profile in (NODE_PROFILE, QUEUE_PROFILE, DISABLED_PROFILE):
        kube_api.custom.create_namespaced_custom_object(
            "infrastructure.opendatahub.io", "v1", NAMESPACE, "hardwareprofiles", profile
        )
    return kube_api


def test_a_profile_is_read_from_the_cluster(profiles):
    profile = read_hardware_profile(profiles.api_client, "a100", [NAMESPACE, "redhat-ods-applications"], "x")
    assert profile.counts == {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}
    assert profile.node_selector == SELECTOR and profile.tolerations == (TOLERATION,)
    assert profile.gpus() == ("nvidia.com/gpu", 1) and not profile.disabled


@pytest.mark.parametrize("name, state", [("h100", "does not exist"), ("old-gpus", "is disabled")])
def test_a_missing_or_disabled_profile_is_one_line_listing_the_enabled_ones(profiles, name, state):
    with pytest.raises(HardwareProfileError) as refused:
        read_hardware_profile(profiles.api_client, name, [NAMESPACE], "training_hardware_profile")
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"training_hardware_profile={name!r}")
    assert state in message and "enabled profiles: a100, a100-queued" in message


def test_the_trainjob_gets_resources_tolerations_node_selector_and_queue():
    node = apply_hardware_profile(job_spec(run_id="r1", task_name="train-model", namespace=NAMESPACE,
                                           command=["python", "x.py"]), parse_profile(NODE_PROFILE))  # fmt: skip
    for generation, api in ((UPSTREAM_2_3, None), (ODH_3_3, assumed(POD_TEMPLATE_OVERRIDES, "RHOAI 3.3"))):
        manifest = build_trainjob(node, api) if api else build_trainjob(node)
        validate_trainjob(manifest, generation)
        text = json.dumps(manifest)
        assert json.dumps(TOLERATION) in text and json.dumps(SELECTOR)[1:-1] in text
        assert '"cpu": "8"' in text and '"memory": "32Gi"' in text and '"nvidia.com/gpu": "1"' in text
        assert '"opendatahub.io/hardware-profile-name": "a100"' in text
    queued = apply_hardware_profile(job_spec(run_id="r1", task_name="train-model", namespace=NAMESPACE,
                                             command=["python", "x.py"]), parse_profile(QUEUE_PROFILE))  # fmt: skip
    manifest = build_trainjob(queued)
    validate_trainjob(manifest)
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"


def test_a_profile_with_other_gpus_than_the_job_is_refused_in_one_line():
    spec = job_spec(run_id="r1", task_name="t", namespace=NAMESPACE, command=["python"], gpus_per_node=1)
    with pytest.raises(HardwareProfileError, match=r"set training_gpus_per_node=4 \(one process per GPU\)$"):
        apply_hardware_profile(spec, parse_profile(_profile("big", {"type": "Node", "node": {}}, gpus=4)))


def test_the_inference_service_gets_the_profile():
    isvc = build_inference_service("tiny", NAMESPACE, "oci://quay.io/o/m:1", "vllm-runtime", "tiny", 1,
                                   profile=parse_profile(NODE_PROFILE))  # fmt: skip
    jsonschema.Draft7Validator(crd_schema("serving.kserve.io_inferenceservices.yaml")).validate(isvc)
    predictor = isvc["spec"]["predictor"]
    assert predictor["tolerations"] == [TOLERATION] and predictor["nodeSelector"] == SELECTOR
    assert predictor["model"]["resources"]["limits"] == {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}
    assert isvc["metadata"]["annotations"]["opendatahub.io/hardware-profile-name"] == "a100"
    queued = build_inference_service("tiny", NAMESPACE, "oci://quay.io/o/m:1", "vllm-runtime", "tiny", 1,
                                     profile=parse_profile(QUEUE_PROFILE))  # fmt: skip
    assert queued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"


def _lmevaljob(profile) -> dict:
    evaluation = remote_evaluation(namespace=NAMESPACE, tasks_relative="lm_eval/x/heldout", batch_size="8")
    return build_lmevaljob(dataclasses.replace(evaluation, profile=parse_profile(profile)), {})


def test_the_lmevaljob_gets_resources_node_affinity_and_queue():
    schema = crd_schema("trustyai.opendatahub.io_lmevaljobs.yaml")
    no_tolerations = _profile("a100-nodes", {"type": "Node", "node": {"nodeSelector": SELECTOR}})
    job = _lmevaljob(no_tolerations)
    jsonschema.Draft7Validator(schema).validate(job)
    assert job["spec"]["pod"]["container"]["resources"]["requests"]["nvidia.com/gpu"] == "1"
    terms = job["spec"]["pod"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A100-SXM4-80GB"]}
    ]
    queued = _lmevaljob(QUEUE_PROFILE)
    jsonschema.Draft7Validator(schema).validate(queued)
    assert queued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"


def test_tolerations_cannot_go_on_an_lmevaljob_and_say_so_in_one_line():
    with pytest.raises(HardwareProfileError) as refused:
        _lmevaljob(NODE_PROFILE)
    assert "\n" not in str(refused.value) and "no tolerations field" in str(refused.value)
    assert step_fit(parse_profile(NODE_PROFILE))["evaluation"].startswith("eval_backend=lmevaljob only")


def test_evalhub_gets_the_profile_name():
    import yaml

    from tests.harness.evalhub_server import SPEC

    body = build_job_request(remote_evaluation(task_names=("arc_easy",), profile=parse_profile(NODE_PROFILE)))
    assert body["hardware_config"] == {"hardware_profile_name": "a100"}
    document = yaml.safe_load(SPEC.read_text())
    schema = {"$ref": "#/components/schemas/EvaluationJobConfig", "components": document["components"]}
    jsonschema.Draft202012Validator(schema).validate(body)


def test_step_fit_says_which_steps_a_profile_fits():
    assert step_fit(parse_profile(QUEUE_PROFILE)) == {"training": "", "evaluation": "", "serving": ""}
    assert set(step_fit(parse_profile(DISABLED_PROFILE)).values()) == {"disabled"}
    cpu_only = _profile("cpu", {"type": "Node", "node": {}})
    cpu_only["spec"]["identifiers"] = cpu_only["spec"]["identifiers"][:2]
    assert step_fit(parse_profile(cpu_only))["serving"].startswith("no accelerator")


def test_the_in_step_evaluation_records_what_its_pod_lacks_of_the_profile(profiles, monkeypatch):
    """eval_backend=lm-eval cannot change its own pod: the profile is compared with it and the gaps recorded."""
    from components.evaluation.lm_eval.remote_evaluation import evaluate_on_backend

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "lm-eval-pod", "namespace": NAMESPACE},
        "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "8", "memory": "32Gi"}}}]},
        "status": {"phase": "Running"},
    }
    profiles.put_pod(pod)
    monkeypatch.setenv("POD_NAMESPACE", NAMESPACE)
    monkeypatch.setenv("KFP_POD_NAME", "lm-eval-pod")
    request = lm_eval_request(eval_backend="lm-eval", hardware_profile="a100")
    lines: list[str] = []
    results, lineage = evaluate_on_backend(request, None, ["heldout_generation"], None, lines.append,
                                           api_client=profiles.api_client)  # fmt: skip
    assert results is None and lineage["hardware_profile"] == "a100"
    assert lineage["hardware_profile_missing"] == [
        "nvidia.com/gpu=1",
        f"toleration {TOLERATION}",
        "nodeSelector nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB",
    ]
    assert any("this step's pod lacks what hardware profile a100 sets" in line for line in lines)
