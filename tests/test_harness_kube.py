"""The Kubernetes emulator harness behaves like the API server where the project's client relies on it."""

import json
import time

import pytest
from kubernetes import client, watch

from tests.harness.kube import ODH_3_3, UPSTREAM_2_3, condition, crd_schema, make_pod, validate_trainjob

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"


def _job(name, labels=None):
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "team", "labels": labels or {}},
        "spec": {"runtimeRef": {"name": "training-hub"}},
    }


def _watch(api, **options):
    return watch.Watch().stream(api.list_namespaced_custom_object, GROUP, VERSION, "team", "trainjobs", **options)


def test_operator_helpers_are_not_counted_and_selectors_filter(kube_api):
    kube_api.put_pod(make_pod("team", "job-a"))
    kube_api.put_pod(make_pod("team", "job-b"))
    kube_api.put_pod(make_pod("team", "job-a", phase="Failed", terminated=("OOMKilled", 137, "")))
    core = client.CoreV1Api(kube_api.api_client)
    pods = core.list_namespaced_pod("team", label_selector="jobset.sigs.k8s.io/jobset-name=job-a").items
    assert [p.metadata.name for p in pods] == ["job-a-node-0-0-abcde"]
    assert pods[0].status.container_statuses[0].state.terminated.reason == "OOMKilled"
    kube_api.add_event("team", "Pod", "job-a-node-0-0-abcde", "FailedMount", 'secret "hf" not found')
    kube_api.add_event("team", "Pod", "other", "Pulled", "ok", type_="Normal")
    events = core.list_namespaced_event("team", field_selector="involvedObject.name=job-a-node-0-0-abcde").items
    assert [e.reason for e in events] == ["FailedMount"]
    assert kube_api.requests_summary() == ["list pods", "list events"]


def test_pod_logs_tail_and_missing(kube_api):
    kube_api.put_pod(make_pod("team", "job-a"))
    core = client.CoreV1Api(kube_api.api_client)
    kube_api.set_pod_log("team", "job-a-node-0-0-abcde", "one\ntwo\nthree\n", container="node")
    assert (
        core.read_namespaced_pod_log("job-a-node-0-0-abcde", "team", container="node", tail_lines=2) == "two\nthree\n"
    )
    with pytest.raises(client.ApiException) as missing:
        core.read_namespaced_pod_log("job-a-node-0-0-abcde", "team", container="node", previous=True)
    assert missing.value.status == 400
    assert kube_api.requests[-1].rbac_resource == "pods/log" and kube_api.requests[-1].verb == "get"


def test_watch_sees_operator_changes_and_honours_timeout(kube_api):
    kube_api.create_trainjob(_job("a"))
    kube_api.create_trainjob(_job("b"))
    api = client.CustomObjectsApi(kube_api.api_client)
    seen = []

    def operator():
        kube_api.wait_for(lambda: seen)  # the watch is streaming
        time.sleep(0.05)
        kube_api.set_trainjob_status("team", "a", {"conditions": [condition("Complete")]})

    with kube_api.in_background(operator):
        for event in _watch(api, field_selector="metadata.name=a", timeout_seconds=5):
            seen.append((event["type"], event["object"]["metadata"]["name"]))
            if event["object"].get("status"):
                break
    assert seen == [("ADDED", "a"), ("MODIFIED", "a")]
    # Server-side timeoutSeconds ends an idle watch.
    events = list(_watch(api, field_selector="metadata.name=b", timeout_seconds=1))
    assert [e["type"] for e in events] == ["ADDED"]


def test_dropped_watch_ends_the_stream(kube_api):
    kube_api.create_trainjob(_job("a"))
    kube_api.end_watch_after("trainjobs", events=2)
    api = client.CustomObjectsApi(kube_api.api_client)
    events = list(_watch(api, timeout_seconds=30))
    assert [e["type"] for e in events] == ["MODIFIED", "MODIFIED"]


def test_validate_trainjob_closes_objects():
    import jsonschema

    good = _job("a")
    validate_trainjob(good)
    bad = _job("a")
    bad["spec"]["trainer"] = {"numProcPerNode": 2, "unknownField": 1}
    with pytest.raises(jsonschema.ValidationError, match="unknownField"):
        validate_trainjob(bad)
    bad["spec"]["trainer"] = {"numProcPerNode": "auto"}
    with pytest.raises(jsonschema.ValidationError):
        validate_trainjob(bad)
    with pytest.raises(AssertionError):
        validate_trainjob(_job("Not_DNS"))


