"""The job does not need its launcher; the run owns it; a full or unwritable output disk ends the step in one line.

The full disk is a real 1 MiB tmpfs where mounting is permitted, else ``ENOSPC`` raised by ``shutil.copy2``.
"""

import contextlib
import errno
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from kfp import dsl

from components.training.finetuning.cluster.errors import JobApiError
from components.training.finetuning.cluster.launcher_pod import read_launcher_pod
from components.training.finetuning.cluster.state import cancel_budget
from components.training.finetuning.contract import encode_run_config
from components.training.finetuning.job_from_request import build_job_manifest
from components.training.finetuning.launch import clear_previous_run
from components.training.finetuning.manifests.api_generations import RUNTIME_PATCHES, TrainJobApi
from components.training.finetuning.manifests.names import job_name
from components.training.finetuning.manifests.pytorchjob import build_pytorchjob
from components.training.finetuning.manifests.spec import JobSpecError, OwnerReference
from components.training.finetuning.manifests.trainjob import build_trainjob
from components.training.finetuning.plan import LauncherRun, RunPlan
from components.training.finetuning.publish import PublishError, publish_outputs
from components.training.finetuning.run import run_train_model
from components.training.finetuning.tests.cluster_doubles import workspace_task_config
from tests.harness.follow_doubles import Log
from tests.harness.kube import condition, validate_trainjob
from tests.harness.requests import dataset_metadata, job_spec, pod_run_config, train_model_request
from tests.harness.tcp_proxy import tcp_proxy

NS = "team-a"
RUN_ID = "run-reattach"
TASK = "train-model"
NAME = job_name(RUN_ID, TASK)
UPSTREAM_API = TrainJobApi(RUNTIME_PATCHES, active_deadline=True, trainer_status=True)
WORKFLOW = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Workflow",
    "name": "my-pipeline-x7k2p",
    "uid": "0b5c9d1e-8a2f-4c3b-9d7e-6f5a4b3c2d1e",
    "controller": True,
    "blockOwnerDeletion": True,
}


