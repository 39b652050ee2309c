"""The TrainJob builder: exact manifests, CRD validity of every variant, naming, validation errors, TaskConfig merge."""

import json
import re

import pytest
from kfp import dsl

from components.training.finetuning.manifests.names import MAX_NAME_LENGTH, job_name, label_value, ownership_labels
from components.training.finetuning.manifests.pytorchjob import build_pytorchjob
from components.training.finetuning.manifests.spec import JobSpec, JobSpecError, SecretEnvVar
from components.training.finetuning.manifests.task_config import spec_from_task_config
from components.training.finetuning.manifests.trainjob import build_trainjob
from components.training.finetuning.tests import cluster_doubles as doubles
from tests.harness.kube import validate_trainjob
from tests.harness.requests import job_spec_settings

RUN_ID, HF_TOKEN, GPU_TOLERATION = doubles.RUN_ID, doubles.HF_TOKEN, doubles.GPU_TOLERATION
WORKSPACE_VOLUME, WORKSPACE_MOUNT = doubles.WORKSPACE_VOLUME, doubles.WORKSPACE_MOUNT
_spec = doubles.spec


def _runtime_patches(template):
    """``spec.runtimePatches`` as the builder writes it around the ``node`` job's pod template."""
    job = {"name": "node", "template": {"spec": {"template": template}}}
    runtime = {"template": {"spec": {"replicatedJobs": [job]}}}
    return [{"manager": "kfp-finetune.kubeflow.org/train-model", "trainingRuntimeSpec": runtime}]


def test_minimal_job_is_exactly_this():
    manifest = build_trainjob(_spec())
    name = job_name(RUN_ID, "train-model")
    assert manifest == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
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
            "runtimeRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
                "name": "training-hub",
            },
            "trainer": {
                "command": ["python", "-m", "train"],
                "numNodes": 1,
                "numProcPerNode": 1,
                "resourcesPerNode": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
            },
            # The pods carry the label the RHOAI guide's troubleshooting selects them by.
            "runtimePatches": _runtime_patches({"metadata": {"labels": {"training.kubeflow.org/job-name": name}}}),
        },
    }
    validate_trainjob(manifest)


