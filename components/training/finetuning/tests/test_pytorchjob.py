"""The PyTorchJob builder: exact manifests, CRD validity of every variant (closed objects), image rule, phases."""

import jsonschema
import pytest

from components.training.finetuning.manifests.names import job_name
from components.training.finetuning.manifests.pytorchjob import build_pytorchjob, pod_label_selector, pytorchjob_phase
from components.training.finetuning.manifests.spec import JobSpecError, SecretEnvVar
from components.training.finetuning.tests import cluster_doubles as doubles
from tests.harness.kube import condition

RUN_ID, IMAGE, HF_TOKEN, GPU_TOLERATION = doubles.RUN_ID, doubles.IMAGE, doubles.HF_TOKEN, doubles.GPU_TOLERATION
WORKSPACE_VOLUME, WORKSPACE_MOUNT = doubles.WORKSPACE_VOLUME, doubles.WORKSPACE_MOUNT
PORTS = [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}]
validate_pytorchjob = doubles.validate_pytorchjob


def _spec(**overrides):
    return doubles.spec(**{"image": IMAGE, **overrides})


def test_minimal_job_is_exactly_this():
    manifest = build_pytorchjob(_spec())
    validate_pytorchjob(manifest)
    gpu = {"nvidia.com/gpu": "1"}
    container = {"name": "pytorch", "image": IMAGE, "command": ["python", "-m", "train"], "ports": PORTS}
    container["resources"] = {"requests": gpu, "limits": gpu}
    pod = {"spec": {"containers": [container]}}
    assert manifest == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": job_name(RUN_ID, "train-model"),
            "namespace": "team-a",
            "labels": {
                "app.kubernetes.io/managed-by": "kfp-finetune",
                "kfp-finetune.kubeflow.org/run-id": RUN_ID,
                "kfp-finetune.kubeflow.org/task-name": "train-model",
            },
            "annotations": {
                "kfp-finetune.kubeflow.org/task-name": "train-model",
                "kfp-finetune.kubeflow.org/run-id": RUN_ID,
                # RHOAI's Training Jobs page: poll the rank-0 pod's progress server (on by default)
                "trainer.opendatahub.io/progression-tracking": "true",
                "trainer.opendatahub.io/metrics-port": "28080",
                "trainer.opendatahub.io/metrics-poll-interval": "30",
            },
        },
        "spec": {
            "nprocPerNode": "1",
            "pytorchReplicaSpecs": {"Master": {"replicas": 1, "restartPolicy": "ExitCode", "template": pod}},
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 3},
        },
    }


def test_multi_node_multi_gpu_job_carries_every_setting_to_master_and_workers():
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
            }
        }
    }
    spec = _spec(
        args=["--config", "/kfp-workspace/run/run_config.json"],
        num_nodes=3,
        gpus_per_node=8,
        gpu_resource_name="amd.com/gpu",
        cpu_per_node="32",
        memory_per_node="512Gi",
        env={"NCCL_DEBUG": "WARN", "INSTRUCTLAB_NCCL_TIMEOUT_MS": "1800000"},
        secret_env=(HF_TOKEN, SecretEnvVar("AWS_SECRET_ACCESS_KEY", "s3-creds", "secret", optional=True)),
        volumes=[WORKSPACE_VOLUME, {"name": "models", "persistentVolumeClaim": {"claimName": "shared-models"}}],
        volume_mounts=[WORKSPACE_MOUNT, {"name": "models", "mountPath": "/models", "readOnly": True}],
        tolerations=[GPU_TOLERATION],
        node_selector={"nvidia.com/gpu.product": "H100"},
        affinity=affinity,
        pod_labels={"team": "ml"},
        pod_annotations={"sidecar.istio.io/inject": "false"},
        active_deadline_seconds=7200,
    )
    manifest = build_pytorchjob(spec, clean_pod_policy="All", restart_policy="OnFailure", backoff_limit=0)
    validate_pytorchjob(manifest)
    quantities = {"cpu": "32", "memory": "512Gi", "amd.com/gpu": "8"}
    template = {
        "metadata": {"labels": {"team": "ml"}, "annotations": {"sidecar.istio.io/inject": "false"}},
        "spec": {
            "containers": [
                {
                    "name": "pytorch",
                    "image": IMAGE,
                    "command": ["python", "-m", "train"],
                    "args": ["--config", "/kfp-workspace/run/run_config.json"],
                    "env": [
                        {"name": "INSTRUCTLAB_NCCL_TIMEOUT_MS", "value": "1800000"},
                        {"name": "NCCL_DEBUG", "value": "WARN"},
                        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
                        {
                            "name": "AWS_SECRET_ACCESS_KEY",
                            "valueFrom": {"secretKeyRef": {"name": "s3-creds", "key": "secret", "optional": True}},
                        },
                    ],
                    "ports": PORTS,
                    "resources": {"requests": quantities, "limits": quantities},
                    "volumeMounts": [WORKSPACE_MOUNT, {"name": "models", "mountPath": "/models", "readOnly": True}],
                }
            ],
            "volumes": [WORKSPACE_VOLUME, {"name": "models", "persistentVolumeClaim": {"claimName": "shared-models"}}],
            "tolerations": [GPU_TOLERATION],
            "nodeSelector": {"nvidia.com/gpu.product": "H100"},
            "affinity": affinity,
        },
    }
    assert manifest["spec"] == {
        "nprocPerNode": "8",
        "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
            "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": template},
        },
        "runPolicy": {"cleanPodPolicy": "All", "backoffLimit": 0, "activeDeadlineSeconds": 7200},
    }
    # Master and Worker templates are equal but independent.
    replicas = manifest["spec"]["pytorchReplicaSpecs"]
    replicas["Worker"]["template"]["spec"]["containers"][0]["env"].clear()
    assert replicas["Master"]["template"]["spec"]["containers"][0]["env"]