def _digest(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _first_attempts_files(run_dir: Path, tiny_model_dir: Path) -> Path:
    """What the first attempt's job wrote so far: a checkpoint and the metrics (OSFT's layout)."""
    checkpoints = run_dir / "checkpoints"
    shutil.copytree(tiny_model_dir, checkpoints / "hf_format" / "samples_64")
    records = [{"step": step, "loss": 2.0 / step, "epoch": 0.25 * step, "time": 3.0 * step} for step in (1, 2, 3, 4)]
    (checkpoints / "training_metrics_0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return checkpoints


# -- a second launcher with training_resume=False while the job lives ----------------------------------------------
def test_second_launcher_with_resume_false_reattaches_and_keeps_the_live_jobs_files(
    kube_api, tiny_model_dir, demo_dataset_path, tmp_path
):
    kube_api.create_runtime("training-hub")
    workspace = tmp_path / "kfp-workspace"
    run_dir = workspace / "train_model" / NAME
    checkpoints = _first_attempts_files(run_dir, tiny_model_dir)
    before = _digest(checkpoints)
    run_config = pod_run_config("osft", base_model=str(tiny_model_dir), ckpt_output_dir=str(checkpoints))
    (run_dir / "run_config.json").write_text(encode_run_config(run_config))  # staged by the first attempt
    staged = _digest(run_dir)  # everything under the live job's run directory
    data = tmp_path / "in" / "train"
    data.parent.mkdir(parents=True)
    shutil.copyfile(demo_dataset_path, data)
    outputs = {n: c(uri=str(tmp_path / "out" / n)) for n, c in (("model", dsl.Model), ("metrics", dsl.Metrics))}
    outputs["report"] = dsl.HTML(uri=str(tmp_path / "out" / "report"))
    request = train_model_request(
        dataset=dsl.Dataset(uri=str(data), metadata=dataset_metadata("hf://org/demo")),
        task_config=workspace_task_config(workspace),
        training_base_model=str(tiny_model_dir),
        training_algorithm="osft",
        training_launcher="trainjob",
        training_resume=False,
        training_namespace=NS,
        pvc_path=str(workspace),
        run_id=RUN_ID,
        task_name=TASK,
    )
    # The first launcher's job, still running: the one this request builds (a retried task builds the same).
    first = build_job_manifest(
        "trainjob", run_dir / "run_config.json", request.task_config, RUN_ID, TASK, request, None, UPSTREAM_API
    )
    kube_api.create_trainjob(first)
    ready = [{"name": "node", "ready": 1, "active": 1, "failed": 0, "succeeded": 0, "suspended": 0}]
    kube_api.set_trainjob_status(NS, NAME, {"jobsStatus": ready})

    def the_job_finishes():
        kube_api.wait_for(lambda: [r for r in kube_api.requests if r.verb == "create" and r.plural == "trainjobs"])
        kube_api.set_trainjob_status(NS, NAME, {"conditions": [condition("Complete")]})

    log = Log()
    with kube_api.in_background(the_job_finishes):
        outcome = run_train_model(
            request,
            **outputs,
            api_client=kube_api.api_client,
            log=log,
            job_options={"poll_interval_seconds": 0.1},
        )
    text = log.text()
    assert f"training_resume=False: the TrainJob {NS}/{NAME} of this run/task still exists" in text
    assert "re-attached to the existing TrainJob of this run/task" in text
    assert {k: v for k, v in _digest(checkpoints).items() if k in before} == before  # nothing lost or changed
    assert _digest(run_dir) == staged  # nothing staged under the live job (no code/, data/, run_config.json)
    assert f"re-attaching without staging anything in {run_dir}" in text
    (job,) = kube_api.objects("trainjobs")
    assert job["spec"] == first["spec"]  # the live job untouched: no second job, no patch, no delete
    assert not [r for r in kube_api.requests if r.verb in ("delete", "patch")]
    assert outcome.summary["steps"] == 4.0 and Path(outcome.model_dir, "config.json").is_file()


def _plan(tmp_path, launcher="trainjob", copy_to_artifact=False):
    request = train_model_request(
        training_base_model="org/model",
        training_resume=False,
        training_launcher=launcher,
        training_namespace=NS,
        training_copy_model_to_artifact=copy_to_artifact,
    )
    return RunPlan(
        request=request,
        config=request.training,
        data_file=tmp_path / "train.jsonl",
        eval_file=None,
        task_config=None,
        run_id=RUN_ID,
        task_name=TASK,
        workspace=tmp_path / "ws",
    )


@pytest.mark.parametrize("present", ["none", "another-run", "being-deleted"])
def test_resume_false_clears_old_files_when_no_live_job_of_this_run_task_exists(kube_api, tmp_path, present):
    plan = _plan(tmp_path)
    (plan.run_dir / "checkpoints").mkdir(parents=True)
    (plan.run_dir / "checkpoints" / "stale.bin").write_bytes(b"old")
    spec = job_spec(run_id=RUN_ID if present != "another-run" else "other", task_name=TASK, namespace=NS, command=["x"])
    manifest = build_trainjob(spec)
    manifest["metadata"]["name"] = NAME
    if present == "being-deleted":
        manifest["metadata"]["finalizers"] = ["example.com/hold"]
    if present != "none":
        kube_api.create_trainjob(manifest)
    if present == "being-deleted":
        kube_api.custom.delete_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", NS, "trainjobs", NAME)
    clear_previous_run(plan, kube_api.api_client, Log())
    assert not plan.run_dir.exists()


def test_resume_false_deletes_nothing_when_the_api_cannot_say(tmp_path):
    plan = _plan(tmp_path, launcher="auto")
    (plan.run_dir / "checkpoints").mkdir(parents=True)
    (plan.run_dir / "checkpoints" / "model.bin").write_bytes(b"precious")
    from components._common.kube_auth import load_api_client

    with tcp_proxy(mode="status", status=403) as proxy:
        client = load_api_client(environ={"KUBERNETES_SERVER_URL": proxy.url, "KUBERNETES_AUTH_TOKEN": "t"}, log=Log())
        with pytest.raises(JobApiError, match=r"HTTP 403.*; nothing was deleted"):
            clear_previous_run(plan, client, Log())
    assert (plan.run_dir / "checkpoints" / "model.bin").read_bytes() == b"precious"


# -- the job owned by the run: the launcher pod's owner, same namespace only ---------------------------------------
def _launcher_pod(kube_api, namespace=NS, owners=(WORKFLOW,), grace=45):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "my-pipeline-x7k2p-system-container-impl-123", "namespace": namespace},
        "spec": {"containers": [{"name": "main", "image": "x"}], "terminationGracePeriodSeconds": grace},
    }
    if owners:
        pod["metadata"]["ownerReferences"] = list(owners)
    created = kube_api.core.create_namespaced_pod(namespace, pod)
    return pod["metadata"]["name"], created.metadata.uid