def test_multi_node_multi_gpu_osft_job_carries_every_setting_to_the_pods():
    spec = _spec(
        args=["--algorithm", "osft", "--unfreeze-rank-ratio", "0.25"],
        image="quay.io/example/training-hub:0.11.1",
        runtime_name="training-hub-osft",
        runtime_kind="TrainingRuntime",
        num_nodes=2,
        gpus_per_node=8,
        gpu_resource_name="amd.com/gpu",
        cpu_per_node="32",
        memory_per_node="512Gi",
        env={"INSTRUCTLAB_NCCL_TIMEOUT_MS": "1800000", "NCCL_DEBUG": "WARN"},
        secret_env=(HF_TOKEN, SecretEnvVar("AWS_SECRET_ACCESS_KEY", "s3-creds", "secret", optional=True)),
        volumes=[WORKSPACE_VOLUME, {"name": "models", "persistentVolumeClaim": {"claimName": "shared-models"}}],
        volume_mounts=[WORKSPACE_MOUNT, {"name": "models", "mountPath": "/models", "readOnly": True}],
        tolerations=[GPU_TOLERATION],
        node_selector={"nvidia.com/gpu.product": "H100"},
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
                }
            }
        },
        pod_labels={"team": "ml"},
        pod_annotations={"sidecar.istio.io/inject": "false"},
        active_deadline_seconds=7200,
    )
    manifest = build_trainjob(spec)
    validate_trainjob(manifest)
    assert manifest["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
        "name": "training-hub-osft",
    }
    assert manifest["spec"]["activeDeadlineSeconds"] == 7200
    quantities = {"cpu": "32", "memory": "512Gi", "amd.com/gpu": "8"}
    assert manifest["spec"]["trainer"] == {
        "image": "quay.io/example/training-hub:0.11.1",
        "command": ["python", "-m", "train"],
        "args": ["--algorithm", "osft", "--unfreeze-rank-ratio", "0.25"],
        "numNodes": 2,
        "numProcPerNode": 8,
        "resourcesPerNode": {"requests": quantities, "limits": quantities},
        "env": [
            {"name": "INSTRUCTLAB_NCCL_TIMEOUT_MS", "value": "1800000"},
            {"name": "NCCL_DEBUG", "value": "WARN"},
            {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
            {
                "name": "AWS_SECRET_ACCESS_KEY",
                "valueFrom": {"secretKeyRef": {"name": "s3-creds", "key": "secret", "optional": True}},
            },
        ],
    }
    models = {"name": "models", "persistentVolumeClaim": {"claimName": "shared-models"}}
    models_mount = {"name": "models", "mountPath": "/models", "readOnly": True}
    assert manifest["spec"]["runtimePatches"] == _runtime_patches(
        {
            "metadata": {
                "labels": {"team": "ml", "training.kubeflow.org/job-name": manifest["metadata"]["name"]},
                "annotations": {"sidecar.istio.io/inject": "false"},
            },
            "spec": {
                "volumes": [WORKSPACE_VOLUME, models],
                "containers": [{"name": "node", "volumeMounts": [WORKSPACE_MOUNT, models_mount]}],
                "tolerations": [GPU_TOLERATION],
                "nodeSelector": {"nvidia.com/gpu.product": "H100"},
                "affinity": spec.affinity,
            },
        }
    )


DEDICATED = {"key": "dedicated", "value": "ml", "effect": "NoExecute", "operator": "Equal", "tolerationSeconds": 60}


def test_tolerations_only_job_and_cpu_only_job_validate():
    tolerated = build_trainjob(_spec(tolerations=[GPU_TOLERATION, DEDICATED]))
    validate_trainjob(tolerated)
    assert tolerated["spec"]["runtimePatches"] == _runtime_patches(
        {
            "metadata": {"labels": {"training.kubeflow.org/job-name": tolerated["metadata"]["name"]}},
            "spec": {"tolerations": [GPU_TOLERATION, DEDICATED]},
        }
    )
    cpu_only = build_trainjob(_spec(gpus_per_node=0, cpu_per_node="4", memory_per_node="8Gi"))
    validate_trainjob(cpu_only)
    assert cpu_only["spec"]["trainer"]["numProcPerNode"] == 1
    assert cpu_only["spec"]["trainer"]["resourcesPerNode"]["limits"] == {"cpu": "4", "memory": "8Gi"}


BUILDERS = {"trainjob": build_trainjob, "pytorchjob": build_pytorchjob}


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_secrets_are_referenced_never_copied(kind):
    text = json.dumps(BUILDERS[kind](_spec(secret_env=(HF_TOKEN,), image=doubles.IMAGE)))
    assert '"secretKeyRef": {"name": "hf-token", "key": "token"}' in text
    assert '"value"' not in text
    with pytest.raises(JobSpecError, match=r"env\[HF_TOKEN\].*secret_env") as error:
        _spec(env={"HF_TOKEN": "hf_abcdefgh"})
    assert "hf_abcdefgh" not in str(error.value)


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_build_is_pure_and_repeatable(kind):
    spec = _spec(workspace=True, image=doubles.IMAGE)
    first = BUILDERS[kind](spec)
    first["metadata"]["labels"]["extra"] = "1"
    if kind == "pytorchjob":
        pod = first["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    else:
        (job,) = first["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        pod = job["template"]["spec"]["template"]["spec"]
    pod["volumes"][0]["name"] = "x"
    pod["volumes"][0]["persistentVolumeClaim"].clear()
    assert BUILDERS[kind](spec) == BUILDERS[kind](spec) != first
    assert spec.volumes[0] == WORKSPACE_VOLUME


@pytest.mark.parametrize(
    ("task_name", "run_id"),
    [("train-model", RUN_ID), ("Train Model (phase 02) — ÖSFT!!", RUN_ID), ("9" * 200, "x" * 300), ("---", "r")],
)
def test_names_are_deterministic_dns1035_and_short(task_name, run_id):
    name = job_name(run_id, task_name)
    assert name == job_name(run_id, task_name)
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= MAX_NAME_LENGTH
    assert name != job_name(run_id + "-retry-run", task_name)
    assert name != job_name(run_id, task_name + "-2")
    for value in ownership_labels(run_id, task_name).values():
        assert len(value) <= 63 and re.fullmatch(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", value)
    validate_trainjob(build_trainjob(_spec(run_id=run_id, task_name=task_name)))


def test_label_values_keep_valid_text_and_hash_the_rest():
    assert label_value(RUN_ID) == RUN_ID
    assert label_value("a b") != label_value("a_b") and label_value("a b").startswith("a-b-")


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"run_id": ""}, "run_id"),
        ({"namespace": "Team_A"}, "namespace"),
        ({"command": []}, "command"),
        ({"command": "python train.py"}, "command"),
        ({"args": ["--x", 1]}, r"args\[1\]"),
        ({"image": "quay.io/x y"}, "image"),
        ({"runtime_kind": "PyTorchJob"}, "runtime_kind"),
        ({"num_nodes": 0}, "num_nodes"),
        ({"num_nodes": True}, "num_nodes"),
        ({"gpus_per_node": -1}, "gpus_per_node"),
        ({"gpu_resource_name": "nvidia gpu"}, "gpu_resource_name"),
        ({"memory_per_node": "64 GB"}, "memory_per_node"),
        ({"env": {"1BAD": "x"}}, "env"),
        ({"env": {"AWS_SECRET_ACCESS_KEY": "x"}}, r"env\[AWS_SECRET_ACCESS_KEY\]"),
        ({"env": {"HF_TOKEN": "x"}, "secret_env": (HF_TOKEN,)}, "env"),
        ({"secret_env": (HF_TOKEN, HF_TOKEN)}, "secret_env"),
        ({"volumes": [{"name": "w"}]}, r"volumes\[0\]"),
        ({"volumes": [{"name": "w", "persistentVolumeClaim": {}}]}, r"volumes\[0\].persistentVolumeClaim"),
        ({"volumes": [WORKSPACE_VOLUME, WORKSPACE_VOLUME]}, r"volumes\[1\].name"),
        ({"volume_mounts": [WORKSPACE_MOUNT]}, r"volume_mounts\[0\].name"),
        (
            {"volumes": [WORKSPACE_VOLUME], "volume_mounts": [{"name": "kfp-workspace", "mountPath": "rel"}]},
            r"volume_mounts\[0\].mountPath",
        ),
        ({"tolerations": [{"key": "a", "operator": "In"}]}, r"tolerations\[0\].operator"),
        ({"tolerations": [{"key": "a", "colour": "red"}]}, r"tolerations\[0\]"),
        ({"tolerations": [{"key": "a", "effect": "Never"}]}, r"tolerations\[0\].effect"),
        ({"affinity": {"nodeSelector": {}}}, "affinity"),
        ({"pod_labels": {"team": "a b"}}, "pod_labels"),
        ({"active_deadline_seconds": -5}, "active_deadline_seconds"),
        ({"metrics_port": 80}, "metrics_port"),
        ({"metrics_port": "28080"}, "metrics_port"),
        ({"metrics_poll_interval_seconds": 1}, "metrics_poll_interval_seconds"),
        ({"progress_tracking": "yes"}, "progress_tracking"),
    ],
)
def test_bad_fields_are_named_in_the_error(overrides, field):
    with pytest.raises(JobSpecError, match=rf"JobSpec\.{field}"):
        _spec(**overrides)


