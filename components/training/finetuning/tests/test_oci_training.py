"""``train_model`` from an ``oci://`` base model on a real registry: local launcher, TrainJob and PyTorchJob (kmock)."""

import base64
import json
from pathlib import Path

import pytest
from kfp import dsl

from components._common.base_model import BaseModelError
from components.deployment.kubeflow_model_registry.lineage import ArtifactInfo, RunInfo, lineage_properties
from components.training.finetuning import train_model
from components.training.finetuning.run import run_train_model
from components.training.finetuning.tests.test_training_component import _artifacts, _play_the_cluster
from pipelines.local_pipeline import local_pipeline
from tests.harness.oci_registry import AUTH_PASSWORD, AUTH_USER
from tests.harness.requests import train_model_request

pytestmark = pytest.mark.slow

NS = "team-a"
FAST = {
    "training_effective_batch_size": 16,
    "training_learning_rate": 3e-3,
    "training_max_seq_len": 256,
    "training_max_tokens_per_gpu": 1024,
    "training_num_epochs": 1,
}


def _secret(host):
    auth = base64.b64encode(f"{AUTH_USER}:{AUTH_PASSWORD}".encode()).decode()
    return json.dumps({"auths": {host: {"auth": auth}}})


def test_local_launcher_trains_from_an_oci_modelcar(oci_registry, demo_dataset_path, tmp_path):
    dataset, out = _artifacts(tmp_path, demo_dataset_path)
    workspace = tmp_path / "ws"
    uri = f"oci://{oci_registry.host}/models/tiny:1"
    digest = oci_registry.digests["models/tiny:1"]
    lines = []
    run_train_model(
        train_model_request(
            dataset=dataset,
            training_base_model=uri,
            training_launcher="local",
            training_oci_insecure=True,
            pvc_path=str(workspace),
            run_id="run-oci",
            task_name="train-model",
            training_max_steps=2,
            **FAST,
        ),
        **out,
        log=lines.append,
    )
    meta = out["model"].metadata
    assert meta["base_model"] == uri and meta["base_model_digest"] == digest
    assert meta["base_model_resolved"] == f"oci://{oci_registry.host}/models/tiny@{digest}"
    staged = Path(meta["base_model_path"])
    assert (
        staged.is_relative_to(workspace / "train_model" / "model_cache" / "oci") and (staged / "config.json").is_file()
    )
    assert (Path(out["model"].path) / "model.safetensors").is_file() and out["metrics"].metadata["steps"] == 2
    assert any(f"pulling {uri}" in line for line in lines)
    props = lineage_properties(ArtifactInfo(out["model"].uri, out["model"].path, meta), RunInfo("run-oci"))
    assert (props["base_model"], props["base_model_digest"]) == (uri, digest)
    assert props["base_model_resolved_uri"] == f"oci://{oci_registry.host}/models/tiny@{digest}"


@dsl.component(install_kfp_package=False)
def _copy_dataset(source: str, data: dsl.Output[dsl.Dataset]):
    open(data.path, "w").write(open(source).read())


def test_the_component_pulls_with_the_secret_through_kfp_local(
    kfp_local, oci_registry_auth, demo_dataset_path, monkeypatch
):
    """The KFP component, as a pipeline runs it: guide-named arguments, the pull secret from the task's env."""
    monkeypatch.setenv("OCI_PULL_SECRET_MODEL_DOWNLOAD", _secret(oci_registry_auth.host))
    digest = oci_registry_auth.digests["models/tiny:1"]

    @dsl.pipeline
    def fine_tune(base_model: str, source: str) -> dsl.Model:
        data = _copy_dataset(source=source)
        trained = train_model(
            dataset=data.outputs["data"],
            training_base_model=base_model,
            training_launcher="local",
            training_oci_insecure=True,
            training_max_steps=1,
            **FAST,
        )
        return trained.outputs["output_model"]

    run = local_pipeline(fine_tune)  # eval_dataset left unconnected, as on the backend
    model = run(base_model=f"oci://{oci_registry_auth.host}/models/tiny:1", source=str(demo_dataset_path)).output
    assert model.metadata["base_model_digest"] == digest
    assert model.metadata["base_model_resolved"].endswith(f"/models/tiny@{digest}")
    assert (Path(model.path) / "model.safetensors").is_file()


