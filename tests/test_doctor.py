"""``kfp-finetune doctor`` against kmock: the all-present cluster passes; each missing prerequisite is one line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from components._common import kube_auth as kube
from components.training.finetuning.cluster.job_kinds import API_PERMISSIONS
from pipelines.cli import main
from pipelines.compile import pipeline_function
from pipelines.doctor.gpus import tolerates
from pipelines.doctor.storage import judge
from pipelines.doctor.training import rbac_permissions
from pipelines.training.finetuning.interface import parameter_feeding
from tests.harness.kube import ODH_3_3, make_node
from tests.harness.tcp_proxy import closed_port

NS = "team"
SECRET_VALUE = "pl4nted-S3CRET-value-0042"
TRAINJOBS = "trainer.kubeflow.org/v1alpha1/trainjobs"
PYTORCHJOBS = "kubeflow.org/v1/pytorchjobs"
REPO_ROOT = Path(__file__).resolve().parents[1]
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
#: GPU Feature Discovery's labels of an 80 GB A100 (memory in MiB).
MIB = "nvidia.com/gpu.memory"
A100_LABELS = {MIB: "81920", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
#: The base model doctor estimates GPU memory for (set by the ``cluster`` fixture: the tiny model, offline).
BASE_MODEL: list[str] = []


def dash(step, name):
    """The dashboard name feeding ``name`` of ``step`` in the expert SFT pipeline (never spelled out here)."""
    return parameter_feeding(pipeline_function("sft"), step, name)


def param(step, name, value):
    return ["--param", f"{dash(step, name)}={value}"]


S3_DATASET = param("dataset", "dataset_uri", "s3://bucket/train.jsonl")


@pytest.fixture
def cluster(kube_api, monkeypatch, tiny_model_dir):
    """A Trainer v2 cluster with everything one osft-minimal run needs in namespace ``team``."""
    BASE_MODEL[:] = param("train", "training_base_model", str(tiny_model_dir))
    monkeypatch.setenv(kube.SERVER_URL_ENV, kube_api.url)
    monkeypatch.setenv(kube.AUTH_TOKEN_ENV, "doctor-test-token")
    for name in ("KFP_HOST", "KFP_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    kube_api.unserve(PYTORCHJOBS)
    kube_api.create_runtime("training-hub")
    kube_api.create_storage_class("nfs-csi", "nfs.csi.k8s.io")
    kube_api.create_storage_class("gp3-csi", "ebs.csi.aws.com", default=True)
    kube_api.put_node(make_node("gpu-1", 2, labels=A100_LABELS))
    kube_api.put_node(make_node("cpu-1"))
    kube_api.create_secret(
        NS, "kubernetes-credentials", {"KUBERNETES_SERVER_URL": SECRET_VALUE, "KUBERNETES_AUTH_TOKEN": SECRET_VALUE}
    )
    kube_api.create_secret(NS, "s3-secret", {"AWS_ACCESS_KEY_ID": SECRET_VALUE, "AWS_SECRET_ACCESS_KEY": SECRET_VALUE})
    kube_api.create_secret(NS, "hf-token", {"HF_TOKEN": SECRET_VALUE})
    kube_api.create_quota(
        NS,
        "storage",
        hard={"requests.storage": "200Gi", "persistentvolumeclaims": "10"},
        used={"requests.storage": "100Gi", "persistentvolumeclaims": "2"},
    )
    return kube_api


def doctor(capsys, *args, pipeline="osft-minimal"):
    own_model = any(str(arg).startswith(f"{dash('train', 'training_base_model')}=") for arg in args)
    code = main(["doctor", str(pipeline), "--namespace", NS, *([] if own_model else BASE_MODEL), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def problems(out):
    return [line for line in out.splitlines() if line.startswith(("WARN", "FAIL"))]


def one_problem(capsys, *args, pipeline="osft-minimal"):
    """The exit code and the one WARN or FAIL line of a doctor run."""
    code, out, _ = doctor(capsys, *args, pipeline=pipeline)
    [line] = problems(out)
    return code, line


def assert_no_secret_reads_beyond_keys(kube_api):
    secret_requests = [r for r in kube_api.requests if r.plural == "secrets"]
    assert secret_requests, "the secrets were not checked"
    mounted = {"kubernetes-credentials", "s3-secret", "hf-token", "oci-pull-secret-model-download"}
    mounted.add("oci-push-secret-model-upload")  # the registry step's modelcar push secret (issue 37)
    assert all(r.verb == "get" and r.name in mounted for r in secret_requests), kube_api.requests_summary()
    writes = [r for r in kube_api.requests if r.verb in ("create", "patch", "delete", "update")]
    assert {r.plural for r in writes} <= {"selfsubjectaccessreviews"}, kube_api.requests_summary()


def test_all_present_cluster_passes(cluster, capsys):
    code, out, _ = doctor(capsys, *S3_DATASET)
    assert code == 0, out
    assert problems(out) == [], out
    lines = out.splitlines()
    assert lines[0].startswith("kfp-finetune doctor: pipeline osft-minimal-pipeline, namespace team")
    for expected in (
        "ClusterTrainingRuntime 'training-hub' exists",
        "may make all",
        "storage class 'nfs-csi' exists; provisioner nfs.csi.k8s.io",
        "ResourceQuota headroom",
        "secret 's3-secret' has the keys AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY",
        "secret 'kubernetes-credentials' has the keys",
        "GPU node(s) fit training (1 node(s) x 1 GPU) and evaluation (1 GPU)",
        "OSFT of ",
        "estimated 0.28 GiB per GPU (0.26–0.33) vs 80.0 GiB on NVIDIA-A100-SXM4-80GB",
        "Model Registry: no address set",
    ):
        assert any(expected in line for line in lines if line.startswith("OK")), (expected, lines)
    assert lines[-1] == f"0 FAIL, 0 WARN, {len(lines) - 2} OK: ready to run"
    assert SECRET_VALUE not in out
    assert_no_secret_reads_beyond_keys(cluster)


def _gpu_node(k, labels=A100_LABELS, taints=()):
    """Replaces ``gpu-1`` by a 2-GPU node with these labels and taints."""
    k.core.delete_node("gpu-1")
    k.put_node(make_node("gpu-1", 2, labels=labels, taints=taints))


def _drop_runtime(k):
    k.custom.delete_cluster_custom_object("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "training-hub")


def _storage_class(k, provisioner):
    """``nfs-csi`` recreated with another provisioner."""
    k.storage_api().delete_storage_class("nfs-csi")
    k.create_storage_class("nfs-csi", provisioner)


SCENARIOS = {
    # name: (mutate(kube_api), extra args, status, fragments the one line must contain)
    "runtime": (
        lambda k: (_drop_runtime(k), k.create_runtime("other-runtime")),
        [],
        "FAIL",
        ["ClusterTrainingRuntime 'training-hub' is missing (available: other-runtime)", "to an existing runtime"],
    ),
    "crd": (
        lambda k: k.unserve(TRAINJOBS),
        [],
        "FAIL",
        ["Kubeflow Trainer v2 CRDs (trainjobs", "are not served", "enable Kubeflow Trainer"],
    ),
    "permission": (
        lambda k: k.deny("trainer.kubeflow.org", "trainjobs", "create"),
        [],
        "FAIL",
        ["may not create trainjobs.trainer.kubeflow.org in namespace team", "rbac.yaml"],
    ),
    "gpu-memory": (  # 256 MiB: below even the lower bound of the tiny model's OSFT estimate
        lambda k: _gpu_node(k, {**A100_LABELS, MIB: "256"}),
        [],
        "FAIL",
        ["estimated 0.28 GiB per GPU (0.26–0.33) vs 0.25 GiB on NVIDIA-A100", "max_tokens_per_gpu", "LoRA"],
    ),
    "gpu-memory-tight": (  # 300 MiB: inside the estimate's range
        lambda k: _gpu_node(k, {**A100_LABELS, MIB: "300"}),
        [],
        "WARN",
        ["vs 0.29 GiB on NVIDIA-A100-SXM4-80GB", "more GPUs", "unfreeze_rank_ratio (now 0.25)"],
    ),
    "gpu-memory-unlabelled": (
        lambda k: _gpu_node(k, {}),
        [],
        "WARN",
        ["GPU memory not checked: no node carries the nvidia.com/gpu.memory label", "GPU Feature Discovery"],
    ),
    "pod-log-permission": (
        lambda k: k.deny("", "pods/log", "get"),
        [],
        "FAIL",
        ["may not get pods/log in namespace team", "apply components/training/finetuning/rbac.yaml"],
    ),
    "pod-get-permission": (
        lambda k: k.deny("", "pods", "get"),
        [],
        "WARN",
        ["may not get pods in namespace team: the job gets no ownerReference", "apply components/training/finetuning"],
    ),
    "cluster-runtime-permission": (
        lambda k: k.deny("trainer.kubeflow.org", "clustertrainingruntimes", "list"),
        [],
        "WARN",
        ["may not list clustertrainingruntimes.trainer.kubeflow.org (cluster-wide)", "its ClusterRole part"],
    ),
    "storage-class": (
        lambda k: k.storage_api().delete_storage_class("nfs-csi"),
        [],
        "FAIL",
        [
            "storage class 'nfs-csi'",
            "not found (available: gp3-csi (ebs.csi.aws.com))",
            "--pvc-storage-class",
            "PVC_STORAGE_CLASS at the top of the pipeline's pipeline.py",  # the guide's remedy
        ],
    ),
    "rwx": (
        lambda k: _storage_class(k, "ebs.csi.aws.com"),
        [],
        "FAIL",
        ["storage class 'nfs-csi': provisioner ebs.csi.aws.com (Amazon EBS) gives no ReadWriteMany", "recompile"],
    ),
    "default-class": (  # a pipeline without a storage class gets the cluster's default
        lambda k: None,
        ["--pvc-storage-class", ""],
        "FAIL",
        ["storage class 'gp3-csi': provisioner ebs.csi.aws.com (Amazon EBS) gives no"],
    ),
    "unknown-provisioner": (
        lambda k: _storage_class(k, "example.com/x"),
        [],
        "WARN",
        ["provisioner 'example.com/x' is not known to support ReadWriteMany", "check its documentation"],
    ),
    "quota": (
        lambda k: k.create_quota(NS, "tight", hard={"requests.storage": "120Gi"}, used={"requests.storage": "100Gi"}),
        [],
        "FAIL",
        ["no quota headroom for the 50Gi workspace PVC", "ResourceQuota 'tight' requests.storage: 100Gi of 120Gi"],
    ),
    "class-quota": (
        lambda k: k.create_quota(
            NS,
            "nfs",
            hard={"nfs-csi.storageclass.storage.k8s.io/persistentvolumeclaims": "3"},
            used={"nfs-csi.storageclass.storage.k8s.io/persistentvolumeclaims": "3"},
        ),
        [],
        "FAIL",
        ["ResourceQuota 'nfs' nfs-csi.storageclass.storage.k8s.io/persistentvolumeclaims: 3 of 3 used, 1 more needed"],
    ),
    "storage-classes-forbidden": (
        lambda k: k.fail("fetch", "storageclasses", status=403),
        [],
        "WARN",
        ["cannot read storage classes", "ask an admin whether nfs-csi exists and gives RWX"],
    ),
    "nodes-forbidden": (
        lambda k: k.fail("list", "nodes", status=403),
        [],
        "WARN",
        ["cannot list nodes", "GPU capacity not checked", "oc get nodes -l nvidia.com/gpu.present=true"],
    ),
    "secret-key": (
        lambda k: (
            k.core.delete_namespaced_secret("s3-secret", NS),
            k.create_secret(NS, "s3-secret", {"AWS_ACCESS_KEY_ID": SECRET_VALUE}),
        ),
        [],
        "FAIL",
        ["secret 's3-secret' lacks the key(s) AWS_SECRET_ACCESS_KEY", "add AWS_SECRET_ACCESS_KEY to it"],
    ),
    "s3-secret": (
        lambda k: k.core.delete_namespaced_secret("s3-secret", NS),
        [],
        "FAIL",
        ["secret 's3-secret' (S3 access) is missing", dash("dataset", "dataset_uri"), "oc create secret generic"],
    ),
    "oci-secret": (
        lambda k: None,
        param("train", "training_base_model", "oci://quay.io/org/model:1"),
        "FAIL",
        [
            "secret 'oci-pull-secret-model-download' (oci:// model pulls) is missing",
            dash("train", "training_base_model"),
        ],
    ),
    "kubernetes-credentials": (
        lambda k: k.core.delete_namespaced_secret("kubernetes-credentials", NS),
        [],
        "WARN",
        ["secret 'kubernetes-credentials' is absent", "grant that service account rbac.yaml's permissions"],
    ),
    "secrets-forbidden": (
        lambda k: k.fail("fetch", "secrets", status=403, times=10),
        [],
        "WARN",
        ["cannot read secrets in team (get secrets is forbidden", "not checked"],
    ),
    "gpu-nodes": (
        lambda k: k.core.delete_node("gpu-1"),
        [],
        "FAIL",
        ["no schedulable nodes labelled nvidia.com/gpu.present=true", "NVIDIA GPU Operator"],
    ),
    "gpus-per-node": (
        lambda k: None,
        param("train", "training_gpus_per_node", 4),
        "FAIL",
        ["asks for 4 nvidia.com/gpu per pod; the largest GPU node has 2 allocatable"],
    ),
    "gpu-taint": (
        lambda k: _gpu_node(k, taints=(GPU_TAINT,)),
        [],
        "FAIL",
        ["GPU nodes that fit are tainted (gpu-1)", '{"effect": "NoSchedule", "key": "nvidia.com/gpu"'],
    ),
    "registry-name": (
        lambda k: None,
        [*param("registry", "registry_address", "http://127.0.0.1:9"), *param("registry", "model_name", "my model")],
        "FAIL",
        ["Model Registry: model_name='my model': must start with a letter or digit", dash("registry", "model_name")],
    ),
    "registry": (
        lambda k: None,
        "closed-port",
        "FAIL",
        ["Model Registry at http://127.0.0.1:", "is unreachable", "check that the Model Registry is installed"],
    ),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_each_missing_prerequisite_is_one_line_with_its_remedy(cluster, capsys, scenario):
    mutate, extra, status, fragments = SCENARIOS[scenario]
    mutate(cluster)
    if extra == "closed-port":
        extra = [
            *param("registry", "registry_address", f"http://127.0.0.1:{closed_port()}"),
            *param("registry", "model_name", "m"),
        ]
    code, out, err = doctor(capsys, *S3_DATASET, *extra)
    found = problems(out)
    assert len(found) == 1, out + err
    assert found[0].startswith(status), out
    for fragment in fragments:
        assert fragment in found[0], (fragment, found[0])
    assert "  — " in found[0], found[0]  # a remedy follows
    assert code == (1 if status == "FAIL" else 0), out
    assert SECRET_VALUE not in out + err


def test_registry_reachable_over_verified_tls_and_refused_without_its_ca(cluster, capsys, registry_stub_tls):
    registry = [*param("registry", "registry_address", registry_stub_tls.url), *param("registry", "model_name", "m")]
    code, out, _ = doctor(capsys, *S3_DATASET, *registry, "--ca-bundle", str(registry_stub_tls.ca_bundle))
    assert code == 0 and problems(out) == [], out
    assert f"OK    Model Registry at {registry_stub_tls.url} answers (HTTP 200)" in out
    assert registry_stub_tls.requests[-1].path.startswith("/api/model_registry/v1/registered_models")
    code, line = one_problem(capsys, *S3_DATASET, *registry)
    assert line.startswith(f"FAIL  Model Registry at {registry_stub_tls.url}: TLS verification failed"), line
    assert "--ca-bundle" in line and code == 1


def test_kfp_api_health_is_checked_when_a_host_is_given(cluster, capsys, kfp_api_stub):
    code, out, _ = doctor(capsys, *S3_DATASET, "--kfp-host", kfp_api_stub.url)
    assert code == 0 and problems(out) == [], out
    assert f"OK    KFP API at {kfp_api_stub.url} is healthy" in out
    code, line = one_problem(capsys, *S3_DATASET, "--kfp-host", f"http://127.0.0.1:{closed_port()}")
    assert line.startswith("FAIL  cannot reach the KFP API") and "pipeline server is running" in line, line
    assert code == 1


def test_json_report_for_scripts(cluster, capsys):
    cluster.core.delete_node("gpu-1")
    code, out, _ = doctor(capsys, *S3_DATASET, "--json")
    report = json.loads(out)
    assert code == report["exit_code"] == 1 and report["ok"] is False
    assert report["context"]["namespace"] == NS and report["context"]["pipeline"] == "osft-minimal-pipeline"
    failed = [c for c in report["checks"] if c["status"] == "FAIL"]
    assert [c["area"] for c in failed] == ["gpus"] and failed[0]["remedy"]
    assert report["counts"]["FAIL"] == 1 and SECRET_VALUE not in out


def test_params_file_and_pipeline_defaults_resolve_through_the_parameters_table(cluster, capsys, tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(
        f"{dash('dataset', 'dataset_uri')}: s3://bucket/x.jsonl\n{dash('train', 'training_num_nodes')}: 3\n"
    )
    code, line = one_problem(capsys, "--params-file", str(params))
    assert "training (3 node(s) x 1 GPU): the GPU nodes hold at most 2 such pod(s)" in line, line
    assert dash("train", "training_num_nodes") in line
    cluster.put_node(make_node("gpu-2", 1))
    code, out, _ = doctor(capsys, "--params-file", str(params))
    assert code == 0 and "fit training (3 node(s) x 1 GPU)" in out, out


def test_a_parameter_the_pipeline_lacks_is_bad_input(cluster, capsys):
    code, out, err = doctor(capsys, "--param", "no_such_parameter=1")
    assert code == 2 and out == ""
    assert "parameter 'no_such_parameter' is not a parameter of pipeline" in err
    assert dash("dataset", "dataset_uri") in err  # the known names are listed


@pytest.fixture(scope="module")
def osft(environment_settings_yamls):
    """The expert OSFT pipeline (its launcher, backend and runtime are parameters), compiled once per session."""
    return environment_settings_yamls["osft"]


def test_local_launcher_needs_no_trainer_permissions_or_gpus(cluster, capsys, tmp_path):
    cluster.unserve(TRAINJOBS)
    cluster.deny("trainer.kubeflow.org", "trainjobs", "create")
    cluster.core.delete_node("gpu-1")
    package = tmp_path / "osft.yaml"
    assert main(["compile", "osft", "--eval-gpus", "0", "-o", str(package)]) == 0
    code, out, _ = doctor(capsys, *S3_DATASET, *param("train", "training_launcher", "local"), pipeline=package)
    assert code == 0 and problems(out) == [], out
    assert "launcher 'local'" in out and "asks for no GPUs" in out
    assert not any(r.plural == "selfsubjectaccessreviews" for r in cluster.requests)


def test_auto_falls_back_to_pytorchjob_only_with_a_training_image(cluster, capsys, osft):
    cluster.serve(PYTORCHJOBS)
    _drop_runtime(cluster)
    code, line = one_problem(capsys, *S3_DATASET, pipeline=osft)
    assert code == 1 and line.startswith("FAIL  launcher 'auto' will use the PyTorchJob CRD"), line
    assert "is empty" in line and dash("train", "training_image") in line
    code, line = one_problem(capsys, *S3_DATASET, *param("train", "training_image", "q/i:1"), pipeline=osft)
    assert code == 0 and line.startswith("WARN  launcher 'auto' will use the PyTorchJob CRD"), line
    # PyTorchJob permissions are reviewed, Trainer ones are not.
    reviewed = {r.body["spec"]["resourceAttributes"]["resource"] for r in cluster.requests if r.body}
    assert "pytorchjobs" in reviewed


def test_the_transformers_backend_needs_the_torch_distributed_runtime(cluster, capsys, osft):
    args = [*S3_DATASET, *param("train", "training_backend", "transformers")]
    code, line = one_problem(capsys, *args, pipeline=osft)
    assert code == 1 and "ClusterTrainingRuntime 'torch-distributed' is missing (available: training-hub)" in line
    cluster.create_runtime("torch-distributed")
    code, out, _ = doctor(capsys, *args, pipeline=osft)
    assert code == 0 and "ClusterTrainingRuntime 'torch-distributed' exists" in out, out
    # A named runtime wins over the backend's.
    code, out, _ = doctor(capsys, *args, *param("train", "training_runtime_name", "training-hub"), pipeline=osft)
    assert code == 0 and "ClusterTrainingRuntime 'training-hub' exists" in out


def test_no_credentials_is_one_fail_and_the_endpoints_are_still_checked(kube_api, capsys, monkeypatch, tmp_path):
    for name in (kube.SERVER_URL_ENV, kube.AUTH_TOKEN_ENV, "KFP_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    code, out, _ = doctor(capsys, *S3_DATASET)
    [line] = problems(out)
    assert code == 1 and line.startswith("FAIL  cannot connect to Kubernetes: no Kubernetes credentials"), out
    assert "oc login" in line and "Model Registry: no address set" in out


def test_unreachable_api_server_is_one_fail(capsys, monkeypatch):
    monkeypatch.setenv(kube.SERVER_URL_ENV, f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv(kube.AUTH_TOKEN_ENV, "t")
    code, line = one_problem(capsys, *S3_DATASET)
    # Both credentials were set: the address is what to fix, not a login.
    assert code == 1 and "does not answer" in line and "oc login" not in line, line
    assert f"check {kube.SERVER_URL_ENV} (now http://127.0.0.1:" in line and "oc whoami --show-server" in line, line


def test_permissions_reviewed_are_exactly_rbac_yaml_and_the_client_layer():
    reviewed = {(p.group, p.resource, p.verb) for p in rbac_permissions()}
    assert reviewed == set(API_PERMISSIONS)
    assert {p.resource for p in rbac_permissions() if p.cluster} == {"clustertrainingruntimes"}


@pytest.mark.parametrize(
    ("provisioner", "verdict"),
    [
        ("nfs.csi.k8s.io", "rwx"),
        ("cluster.local/nfs-subdir-external-provisioner", "rwx"),
        ("openshift-storage.cephfs.csi.ceph.com", "rwx"),
        ("efs.csi.aws.com", "rwx"),
        ("file.csi.azure.com", "rwx"),
        ("kubernetes.io/azure-file", "rwx"),
        ("filestore.csi.storage.gke.io", "rwx"),
        ("openshift-storage.rbd.csi.ceph.com", "rwo"),
        ("ebs.csi.aws.com", "rwo"),
        ("example.com/custom", "unknown"),
    ],
)
def test_provisioner_table(provisioner, verdict):
    assert judge(provisioner)[0] == verdict


def test_toleration_matching():
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    assert tolerates([{"key": "nvidia.com/gpu", "operator": "Exists"}], taint)
    assert tolerates([{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}], taint)
    assert tolerates([{"operator": "Exists"}], taint)
    assert not tolerates([{"key": "nvidia.com/gpu", "value": "false"}], taint)
    assert not tolerates([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], taint)
    assert not tolerates([], taint)


def test_subprocess_with_compile_time_flags_checks_that_storage_class(cluster, tmp_path):
    cluster.create_storage_class("ocs-storagecluster-cephfs", "openshift-storage.cephfs.csi.ceph.com")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "pipelines.cli", "doctor", "lora-minimal", "--namespace", NS, *S3_DATASET]
    flags = ["--pvc-storage-class", "ocs-storagecluster-cephfs", "--pvc-size", "120Gi", "--json"]
    result = subprocess.run([*command, *flags], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    report = json.loads(result.stdout)
    assert result.returncode == 1, result.stdout + result.stderr  # 120Gi does not fit the 100Gi the quota has left
    storage = [c for c in report["checks"] if c["area"] == "storage"]
    assert storage[0]["status"] == "OK" and "'ocs-storagecluster-cephfs' exists" in storage[0]["what"]
    assert "CephFS" in storage[0]["what"]
    assert storage[1]["status"] == "FAIL" and "no quota headroom for the 120Gi workspace PVC" in storage[1]["what"]
    assert [c["status"] for c in report["checks"]].count("FAIL") == 1


def _edited_osft_minimal(yamls, tmp_path, edit):
    """A copy of the compiled osft-minimal pipeline with ``edit(spec)`` applied."""
    documents = list(yaml.safe_load_all(yamls["osft-minimal"].read_text()))
    edit(documents[0])
    package = tmp_path / "edited.yaml"
    package.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return package


def test_eval_accelerator_compiled_into_the_pipeline_is_checked(cluster, capsys, tmp_path, environment_settings_yamls):
    def four_gpus(spec):
        executor = spec["deploymentSpec"]["executors"]["exec-lm-eval"]["container"]
        executor["resources"] = {"accelerator": {"resourceType": "nvidia.com/gpu", "resourceCount": "4"}}

    package = _edited_osft_minimal(environment_settings_yamls, tmp_path, four_gpus)
    code, line = one_problem(capsys, *S3_DATASET, pipeline=package)
    assert code == 1 and line.startswith("FAIL  evaluation (4 GPU) asks for 4 nvidia.com/gpu per pod"), line
    cluster.put_node(make_node("gpu-big", 4))
    code, out, _ = doctor(capsys, *S3_DATASET, pipeline=package)
    assert code == 0 and "and evaluation (4 GPU) (nvidia.com/gpu)" in out, out


def test_kubeconfig_context_gives_the_connection_and_the_namespace(cluster, capsys, monkeypatch, tmp_path):
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kmock", "cluster": {"server": cluster.url}}],
        "users": [{"name": "me", "user": {"token": "kubeconfig-token"}}],
        "contexts": [{"name": "work", "context": {"cluster": "kmock", "user": "me", "namespace": NS}}],
        "current-context": "work",
    }
    (tmp_path / "config").write_text(yaml.safe_dump(kubeconfig))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "config"))
    monkeypatch.delenv(kube.SERVER_URL_ENV)
    monkeypatch.delenv(kube.AUTH_TOKEN_ENV)
    code = main(["doctor", "osft-minimal", *S3_DATASET])
    out = capsys.readouterr().out
    assert code == 0 and problems(out) == [], out
    assert "namespace team" in out.splitlines()[0] and "credentials kubeconfig" in out.splitlines()[0]


def test_an_unknown_launcher_is_one_fail(cluster, capsys, osft):
    code, line = one_problem(capsys, *S3_DATASET, *param("train", "training_launcher", "slurm"), pipeline=osft)
    assert code == 1 and line.startswith("FAIL  launcher 'slurm' is not a launcher")
    assert dash("train", "training_launcher") in line


@pytest.mark.parametrize("key", ["OCI_PULL_SECRET_MODEL_DOWNLOAD", ".dockerconfigjson"])
def test_either_oci_pull_secret_key_serves_an_oci_base_model(cluster, capsys, key):
    oci_model = param("train", "training_base_model", "oci://quay.io/org/model:1")
    cluster.create_secret(NS, "oci-pull-secret-model-download", {key: SECRET_VALUE})
    code, out, _ = doctor(capsys, *S3_DATASET, *oci_model)
    assert code == 0 and problems(out) == [], out
    assert f"OK    secret 'oci-pull-secret-model-download' has the key {key} (train)" in out
    cluster.core.delete_namespaced_secret("oci-pull-secret-model-download", NS)
    cluster.create_secret(NS, "oci-pull-secret-model-download", {"unrelated": SECRET_VALUE})
    code, line = one_problem(capsys, *S3_DATASET, *oci_model)
    assert code == 1 and "lacks one of the keys OCI_PULL_SECRET_MODEL_DOWNLOAD / .dockerconfigjson" in line, line
    assert SECRET_VALUE not in out


# -- the TrainJob API generation and the runtime's image -------------------------------------------------------------
def test_doctor_names_upstream_trainer_2_3s_api(cluster, capsys):
    code, out, _ = doctor(capsys, *S3_DATASET)
    assert code == 0, out
    (line,) = [line for line in out.splitlines() if "TrainJob API with" in line]
    assert line.startswith("OK") and "spec.runtimePatches (Kubeflow Trainer >= 2.2, RHOAI >= 3.6)" in line
    assert "activeDeadlineSeconds served" in line and "status.trainerStatus served" in line
    assert "JIT checkpoints on pause: available where the runtime's Training Hub is >= 0.11.0" in line
    assert line.endswith("(OpenAPI v3 discovery)")
    assert "the runtime's image is unknown" not in out  # the harness runtime names no image: said so
    assert "ClusterTrainingRuntime 'training-hub' names no image" in out


@pytest.mark.parametrize("kube_api", [ODH_3_3], indirect=True)
def test_doctor_names_rhoai_3_3s_api_and_its_runtime_image(cluster, capsys):
    _drop_runtime(cluster)
    cluster.create_rhoai_runtime("odh-3.3")  # the runtime RHOAI 3.3 ships, vendored
    code, out, _ = doctor(capsys, *S3_DATASET)
    assert code == 0, out
    (line,) = [line for line in out.splitlines() if "TrainJob API with" in line]
    assert line.startswith("OK  ") and "spec.podTemplateOverrides (Kubeflow Trainer 2.0-2.1, RHOAI 3.3-3.5)" in line
    assert "no spec.activeDeadlineSeconds (the launcher enforces training_timeout_seconds itself)" in line
    assert "no status.trainerStatus (no status server: the pods report none)" in line
    assert "JIT checkpoints on pause: not available (Training Hub 0.3.0 has no enable_jit_checkpoint" in line
    assert (
        "OK    training pods run quay.io/modh/training:py312-cuda128-torch280 (from ClusterTrainingRuntime "
        "'training-hub') (RHOAI 3.3's image: Training Hub 0.3.0)"
    ) in out.splitlines()


def test_doctor_says_when_the_api_generation_is_only_assumed(cluster, capsys):
    cluster.openapi_v3(403)
    _, out, _ = doctor(capsys, *S3_DATASET)
    (line,) = [line for line in out.splitlines() if "TrainJob API with" in line]
    assert line.startswith("WARN") and "assumed: OpenAPI v3 discovery" in line and "(HTTP 403)" in line
    assert "a Strict create corrects it once" in line and "system:discovery" in line
    assert "OK    ClusterTrainingRuntime 'training-hub' names no image for its trainer container 'node'" in out


def test_peak_concurrent_gpu_demand_is_counted_against_the_cluster(
    cluster, capsys, tmp_path, environment_settings_yamls
):
    """The guide's OSFT row (one node, one GPU) holds the default run: the base evaluation runs before training."""
    cluster.core.delete_node("gpu-1")
    cluster.put_node(make_node("gpu-1", 1, labels=A100_LABELS))
    code, out, _ = doctor(capsys, *S3_DATASET)
    assert code == 0 and problems(out) == [], out
    assert "peak 1 GPU(s) at once (lm-eval 1) of 1 allocatable" in out, out

    # The same pipeline with the evaluation beside training would hold 2 GPUs at once: doctor says so before a run.
    def overlapping(spec):
        train = spec["root"]["dag"]["tasks"]["train-model"]
        train["dependentTasks"] = [task for task in train["dependentTasks"] if task != "lm-eval"]

    package = _edited_osft_minimal(environment_settings_yamls, tmp_path, overlapping)
    code, line = one_problem(capsys, *S3_DATASET, pipeline=package)
    assert code == 1 and line.startswith("FAIL"), line
    assert "the run holds 2 GPU(s) at once (lm-eval 1, train-model 1); the GPU nodes have 1 nvidia.com/gpu" in line
    assert ".after()" in line