def _environ(name, uid="", namespace=NS):
    return {"KFP_POD_NAME": name, "KFP_POD_UID": uid, "POD_NAMESPACE": namespace}


def test_the_job_is_owned_by_the_runs_workflow_never_blocking_its_deletion(kube_api):
    name, uid = _launcher_pod(kube_api)
    log = Log()
    found = read_launcher_pod(kube_api.api_client, NS, environ=_environ(name, uid), log=log)
    assert found.owner == OwnerReference("argoproj.io/v1alpha1", "Workflow", WORKFLOW["name"], WORKFLOW["uid"], NS)
    assert found.grace_seconds == 45 and cancel_budget(found.grace_seconds) == 40 and cancel_budget(None) == 25
    assert log == [
        f"ownerReference: Workflow {NS}/{WORKFLOW['name']} (the launcher pod's owner): deleting the run deletes the job"
    ]
    for build in (build_trainjob, build_pytorchjob):
        manifest = build(
            job_spec(run_id=RUN_ID, task_name=TASK, namespace=NS, command=["x"], image="i", owner=found.owner)
        )
        (reference,) = manifest["metadata"]["ownerReferences"]
        assert reference == {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Workflow",
            "name": WORKFLOW["name"],
            "uid": WORKFLOW["uid"],
            "controller": False,
            "blockOwnerDeletion": False,
        }
    validate_trainjob(
        build_trainjob(job_spec(run_id=RUN_ID, task_name=TASK, namespace=NS, command=["x"], owner=found.owner))
    )
    assert [r.verb for r in kube_api.requests] == ["get"]  # one read of the launcher's own pod


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("other-namespace", "never across namespaces"),
        ("no-owner", "has no controller owner; the pod itself is never the owner"),
        ("non-controller-owner", "Workflow my-pipeline-x7k2p is not its controller and is never given to the job"),
        ("uid-mismatch", "has uid"),
        ("forbidden", "HTTP 403"),
        ("not-kfp", "not in a KFP pod"),
    ],
)
def test_no_owner_reference_when_it_would_not_be_safe(kube_api, case, why):
    owners = {"no-owner": (), "non-controller-owner": ({**WORKFLOW, "controller": False},)}.get(case, (WORKFLOW,))
    name, uid = _launcher_pod(kube_api, owners=owners)
    environ = _environ(name, uid)
    if case == "other-namespace":
        environ["POD_NAMESPACE"] = "pipelines"
    if case == "uid-mismatch":
        environ["KFP_POD_UID"] = "11111111-2222-3333-4444-555555555555"
    if case == "forbidden":
        kube_api.fail("fetch", "pods", status=403)
    if case == "not-kfp":
        environ = {"POD_NAMESPACE": NS}
    log = Log()
    found = read_launcher_pod(kube_api.api_client, NS, environ=environ, log=log)
    assert found.owner is None and why in found.why and log == [f"ownerReference: {found.why}"]


def test_a_job_spec_refuses_an_owner_in_another_namespace():
    owner = OwnerReference("argoproj.io/v1alpha1", "Workflow", "wf", WORKFLOW["uid"], "pipelines")
    with pytest.raises(JobSpecError, match="owner.*across namespaces the garbage collector would delete the job"):
        job_spec(run_id=RUN_ID, task_name=TASK, namespace=NS, command=["x"], owner=owner)