def test_a_pull_error_fails_before_training(oci_registry, demo_dataset_path, tmp_path):
    dataset, out = _artifacts(tmp_path, demo_dataset_path)
    with pytest.raises(BaseModelError, match=r"^training_base_model='oci://.*tag '9' not found"):
        run_train_model(
            train_model_request(
                dataset=dataset,
                training_base_model=f"oci://{oci_registry.host}/models/tiny:9",
                training_launcher="local",
                training_oci_insecure=True,
                pvc_path=str(tmp_path / "ws"),
                **FAST,
            ),
            **out,
            log=lambda line: None,
        )
    assert not any((tmp_path / "out").iterdir())
    assert not list((tmp_path / "ws").rglob("config.json"))


@pytest.mark.parametrize(("kind", "registry"), [("trainjob", "oci_registry"), ("pytorchjob", "oci_registry_auth")])
def test_cluster_jobs_read_the_copy_staged_on_the_workspace(
    kind, registry, request, kube_api, tiny_model_dir, demo_dataset_path, tmp_path, monkeypatch, capsys
):
    registry = request.getfixturevalue(registry)
    if registry.credentials:
        monkeypatch.setenv("OCI_PULL_SECRET_MODEL_DOWNLOAD", _secret(registry.host))
    kube_api.create_runtime("training-hub")
    dataset, out = _artifacts(tmp_path, demo_dataset_path)
    workspace = tmp_path / "kfp-workspace"
    task_config = dsl.TaskConfig(
        volumes=[{"name": "workspace", "persistentVolumeClaim": {"claimName": "run-ws"}}],
        volume_mounts=[{"name": "workspace", "mountPath": str(workspace)}],
        # What the pipelines' secret mount puts into the task's env (and the ENV passthrough hands on).
        env=[
            {"name": name, "valueFrom": {"secretKeyRef": {"name": "oci-pull-secret-model-download", "key": key}}}
            for name, key in (
                ("OCI_PULL_SECRET_MODEL_DOWNLOAD", "OCI_PULL_SECRET_MODEL_DOWNLOAD"),
                ("OCI_PULL_SECRET_DOCKERCONFIGJSON", ".dockerconfigjson"),
            )
        ]
        + [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
    )
    uri = f"oci://{registry.host}/models/tiny:1"
    extra = {"training_image": "quay.io/example/training-hub:0.11"} if kind == "pytorchjob" else {}
    seen = {}
    with kube_api.in_background(lambda: _play_the_cluster(kube_api, tmp_path, seen, kind)):
        run_train_model(
            train_model_request(
                dataset=dataset,
                task_config=task_config,
                training_base_model=uri,
                training_launcher=kind,
                training_oci_insecure=True,
                training_namespace=NS,
                pvc_path=str(workspace),
                run_id="run-oci",
                task_name="train-model",
                **extra,
            ),
            **out,
            api_client=kube_api.api_client,
            log=print,
            job_options={"poll_interval_seconds": 0.2},
        )
    digest = registry.digests["models/tiny:1"]
    staged = workspace / "train_model" / "model_cache" / "oci" / digest.replace(":", "-") / "model"
    call = json.loads((tmp_path / "calls.json").read_text())
    assert call["kwargs"]["model_path"] == str(staged)  # the pod loaded the workspace copy
    for path in tiny_model_dir.iterdir():
        assert (staged / path.name).read_bytes() == path.read_bytes()
    config_paths = list(workspace.glob("train_model/*/run_config.json"))
    assert len(config_paths) == 1
    run_config = json.loads(config_paths[0].read_text())
    assert run_config["base_model"] == uri and run_config["model_path"] == str(staged)
    meta = out["model"].metadata
    assert meta["base_model_digest"] == digest and meta["backend"] == kind
    assert meta["base_model_resolved"] == f"oci://{registry.host}/models/tiny@{digest}"
    manifest_text = json.dumps(seen["manifest"])  # the pods get neither the pull secret nor its value
    assert "OCI_PULL_SECRET" not in manifest_text and "oci-pull-secret" not in manifest_text
    assert AUTH_PASSWORD not in manifest_text and "http://proxy:3128" in manifest_text
    captured = capsys.readouterr()
    assert AUTH_PASSWORD not in captured.out + captured.err + seen["pod_output"]