def test_cpu_only_and_tolerations_only_variants_validate():
    cpu_only = build_pytorchjob(_spec(gpus_per_node=0, cpu_per_node="4", memory_per_node="8Gi", num_nodes=2))
    validate_pytorchjob(cpu_only)
    assert cpu_only["spec"]["nprocPerNode"] == "1"
    worker = cpu_only["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 1
    assert worker["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "4", "memory": "8Gi"},
        "limits": {"cpu": "4", "memory": "8Gi"},
    }
    tolerated = build_pytorchjob(
        _spec(tolerations=[{"key": "spot", "operator": "Equal", "value": "yes", "effect": "NoExecute"}])
    )
    validate_pytorchjob(tolerated)
    pod = tolerated["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert pod["tolerations"] == [{"key": "spot", "operator": "Equal", "value": "yes", "effect": "NoExecute"}]
    assert set(pod) == {"containers", "tolerations"}


def test_a_broken_manifest_is_caught_by_the_closed_schema():
    manifest = build_pytorchjob(_spec())
    manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["colour"] = "red"
    with pytest.raises(jsonschema.ValidationError, match="colour"):
        validate_pytorchjob(manifest)
    manifest = build_pytorchjob(_spec())
    manifest["spec"]["runPolicy"]["activeDeadlineSeconds"] = "1h"
    with pytest.raises(jsonschema.ValidationError):
        validate_pytorchjob(manifest)


def test_image_is_required_and_options_are_checked():
    with pytest.raises(JobSpecError, match=r"JobSpec\.image='': a PyTorchJob has no training runtime"):
        build_pytorchjob(_spec(image=""))
    with pytest.raises(ValueError, match=r"clean_pod_policy='Sometimes'.*\['Running', 'All', 'None'\]"):
        build_pytorchjob(_spec(), clean_pod_policy="Sometimes")
    with pytest.raises(ValueError, match="restart_policy='OnSuccess'"):
        build_pytorchjob(_spec(), restart_policy="OnSuccess")
    with pytest.raises(ValueError, match="backoff_limit=-1"):
        build_pytorchjob(_spec(), backoff_limit=-1)


def _job(*conditions):
    return {"metadata": {"name": "j"}, "status": {"conditions": list(conditions)}}


@pytest.mark.parametrize(
    ("conditions", "phase"),
    [
        ((), "Pending"),
        ((condition("Created"),), "Pending"),
        ((condition("Created"), condition("Running")), "Running"),
        ((condition("Created"), condition("Running", status="False"), condition("Restarting")), "Pending"),
        ((condition("Created"), condition("Restarting", status="False"), condition("Running")), "Running"),
        ((condition("Created"), condition("Running", status="False"), condition("Succeeded")), "Complete"),
        ((condition("Created"), condition("Running"), condition("Failed", "BackoffLimitExceeded")), "Failed"),
        ((condition("Created"), condition("Suspended", "JobSuspended")), "Suspended"),
        ((condition("Created"), condition("Succeeded", status="Unknown")), "Pending"),
    ],
)
def test_phase_follows_the_operator_conditions(conditions, phase):
    assert pytorchjob_phase(_job(*conditions)) == phase


def test_phase_of_a_job_without_status_and_pod_selector():
    assert pytorchjob_phase({"metadata": {"name": "j"}}) == "Pending"
    assert pod_label_selector("train-model-3f2a9c1b7d") == "training.kubeflow.org/job-name=train-model-3f2a9c1b7d"


def test_round_trip_through_the_kubernetes_api_and_phases_as_the_operator_moves_it(kube_api):
    """Created with the official client on kmock, read back equal; status patches (as the operator) give the phases."""
    from kubernetes import client

    manifest = build_pytorchjob(_spec(num_nodes=2))
    name = manifest["metadata"]["name"]
    api = client.CustomObjectsApi(kube_api.api_client)
    api.create_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs", manifest)
    stored = api.get_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs", name)
    assert {key: stored[key] for key in ("apiVersion", "kind", "spec")} == {
        key: manifest[key] for key in ("apiVersion", "kind", "spec")
    }
    assert stored["metadata"]["labels"] == manifest["metadata"]["labels"]
    phases = [pytorchjob_phase(stored)]
    timeline = [
        [condition("Created")],
        [condition("Created"), condition("Running")],
        [condition("Created"), condition("Running", status="False"), condition("Restarting", "PodPreempted")],
        [condition("Created"), condition("Restarting", status="False"), condition("Running")],
        [condition("Created"), condition("Running", status="False"), condition("Succeeded")],
    ]
    for conditions in timeline:
        kube_api.custom.patch_namespaced_custom_object_status(
            "kubeflow.org", "v1", "team-a", "pytorchjobs", name, {"status": {"conditions": conditions}}
        )
        phases.append(
            pytorchjob_phase(api.get_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs", name))
        )
    assert phases == ["Pending", "Pending", "Running", "Pending", "Running", "Complete"]
