"""A hostile cluster: discovery answers of any shape or none, a job stored without the pod settings sent, a Strict
refusal of a field that is not the generation's own, a create the server stores after SIGTERM.
"""

import copy
import json
import os
import signal
import time

import pytest

from components.training.finetuning.cluster.api import Api
from components.training.finetuning.cluster.discovery import discover_trainjob_api
from components.training.finetuning.cluster.errors import JobApiError, JobCancelled, JobIncomplete
from components.training.finetuning.manifests.api_generations import POD_TEMPLATE_OVERRIDES, TRAINER_2_3
from components.training.finetuning.manifests.trainjob import build_trainjob
from components.training.finetuning.tests.cluster_doubles import GPU_TOLERATION, NS, WORKSPACE_VOLUME, spec
from components.training.finetuning.tests.test_trainjob_api_cluster import _pod_patch, _train
from tests.harness.kube import ODH_3_3
from tests.harness.requests import run_job


def _manifest(api=TRAINER_2_3):
    return build_trainjob(spec(workspace=True, tolerations=[GPU_TOLERATION]), api)


def _api(kube_api, attempts=3):
    return Api(kube_api.api_client, time.sleep, lambda line: None, attempts)


# -- discovery: answers of any shape ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "body, why",
    [
        (b"[]", "answered with a JSON list where an OpenAPI document"),
        (b"null", "answered with a JSON null where an OpenAPI document"),
        (b'"text"', "answered with a JSON str where an OpenAPI document"),
        (json.dumps({"components": {"schemas": []}}).encode(), "has no TrainJob schema"),
        (json.dumps({"components": []}).encode(), "has no TrainJob schema"),
        (
            json.dumps({"components": {"schemas": {"a": {"x-kubernetes-group-version-kind": {"kind": "x"}}}}}).encode(),
            "has no TrainJob schema",
        ),
        (
            json.dumps(
                {"components": {"schemas": {"a": [1], "b": {"x-kubernetes-group-version-kind": [7, None]}}}}
            ).encode(),
            "has no TrainJob schema",
        ),
    ],
)
def test_discovery_of_any_json_shape_assumes_the_guides_platform_and_says_why(kube_api, body, why):
    kube_api.behave(openapi_answer=(200, "application/json", body))
    served = discover_trainjob_api(_api(kube_api))
    assert served.generation == POD_TEMPLATE_OVERRIDES and not served.discovered
    assert why in served.source


def test_discovery_answered_by_an_html_page_names_the_page_not_a_json_position(kube_api):
    page = b"<!DOCTYPE html><html><head><title>Log in</title></head><body>OAuth proxy</body></html>"
    kube_api.behave(openapi_answer=(200, "text/html; charset=utf-8", page))
    served = discover_trainjob_api(_api(kube_api))
    assert not served.discovered
    assert "is not JSON (text/html; charset=utf-8, starting '<!DOCTYPE html><html><head><title>Log in" in served.source
    assert "Expecting value" not in served.source


def test_a_hanging_discovery_endpoint_costs_its_deadline_not_three_read_timeouts(kube_api):
    kube_api.behave(openapi_delay=120)
    began = time.monotonic()
    served = discover_trainjob_api(_api(kube_api), deadline_seconds=2)
    elapsed = time.monotonic() - began
    assert elapsed < 2 + 1 + 1.5, elapsed  # the deadline, the 1 s minimum request timeout, slack
    assert not served.discovered and "did not answer before discovery's 2 s deadline" in served.source


# -- a job that lost its pod settings ---------------------------------------------------------------------------
@pytest.mark.parametrize("kube_api", [ODH_3_3], indirect=True)
def test_a_server_that_ignores_strict_and_prunes_leaves_a_job_that_is_refused_and_deleted(kube_api):
    kube_api.create_runtime("training-hub")
    kube_api.behave(ignores_field_validation=True)
    manifest = _manifest()  # runtimePatches (Trainer 2.3): a server of RHOAI 3.3 prunes its pod patch
    lines = []
    with pytest.raises(JobIncomplete) as refused:
        run_job(kube_api.api_client, manifest, start_timeout_seconds=5, timeout_seconds=10, log=lines.append)
    message = str(refused.value)
    assert message.startswith(
        f"TrainJob {NS}/{manifest['metadata']['name']}: the API server stored it without field(s)"
    )
    assert "spec.runtimePatches" in message and "ignores fieldValidation=Strict" in message
    assert message.endswith("it was deleted (cleanup_policy=delete)")
    assert kube_api.objects("trainjobs") == []  # not followed, and nothing of it runs on
    assert not [r for r in kube_api.requests if r.verb == "watch"]


def _drop_workspace_volume(body):
    patch = _pod_patch(body["spec"])
    patch["spec"]["volumes"] = [v for v in patch["spec"]["volumes"] if v != WORKSPACE_VOLUME]
    return body


@pytest.mark.parametrize("policy, left", [("delete", 0), ("suspend", 1), ("keep", 1)])
def test_a_mutating_webhook_that_drops_the_workspace_volume_is_caught_and_the_cleanup_policy_applied(
    kube_api, policy, left
):
    kube_api.create_runtime("training-hub")
    kube_api.behave(create_webhooks={"trainjobs": _drop_workspace_volume})
    manifest = _manifest()
    with pytest.raises(JobIncomplete) as refused:
        run_job(
            kube_api.api_client,
            manifest,
            start_timeout_seconds=5,
            timeout_seconds=10,
            cleanup_policy=policy,
            log=lambda line: None,
        )
    assert "field(s) spec.runtimePatches[0]" in str(refused.value) and "[name=kfp-workspace]" in str(refused.value)
    assert len(kube_api.objects("trainjobs")) == left
    if policy == "suspend":
        assert kube_api.objects("trainjobs")[0]["spec"]["suspend"] is True
    assert not [r for r in kube_api.requests if r.verb == "watch"]


