"""What the cluster tests share: a poll-mode run on a fake clock and its script, job kinds, a proxied client."""

import dataclasses
import json
import re
from collections.abc import Callable

from components._common.kube_auth import load_api_client
from components.training.finetuning.manifests.spec import SecretEnvVar
from tests.harness.kube import UPSTREAM_2_3, condition, crd_schema, make_pod, make_pytorchjob_pod
from tests.harness.requests import job_spec, run_job

NS = "team-a"
RUN_ID = "4f6c3a2e-9b1d-4c8e-a2f0-1d2e3f4a5b6c"
IMAGE = "quay.io/example/trainer:1"
WORKSPACE_VOLUME = {"name": "kfp-workspace", "persistentVolumeClaim": {"claimName": "run-ws"}}
WORKSPACE_MOUNT = {"name": "kfp-workspace", "mountPath": "/kfp-workspace"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
HF_TOKEN = SecretEnvVar("HF_TOKEN", "hf-token", "token")


def spec(workspace=False, **overrides):
    """The ``JobSpec`` of task ``train-model`` of run :data:`RUN_ID` in :data:`NS` running ``python -m train``."""
    fields = dict(run_id=RUN_ID, task_name="train-model", namespace=NS, command=["python", "-m", "train"])
    if workspace:
        fields.update(volumes=[WORKSPACE_VOLUME], volume_mounts=[WORKSPACE_MOUNT])
    return job_spec(**{**fields, **overrides})


def poll(kube_api, manifest, clock, log, **overrides):
    """Runs ``manifest`` in poll mode on ``clock``: start timeout 300 s, total 3600 s, one request per 10 s."""
    options = dict(start_timeout_seconds=300, timeout_seconds=3600, poll_interval_seconds=10, use_watch=False)
    options |= dict(clock=clock, sleep=clock.sleep, log=log)
    return run_job(kube_api.api_client, manifest, **{**options, **overrides})


def assert_untouched(kube_api, plural, manifest):
    """The job is there as created; no request of this run wrote to it (or created anything else) after the create."""
    (job,) = kube_api.objects(plural)
    assert job["spec"] == manifest["spec"] and job["metadata"]["labels"] == manifest["metadata"]["labels"]
    writes = [r for r in kube_api.requests if r.verb in ("delete", "patch", "create")]
    assert [r for r in writes if (r.verb, r.plural) != ("create", plural)] == [], kube_api.requests_summary()


def at(steps):
    """A fake-clock script: at each time (seconds) apply the cluster action once, in order."""
    done = set()

    def script(now):
        for index, (when, action) in enumerate(steps):
            if now >= when and index not in done:
                done.add(index)
                action()

    return script


def proxied_client(proxy):
    """A client built the way the component builds it (``load_api_client``), pointed at the proxy."""
    environ = {"KUBERNETES_SERVER_URL": proxy.url, "KUBERNETES_AUTH_TOKEN": "sha256~test-token"}
    return load_api_client(environ=environ, log=lambda line: None)


def upstream(kube_api):
    """``(host, port)`` of kmock's API, for the proxy to forward to."""
    host, port = kube_api.url.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)


@dataclasses.dataclass(frozen=True)
class Kind:
    """One job kind as the tests drive it (written out independently of ``job_kinds.JobKind``)."""

    name: str
    manifest: dict
    plural: str
    group_version: tuple
    container: str
    pod_factory: Callable
    complete_type: str
    suspend_path: tuple
    generation: str = UPSTREAM_2_3
    runtime_requests: tuple = ()

    @property
    def namespace(self):
        return self.manifest["metadata"]["namespace"]

    def pod(self, index=0, **state):
        return self.pod_factory(self.namespace, self.manifest["metadata"]["name"], index, **state)

    @property
    def pod_name(self):
        return self.pod()["metadata"]["name"]

    def set_status(self, kube_api, status):
        setter = kube_api.set_trainjob_status if self.plural == "trainjobs" else kube_api.set_pytorchjob_status
        return setter(self.namespace, self.manifest["metadata"]["name"], status)

    def complete(self, kube_api):
        return self.set_status(kube_api, {"conditions": [condition(self.complete_type)]})

    def create(self, kube_api, manifest):
        create = kube_api.create_trainjob if self.plural == "trainjobs" else kube_api.create_pytorchjob
        return create(manifest)

    def patch(self, kube_api, body):
        """Merge-patches the job as a user or controller would (not as the step under test)."""
        group, version = self.group_version
        name = self.manifest["metadata"]["name"]
        kube_api.custom.patch_namespaced_custom_object(group, version, self.namespace, self.plural, name, body)

    def suspend_body(self, value):
        body = value
        for key in reversed(self.suspend_path):
            body = {key: body}
        return {"spec": body}

    def suspended_manifest(self):
        manifest = json.loads(json.dumps(self.manifest))
        node = manifest["spec"]
        for key in self.suspend_path[:-1]:
            node = node.setdefault(key, {})
        node[self.suspend_path[-1]] = True
        return manifest

    def suspend_value(self, job):
        node = job["spec"]
        for key in self.suspend_path:
            node = node.get(key, {})
        return node


def trainjob_kind(manifest, generation=UPSTREAM_2_3, runtime_requests=("get clustertrainingruntimes training-hub",)):
    """The :class:`Kind` of a TrainJob ``manifest`` on the API ``generation``."""
    group_version = ("trainer.kubeflow.org", "v1alpha1")
    return Kind("trainjob", manifest, "trainjobs", group_version, "node", make_pod, "Complete", ("suspend",),
                generation, runtime_requests)  # fmt: skip


def pytorchjob_kind(manifest):
    """The :class:`Kind` of a PyTorchJob ``manifest``."""
    suspend = ("runPolicy", "suspend")
    return Kind("pytorchjob", manifest, "pytorchjobs", ("kubeflow.org", "v1"), "pytorch", make_pytorchjob_pod,
                "Succeeded", suspend)  # fmt: skip


def workspace_task_config(workspace, **more):
    """The ``dsl.TaskConfig`` of a pipeline with a workspace: its PVC ``run-ws`` mounted at ``workspace``."""
    from kfp import dsl

    volume = {"name": "workspace", "persistentVolumeClaim": {"claimName": "run-ws"}}
    return dsl.TaskConfig(volumes=[volume], volume_mounts=[{"name": "workspace", "mountPath": str(workspace)}], **more)


def validate_pytorchjob(manifest):
    """Validates against the Training Operator's CRD with every object closed, as TrainJobs are validated."""
    import jsonschema

    assert manifest["apiVersion"] == "kubeflow.org/v1" and manifest["kind"] == "PyTorchJob", manifest
    name = manifest["metadata"]["name"]
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 63, name
    jsonschema.Draft7Validator(crd_schema("kubeflow.org_pytorchjobs.yaml")).validate(manifest)