def test_access_reviews_cluster_scoped_objects_and_served_resources(kube_api):
    from tests.harness.kube import make_node

    kube_api.deny("trainer.kubeflow.org", "trainjobs", "create")
    kube_api.deny("", "pods/log", "get")
    auth = client.AuthorizationV1Api(kube_api.api_client)

    def allowed(group, resource, verb, subresource=None):
        attributes = client.V1ResourceAttributes(
            namespace="team", group=group, resource=resource, verb=verb, subresource=subresource
        )
        review = client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes)
        )
        return auth.create_self_subject_access_review(review).status.allowed

    assert allowed("trainer.kubeflow.org", "trainjobs", "create") is False
    assert allowed("trainer.kubeflow.org", "trainjobs", "get") is True
    assert allowed("trainer.kubeflow.org", "trainjobs", "get") is True  # reviews are not stored: no 409
    assert allowed("", "pods", "get", subresource="log") is False
    kube_api.create_storage_class("nfs-csi", "nfs.csi.k8s.io")
    assert client.StorageV1Api(kube_api.api_client).read_storage_class("nfs-csi").provisioner == "nfs.csi.k8s.io"
    kube_api.put_node(make_node("gpu-1", 2, taints=({"key": "nvidia.com/gpu", "effect": "NoSchedule"},)))
    kube_api.put_node(make_node("cpu-1"))
    core = client.CoreV1Api(kube_api.api_client)
    gpu_nodes = core.list_node(label_selector="nvidia.com/gpu.present=true").items
    assert [n.metadata.name for n in gpu_nodes] == ["gpu-1"] and gpu_nodes[0].status.allocatable[
        "nvidia.com/gpu"
    ] == "2"
    kube_api.create_quota("team", "q", {"requests.storage": "100Gi"}, {"requests.storage": "60Gi"})
    assert core.list_namespaced_resource_quota("team").items[0].status.used == {"requests.storage": "60Gi"}
    kube_api.create_secret("team", "s3-secret", {"AWS_ACCESS_KEY_ID": "x"})
    assert core.read_namespaced_secret("s3-secret", "team").data == {"AWS_ACCESS_KEY_ID": "eA=="}
    custom = client.CustomObjectsApi(kube_api.api_client)
    listing = custom.get_api_resources(GROUP, VERSION, _preload_content=False)
    assert "trainjobs" in listing.data.decode()
    kube_api.unserve(f"{GROUP}/{VERSION}/trainjobs")
    listing = custom.get_api_resources(GROUP, VERSION, _preload_content=False)
    assert "trainjobs" not in listing.data.decode()


# -- like a real API server: structural pruning, Strict field validation, OpenAPI v3 discovery ------------------------
def _runtime_patches_job(name):
    job = _job(name)
    job["spec"]["runtimePatches"] = [{"manager": "m", "trainingRuntimeSpec": {"template": {"spec": {}}}}]
    job["spec"]["activeDeadlineSeconds"] = 60
    return job


@pytest.mark.parametrize("kube_api", [ODH_3_3], indirect=True)
def test_unknown_fields_are_pruned_with_a_warning_by_default(kube_api):
    """fieldValidation unset (Warn, the default since 1.23): 2xx, stored pruned, one Warning header per field."""
    body = _runtime_patches_job("a")
    _, status, headers = kube_api.api_client.call_api(
        f"/apis/{GROUP}/{VERSION}/namespaces/team/trainjobs",
        "POST",
        body=body,
        header_params={"Content-Type": "application/json"},
        _preload_content=False,
    )
    assert status // 100 == 2
    assert headers.getlist("Warning") == [
        '299 - "unknown field \\"spec.runtimePatches\\""',
        '299 - "unknown field \\"spec.activeDeadlineSeconds\\""',
    ]
    (stored,) = kube_api.objects("trainjobs")
    assert stored["spec"] == {"runtimeRef": {"name": "training-hub"}}
    assert kube_api.requests[0].body == body  # what the client sent, before pruning