# -- a full or read-only output disk ---------------------------------------------------------------------------------
@contextlib.contextmanager
def _tiny_disk(path: Path, size: str = "1m", read_only: bool = False):
    """A tmpfs of ``size`` mounted at ``path`` (``None`` when this process may not mount)."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        yield None
        return
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _publish(tmp_path, final_dir, out_dir):
    """Publishes with the opt-in copy into the artifact (the path that writes the model's size to the output)."""
    plan = _plan(tmp_path, copy_to_artifact=True)
    trained = LauncherRun(final_dir, [{"step": 1, "loss": 1.0, "time": 1.0}], 1.0, NAME, launcher="trainjob")
    outputs = {
        n: c(uri=str(out_dir / n)) for n, c in (("model", dsl.Model), ("metrics", dsl.Metrics), ("report", dsl.HTML))
    }
    return publish_outputs(plan, trained, outputs["model"], outputs["metrics"], outputs["report"], {}, None)


@pytest.mark.parametrize("shape", ["one-big-file", "many-small-files"])
def test_a_full_disk_while_publishing_is_one_line_and_leaves_nothing_half_written(tmp_path, monkeypatch, shape):
    final_dir = tmp_path / "checkpoint"
    final_dir.mkdir()
    (final_dir / "config.json").write_text("{}")
    if shape == "one-big-file":  # more than the disk holds: refused before writing anything
        (final_dir / "model.safetensors").write_bytes(b"\0" * 3 * 2**20)
    else:  # 900 KiB of 3000-byte files: fits by size, but each takes a 4 KiB page: ENOSPC mid-copy
        for index in range(300):
            (final_dir / f"shard-{index:03d}.bin").write_bytes(b"\1" * 3000)
    before = _digest(final_dir)
    with _tiny_disk(tmp_path / "out") as disk:
        if disk is None:  # not permitted to mount: ENOSPC at the file-system boundary instead
            real_copy = shutil.copy2
            copied = []

            def copy_until_full(src, dst, **kwargs):
                copied.append(src)
                if len(copied) > 3:
                    raise OSError(errno.ENOSPC, "No space left on device", str(dst))
                return real_copy(src, dst, **kwargs)

            monkeypatch.setattr(shutil, "copy2", copy_until_full)
        with pytest.raises(PublishError) as error:
            _publish(tmp_path, final_dir, tmp_path / "out")
        message = str(error.value)
        left = sorted(path.name for path in (tmp_path / "out").iterdir())
    assert "\n" not in message and message.startswith(
        f"train_model: cannot write the model to {tmp_path / 'out' / 'model'}: "
    )
    assert "MiB free there" in message and "nothing half-written was left" in message
    assert ("not enough space" in message) if shape == "one-big-file" else ("No space left on device" in message)
    assert left == []  # no model directory, no temporary staging directory, no report
    assert _digest(final_dir) == before  # the checkpoint itself intact


def test_a_read_only_output_is_one_line(tmp_path):
    final_dir = tmp_path / "checkpoint"
    final_dir.mkdir()
    (final_dir / "config.json").write_text("{}")
    with _tiny_disk(tmp_path / "out", read_only=True) as disk:
        if disk is None:
            pytest.skip("mounting a read-only tmpfs is not permitted here (the full-disk test injects ENOSPC)")
        with pytest.raises(PublishError, match=r"cannot write the model to .*/out/model: .*Read-only file system"):
            _publish(tmp_path, final_dir, tmp_path / "out")


# -- SIGTERM: a cancelled run, or a disrupted launcher pod? ---------------------------------------------------------
@pytest.mark.parametrize("disrupted", [True, False], ids=["evicted-launcher", "cancelled-run"])
def test_sigterm_to_an_evicted_launcher_leaves_the_job_but_a_cancelled_run_deletes_it(kube_api, disrupted):
    import os
    import signal
    import time

    from components.training.finetuning.cluster.errors import JobCancelled, LauncherDisrupted
    from tests.harness.kube import make_pytorchjob_pod
    from tests.harness.requests import run_job

    manifest = build_pytorchjob(job_spec(run_id=RUN_ID, task_name=TASK, namespace=NS, command=["x"], image="i"))
    kube_api.put_pod(make_pytorchjob_pod(NS, NAME))
    launcher, _ = _launcher_pod(kube_api)
    if disrupted:  # what the eviction API (a node drain) writes before the kubelet sends SIGTERM
        target = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI", "message": "drain"}
        kube_api.core.patch_namespaced_pod_status(launcher, NS, {"status": {"conditions": [target]}})

    def sigterm():
        kube_api.wait_for(lambda: [r for r in kube_api.requests if r.verb == "watch"])
        time.sleep(0.1)
        if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN, None):
            os.kill(os.getpid(), signal.SIGTERM)

    log = Log()
    expected = LauncherDisrupted if disrupted else JobCancelled
    with kube_api.in_background(sigterm), pytest.raises(expected) as error:
        run_job(
            kube_api.api_client,
            manifest,
            start_timeout_seconds=60,
            timeout_seconds=60,
            poll_interval_seconds=0.3,
            launcher_pod=(NS, launcher),
            log=log,
        )
    if disrupted:
        assert "(DisruptionTarget: EvictionByEvictionAPI), not because the run was cancelled" in str(error.value)
        assert f"`kubectl get pytorchjob {NAME} -n {NS}`" in str(error.value)
        (job,) = kube_api.objects("pytorchjobs")
        assert job["spec"] == manifest["spec"]
        assert not [r for r in kube_api.requests if r.verb in ("delete", "patch")]
    else:
        assert kube_api.objects("pytorchjobs") == []
