"""The TrainJob API generation on the wire: discovery, Strict writes, the fallback, and the training step end to end,
against kmock serving RHOAI 3.3's TrainJob API (pruning unknown fields) and upstream Trainer 2.3's.
"""

import json

import pytest
from kfp import dsl

from components.training.finetuning.cluster.api import Api
from components.training.finetuning.cluster.discovery import discover_trainjob_api
from components.training.finetuning.cluster.errors import JobApiError
from components.training.finetuning.cluster.job_client import FieldsRejected, JobClient
from components.training.finetuning.manifests.api_generations import (
    POD_TEMPLATE_OVERRIDES,
    RUNTIME_PATCHES,
    TRAINER_2_3,
    TrainJobApi,
)
from components.training.finetuning.manifests.trainjob import build_trainjob
from components.training.finetuning.run import run_train_model
from components.training.finetuning.tests.cluster_doubles import GPU_TOLERATION, NS, at, spec
from components.training.finetuning.tests.test_api_generations import empty_values
from components.training.finetuning.tests.test_training_component import _artifacts, _play_the_cluster
from tests.harness.follow_doubles import FakeClock, Log
from tests.harness.kube import ODH_3_3, UPSTREAM_2_3, make_pod
from tests.harness.requests import run_job, train_model_request

RHOAI_3_3 = TrainJobApi(POD_TEMPLATE_OVERRIDES, active_deadline=False, trainer_status=False)


def _spec():
    return spec(workspace=True, tolerations=[GPU_TOLERATION], active_deadline_seconds=3600)


def _api(kube_api):
    return Api(kube_api.api_client, lambda seconds: None, lambda line: None, 2)


# -- discovery ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kube_api, expected",
    [(UPSTREAM_2_3, TrainJobApi(RUNTIME_PATCHES, True, True)), (ODH_3_3, RHOAI_3_3)],
    indirect=["kube_api"],
)
def test_discovery_names_the_served_generation(kube_api, expected):
    assert discover_trainjob_api(_api(kube_api)) == expected
    (request,) = kube_api.requests
    assert (request.method, request.path) == ("GET", "/openapi/v3/apis/trainer.kubeflow.org/v1alpha1")


@pytest.mark.parametrize("status, why", [(403, "forbidden to this identity (HTTP 403)"), (404, "(HTTP 404)")])
def test_discovery_that_cannot_say_assumes_the_guides_platform_and_says_why(kube_api, status, why):
    kube_api.openapi_v3(status)
    served = discover_trainjob_api(_api(kube_api))
    assert served.generation == POD_TEMPLATE_OVERRIDES and not served.discovered and why in served.source


def test_discovery_of_an_uninstalled_trainer_is_an_assumption_too(kube_api):
    kube_api.unserve("trainer.kubeflow.org/v1alpha1/trainjobs")
    served = discover_trainjob_api(_api(kube_api))
    assert not served.discovered and "does not publish" in served.source


# -- Strict writes --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kube_api", [ODH_3_3], indirect=True)
def test_todays_runtime_patches_job_on_rhoai_3_3_is_pruned_silently_unless_strict(kube_api):
    """What HEAD did: the default create stores the job without its volume (only a Warning header says so)."""
    kube_api.create_runtime("training-hub")
    manifest = build_trainjob(_spec(), TRAINER_2_3)
    kube_api.create_trainjob(manifest)  # the default fieldValidation (Warn): pruned, stored, 2xx
    (stored,) = kube_api.objects("trainjobs")
    assert "runtimePatches" not in stored["spec"] and "claimName" not in json.dumps(stored)
    kube_api.custom.delete_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", NS, "trainjobs", manifest["metadata"]["name"]
    )
    # This project's client asks for Strict: one error naming the fields and the API the job was written for.
    with pytest.raises(FieldsRejected) as refused:
        run_job(kube_api.api_client, manifest, start_timeout_seconds=5, timeout_seconds=10, log=lambda line: None)
    message = str(refused.value)
    assert refused.value.fields == ["spec.runtimePatches", "spec.activeDeadlineSeconds"]
    assert "fieldValidation=Strict" in message and "spec.runtimePatches, spec.activeDeadlineSeconds" in message
    assert "TrainJob API with spec.runtimePatches (Kubeflow Trainer >= 2.2, RHOAI >= 3.6)" in message
    assert "left running" not in message and kube_api.objects("trainjobs") == []