@pytest.mark.parametrize("kube_api", [ODH_3_3], indirect=True)
def test_unknown_fields_are_refused_by_name_under_strict(kube_api):
    api = client.CustomObjectsApi(kube_api.api_client)
    with pytest.raises(client.ApiException) as refused:
        api.create_namespaced_custom_object(
            GROUP, VERSION, "team", "trainjobs", _runtime_patches_job("a"), field_validation="Strict"
        )
    assert refused.value.status == 400
    assert json.loads(refused.value.body)["message"] == (
        'TrainJob in version "v1alpha1" cannot be handled as a TrainJob: strict decoding error: '
        'unknown field "spec.runtimePatches", unknown field "spec.activeDeadlineSeconds"'
    )
    assert kube_api.objects("trainjobs") == []
    api.create_namespaced_custom_object(GROUP, VERSION, "team", "trainjobs", _job("a"), field_validation="Strict")
    with pytest.raises(client.ApiException, match=r'unknown field \\"spec.podTemplateOverrides\[0\].bogus\\"'):
        api.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            "team",
            "trainjobs",
            "a",
            {"spec": {"podTemplateOverrides": [{"targetJobs": [{"name": "node"}], "bogus": 1}]}},
            field_validation="Strict",
        )


def test_upstream_2_3_keeps_what_rhoai_3_3_prunes(kube_api):
    api = client.CustomObjectsApi(kube_api.api_client)
    api.create_namespaced_custom_object(
        GROUP, VERSION, "team", "trainjobs", _runtime_patches_job("a"), field_validation="Strict"
    )
    (stored,) = kube_api.objects("trainjobs")
    assert stored["spec"]["activeDeadlineSeconds"] == 60 and stored["spec"]["runtimePatches"][0]["manager"] == "m"
    kube_api.set_trainjob_status("team", "a", {"trainerStatus": {"progressPercentage": 5}, "bogus": 1})
    (stored,) = kube_api.objects("trainjobs")
    assert stored["status"] == {"trainerStatus": {"progressPercentage": 5}}  # pruned there too


@pytest.mark.parametrize("kube_api", [UPSTREAM_2_3, ODH_3_3], indirect=True)
def test_openapi_v3_discovery_publishes_the_served_generation(kube_api):
    path = f"/openapi/v3/apis/{GROUP}/{VERSION}"
    index = json.loads(kube_api.api_client.call_api("/openapi/v3", "GET", _preload_content=False)[0].data)
    assert index["paths"] == {f"apis/{GROUP}/{VERSION}": {"serverRelativeURL": path}}
    document = json.loads(kube_api.api_client.call_api(path, "GET", _preload_content=False)[0].data)
    schema = document["components"]["schemas"]["io.kubeflow.trainer.v1alpha1.TrainJob"]
    assert schema["x-kubernetes-group-version-kind"] == [{"group": GROUP, "kind": "TrainJob", "version": VERSION}]
    expected = "runtimePatches" if kube_api.generation == UPSTREAM_2_3 else "podTemplateOverrides"
    assert expected in schema["properties"]["spec"]["properties"]
    kube_api.openapi_v3(403)
    with pytest.raises(client.ApiException) as refused:
        kube_api.api_client.call_api(path, "GET", _preload_content=False)
    assert refused.value.status == 403
    kube_api.openapi_v3(0)
    kube_api.unserve(f"{GROUP}/{VERSION}/trainjobs")
    with pytest.raises(client.ApiException) as missing:
        kube_api.api_client.call_api(path, "GET", _preload_content=False)
    assert missing.value.status == 404


def test_validate_trainjob_checks_the_named_generation():
    import jsonschema

    job = _runtime_patches_job("a")
    validate_trainjob(job, UPSTREAM_2_3)
    with pytest.raises(jsonschema.ValidationError, match="runtimePatches"):
        validate_trainjob(job, ODH_3_3)


def test_the_rhoai_runtimes_and_the_harness_runtime_fit_rhoai_3_3s_runtime_crd(kube_api):
    """The vendored RHOAI runtimes (3.3, 3.5) and what ``create_runtime`` writes are valid ClusterTrainingRuntimes."""
    import jsonschema

    validator = jsonschema.Draft7Validator(crd_schema("odh-3.3/trainer.kubeflow.org_clustertrainingruntimes.yaml"))
    for release in ("odh-3.3", "odh-3.5.0"):
        kube_api.create_rhoai_runtime(release)
        (runtime,) = kube_api.objects("clustertrainingruntimes")
        validator.validate(runtime)
        kube_api.custom.delete_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes", "training-hub")
    kube_api.create_runtime("training-hub")
    (runtime,) = kube_api.objects("clustertrainingruntimes")
    validator.validate(runtime)