def test_adopting_an_existing_job_that_lost_its_workspace_volume_is_refused_too(kube_api):
    kube_api.create_runtime("training-hub")
    manifest = _manifest()
    kube_api.create_trainjob(_drop_workspace_volume(copy.deepcopy(manifest)))  # an earlier attempt's, pruned
    with pytest.raises(JobIncomplete, match="the existing job this step would re-attach to lacks field"):
        run_job(kube_api.api_client, manifest, start_timeout_seconds=5, timeout_seconds=10, log=lambda line: None)
    assert kube_api.objects("trainjobs") == []


# -- a Strict refusal flips the generation only for that generation's own field ------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("kube_api", [ODH_3_3], indirect=True)
def test_a_strict_refusal_of_another_field_does_not_flip_the_assumed_generation(
    kube_api, tmp_path, tiny_model_dir, demo_dataset_path
):
    kube_api.openapi_v3(403)  # the generation is assumed (RHOAI 3.3's podTemplateOverrides: right for this server)
    kube_api.behave(refused_fields=["spec.trainer.numProcPerNode"])
    with pytest.raises(JobApiError) as refused:
        _train(kube_api, tmp_path, tiny_model_dir, demo_dataset_path, [])
    message = str(refused.value)
    assert "does not serve field(s) spec.trainer.numProcPerNode of the TrainJob API with spec.podTemplateOverrides" in (
        message
    )
    (create,) = [r for r in kube_api.requests if r.verb == "create" and r.plural == "trainjobs"]
    assert "podTemplateOverrides" in create.body["spec"]  # no second create built for runtimePatches
    assert kube_api.objects("trainjobs") == []


# -- SIGTERM while the create is in flight ----------------------------------------------------------------------
def test_sigterm_during_a_create_the_server_stores_later_finds_and_deletes_the_job(kube_api):
    kube_api.create_runtime("training-hub")
    manifest = _manifest()
    kube_api.behave(create_delays={"trainjobs": 2.0})

    def cancel_while_creating():
        kube_api.wait_for(lambda: [r for r in kube_api.requests if r.verb == "create"])
        time.sleep(0.2)
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, signal.SIG_IGN, None):
            return  # the run is over already (the test fails): a SIGTERM now would stop pytest itself
        os.kill(os.getpid(), signal.SIGTERM)

    lines = []
    began = time.monotonic()
    with kube_api.in_background(cancel_while_creating), pytest.raises(JobCancelled):
        run_job(
            kube_api.api_client,
            manifest,
            start_timeout_seconds=30,
            timeout_seconds=60,
            poll_interval_seconds=0.2,
            cancel_timeout_seconds=5,
            log=lines.append,
        )
    elapsed = time.monotonic() - began
    assert elapsed < 0.2 + 5 + 2, elapsed  # within the cancel budget
    assert kube_api.objects("trainjobs") == []  # stored ~2 s after the cancel, then found by its labels and deleted
    assert any(r.verb == "delete" for r in kube_api.requests)
    assert "cancelled (SIGTERM): applying cleanup_policy=delete within 5 s" in "\n".join(lines)


# -- secrets under ordinary names in training_env_vars ---------------------------------------------------------------
@pytest.mark.parametrize(
    "name, value",
    [
        ("MY_TOKEN_FOR_DOWNLOADS", "hf_" + "AbCdEfGhIjKlMnOpQrStUv12"),
        ("DATABASE_URL", "postgresql://app:S3cretPassw0rd@db.example:5432/metrics"),
        ("STORAGE", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Zm9vYmFyYmF6cXV4==;EndpointSuffix=x"),
        ("UPSTREAM_HEADER", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwaXBlbGluZSJ9.c2lnbmF0dXJlLXZhbHVl"),
        ("GIT_CREDENTIAL", "ghp_" + "Zz9" * 12),
    ],
)
def test_a_secret_value_under_an_ordinary_name_in_training_env_vars_is_refused_before_any_job(
    name, value, tiny_model_dir, demo_dataset_path, tmp_path, kube_api
):
    from components.training.finetuning.contract import TrainingConfigError
    from components.training.finetuning.run import run_train_model
    from components.training.finetuning.tests.test_training_component import _artifacts
    from tests.harness.requests import train_model_request

    dataset, out = _artifacts(tmp_path, demo_dataset_path)
    with pytest.raises(TrainingConfigError) as refused:
        run_train_model(
            train_model_request(
                dataset=dataset,
                training_base_model=str(tiny_model_dir),
                training_launcher="trainjob",
                pvc_path=str(tmp_path / "ws"),
                training_namespace=NS,
                training_env_vars={"INSTRUCTLAB_NCCL_TIMEOUT_MS": "600000", name: value},
            ),
            **out,
            api_client=kube_api.api_client,
        )
    message = str(refused.value)
    assert "\n" not in message and f"training_env_vars[{name!r}]: the value looks like a secret" in message
    assert "hf_token_secret_name, s3_secret_name" in message and value not in message
    assert kube_api.requests == [] and kube_api.objects("trainjobs") == []