@pytest.mark.parametrize("kube_api", [ODH_3_3], indirect=True)
def test_a_patch_with_an_unknown_field_is_refused_by_name(kube_api):
    manifest = build_trainjob(_spec(), RHOAI_3_3)
    created = kube_api.create_trainjob(manifest)
    client = JobClient(api=_api(kube_api), manifest=manifest, say=lambda line: None)
    with pytest.raises(JobApiError, match=r"does not serve field\(s\) spec.activeDeadlineSeconds of the TrainJob API"):
        client.patch_job({"spec": {"activeDeadlineSeconds": 60}}, "extending", created["metadata"]["uid"])
    (patch,) = [r for r in kube_api.requests if r.verb == "patch"]
    assert patch.params["fieldValidation"] == "Strict"
    (stored,) = kube_api.objects("trainjobs")
    assert "activeDeadlineSeconds" not in stored["spec"]


@pytest.mark.parametrize("kube_api", [ODH_3_3], indirect=True)
def test_without_active_deadline_the_launcher_stops_a_timed_out_job_it_keeps(kube_api):
    """RHOAI 3.3 serves no activeDeadlineSeconds: at timeout_seconds a kept job is suspended so its pods stop."""
    kube_api.create_runtime("training-hub")
    manifest = build_trainjob(_spec(), RHOAI_3_3)
    name = manifest["metadata"]["name"]
    clock, log = FakeClock(at([(10, lambda: kube_api.put_pod(make_pod(NS, name)))])), Log()
    with pytest.raises(Exception, match="timeout_seconds=95"):
        run_job(
            kube_api.api_client,
            manifest,
            start_timeout_seconds=300,
            timeout_seconds=95,
            cleanup_policy="keep",
            poll_interval_seconds=10,
            use_watch=False,
            clock=clock,
            sleep=clock.sleep,
            log=log,
            active_deadline_served=False,
        )
    (stored,) = kube_api.objects("trainjobs")
    assert stored["spec"]["suspend"] is True
    assert "has no activeDeadlineSeconds: suspending the job (cleanup_policy=keep)" in log.text()


# -- the training step, end to end ----------------------------------------------------------------------------------
def _train(kube_api, tmp_path, tiny_model_dir, demo_dataset_path, logged):
    kube_api.create_runtime("training-hub")
    dataset, out = _artifacts(tmp_path, demo_dataset_path)
    workspace = tmp_path / "kfp-workspace"
    task_config = dsl.TaskConfig(
        volumes=[{"name": "workspace", "persistentVolumeClaim": {"claimName": "run-ws", "readOnly": False}}],
        volume_mounts=[{"name": "workspace", "mountPath": str(workspace), "readOnly": False}],
        env=[{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}, {"name": "NO_PROXY", "value": ""}],
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        node_selector={"nvidia.com/gpu.present": "true"},
    )
    seen = {}
    with kube_api.in_background(lambda: _play_the_cluster(kube_api, tmp_path, seen)):
        run_train_model(
            train_model_request(
                dataset=dataset,
                task_config=task_config,
                training_base_model=str(tiny_model_dir),
                training_algorithm="sft",
                training_namespace=NS,
                pvc_path=str(workspace),
                run_id="run-33",
                task_name="train-model",
                training_timeout_seconds=3600,
                hf_token_secret_name="hf-token",
                s3_secret_name="models-s3",
            ),
            **out,
            api_client=kube_api.api_client,
            log=logged.append,
            job_options={"poll_interval_seconds": 0.2},
        )
    return seen["manifest"]  # the TrainJob as the API server stored it