def test_progress_tracking_annotations_follow_the_spec_and_stay_crd_valid():
    custom = build_trainjob(_spec(metrics_port=29000, metrics_poll_interval_seconds=10))
    validate_trainjob(custom)
    annotations = custom["metadata"]["annotations"]
    assert annotations["trainer.opendatahub.io/progression-tracking"] == "true"  # exactly "true"
    assert annotations["trainer.opendatahub.io/metrics-port"] == "29000"
    assert annotations["trainer.opendatahub.io/metrics-poll-interval"] == "10"
    off = build_trainjob(_spec(progress_tracking=False))
    validate_trainjob(off)
    assert not [key for key in off["metadata"]["annotations"] if key.startswith("trainer.opendatahub.io/")]


def test_secret_env_var_rules():
    with pytest.raises(JobSpecError, match=r"secret_env\[HF_TOKEN\].secret_name"):
        SecretEnvVar("HF_TOKEN", "Not A Secret", "token")
    with pytest.raises(JobSpecError, match="secret_key"):
        SecretEnvVar("HF_TOKEN", "hf", "a/b")


def test_task_config_passthrough_merges_with_explicit_settings():
    task_config = dsl.TaskConfig(
        volumes=[WORKSPACE_VOLUME],
        volume_mounts=[WORKSPACE_MOUNT],
        tolerations=[GPU_TOLERATION],
        node_selector={"pool": "gpu", "zone": "a"},
        env=[
            {"name": "NCCL_DEBUG", "value": "INFO"},
            {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
        ],
        resources={"limits": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "4"}, "requests": {"cpu": "8"}},
        affinity={"podAntiAffinity": {}},
    )
    from_component = job_spec_settings()
    del from_component["gpus_per_node"], from_component["gpu_resource_name"]  # from the task config's resources
    spec = spec_from_task_config(
        task_config,
        run_id=RUN_ID,
        task_name="train-model",
        namespace="team-a",
        command=["train"],
        volumes=[{"name": "extra", "persistentVolumeClaim": {"claimName": "extra-pvc"}}],
        volume_mounts=[{"name": "extra", "mountPath": "/extra"}],
        tolerations=[GPU_TOLERATION, {"key": "spot", "operator": "Exists"}],
        node_selector={"zone": "b"},
        env={"NCCL_DEBUG": "WARN"},
        cpu_per_node="",
        memory_per_node=None,
        **{**from_component, "num_nodes": 2},
    )
    assert spec.volumes == (WORKSPACE_VOLUME, {"name": "extra", "persistentVolumeClaim": {"claimName": "extra-pvc"}})
    assert spec.volume_mounts == (WORKSPACE_MOUNT, {"name": "extra", "mountPath": "/extra"})
    assert spec.tolerations == (GPU_TOLERATION, {"key": "spot", "operator": "Exists"})
    assert spec.node_selector == {"pool": "gpu", "zone": "b"}
    assert spec.env == {"NCCL_DEBUG": "WARN"}
    assert spec.secret_env == (HF_TOKEN,)
    assert (spec.cpu_per_node, spec.memory_per_node, spec.gpus_per_node) == ("16", "128Gi", 4)
    assert spec.affinity == {"podAntiAffinity": {}} and spec.num_nodes == 2
    validate_trainjob(build_trainjob(spec))
    # The dict form KFP hands over (camelCase keys) works the same; None means no passthrough at all.
    as_dict = {"volumes": [WORKSPACE_VOLUME], "volumeMounts": [WORKSPACE_MOUNT], "nodeSelector": {"pool": "gpu"}}
    base = job_spec_settings(run_id=RUN_ID, task_name="t", namespace="team-a", command=["train"])
    assert spec_from_task_config(as_dict, **base).node_selector == {"pool": "gpu"}
    assert spec_from_task_config(None, **base) == JobSpec(**base)


def test_task_config_conflicts_and_unsupported_sources_are_clear_errors():
    base = job_spec_settings(run_id=RUN_ID, task_name="t", namespace="team-a", command=["train"])
    other_claim = {"name": "kfp-workspace", "persistentVolumeClaim": {"claimName": "other"}}
    with pytest.raises(JobSpecError, match="volumes.*kfp-workspace.*twice"):
        spec_from_task_config(dsl.TaskConfig(volumes=[WORKSPACE_VOLUME]), volumes=[other_claim], **base)
    field_ref = {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    with pytest.raises(JobSpecError, match=r"task_config.env\[0\] \(POD\).*fieldRef"):
        spec_from_task_config(dsl.TaskConfig(env=[field_ref]), **base)
    with pytest.raises(JobSpecError, match="unknown JobSpec fields.*gpus"):
        spec_from_task_config(None, gpus=2, **base)