def _pod_patch(spec):
    if "podTemplateOverrides" in spec:
        (override,) = spec["podTemplateOverrides"]
        return override
    (patch,) = spec["runtimePatches"]
    (job,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    return job["template"]["spec"]["template"]


def _assert_stored_whole(kube_api, stored, tmp_path):
    """Nothing pruned: the stored job is the one sent, with its volume, mount, tolerations and secrets."""
    (create,) = [r for r in kube_api.requests if r.verb == "create" and r.plural == "trainjobs"]
    assert create.params["fieldValidation"] == "Strict"
    assert stored["spec"] == create.body["spec"]
    patch = _pod_patch(stored["spec"])
    assert patch["spec"]["volumes"] == [{"name": "workspace", "persistentVolumeClaim": {"claimName": "run-ws"}}]
    assert patch["spec"]["containers"] == [
        {"name": "node", "volumeMounts": [{"name": "workspace", "mountPath": str(tmp_path / "kfp-workspace")}]}
    ]
    assert patch["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert patch["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert patch["metadata"]["labels"]["training.kubeflow.org/job-name"] == stored["metadata"]["name"]
    refs = {
        e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in stored["spec"]["trainer"]["env"] if "valueFrom" in e
    }
    assert refs["HF_TOKEN"] == "hf-token" and refs["AWS_SECRET_ACCESS_KEY"] == "models-s3"
    assert {"name": "NO_PROXY"} in stored["spec"]["trainer"]["env"]
    assert empty_values(stored["spec"]) == []


@pytest.mark.slow
@pytest.mark.parametrize("kube_api", [ODH_3_3], indirect=True)
def test_on_rhoai_3_3_the_step_submits_pod_template_overrides_and_nothing_is_pruned(
    kube_api, tmp_path, tiny_model_dir, demo_dataset_path
):
    logged = []
    stored = _train(kube_api, tmp_path, tiny_model_dir, demo_dataset_path, logged)
    _assert_stored_whole(kube_api, stored, tmp_path)
    assert "podTemplateOverrides" in stored["spec"] and "runtimePatches" not in stored["spec"]
    assert "activeDeadlineSeconds" not in stored["spec"]
    assert (
        "TrainJob API: TrainJob API with spec.podTemplateOverrides (Kubeflow Trainer 2.0-2.1, RHOAI 3.3-3.5) "
        "(from OpenAPI v3 discovery); no spec.activeDeadlineSeconds (the launcher enforces training_timeout_seconds "
        "itself)"
    ) in "\n".join(logged)
    assert f"Job: {stored['metadata']['name']}" in logged and f"Namespace: {NS}" in logged


@pytest.mark.slow
@pytest.mark.parametrize("discovery", [0, 403])
def test_on_trainer_2_3_the_step_still_uses_runtime_patches(
    discovery, kube_api, tmp_path, tiny_model_dir, demo_dataset_path
):
    """Discovered, or (discovery refused) assumed RHOAI 3.3, refused by the Strict create and built again once."""
    kube_api.openapi_v3(discovery)
    logged = []
    stored = _train(kube_api, tmp_path, tiny_model_dir, demo_dataset_path, logged)
    assert "runtimePatches" in stored["spec"] and stored["spec"]["activeDeadlineSeconds"] == 3600
    creates = [r for r in kube_api.requests if r.verb == "create" and r.plural == "trainjobs"]
    assert all(r.params["fieldValidation"] == "Strict" for r in creates)
    if not discovery:
        _assert_stored_whole(kube_api, stored, tmp_path)
        return
    refused, accepted = creates  # nothing was stored from the refused one: the emulator answered 400
    assert "podTemplateOverrides" in refused.body["spec"] and stored["spec"] == accepted.body["spec"]
    text = "\n".join(logged)
    assert "(assumed: OpenAPI v3 discovery (/openapi/v3/apis/trainer.kubeflow.org/v1alpha1) is forbidden" in text
    assert "TrainJob API with spec.runtimePatches (Kubeflow Trainer >= 2.2, RHOAI >= 3.6) (assumed: the cluster" in text
    assert empty_values(stored["spec"]) == []
