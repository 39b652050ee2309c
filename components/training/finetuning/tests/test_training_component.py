"""The ``train_model`` component: in-process, through ``kfp.local``, and the TrainJob path against kmock."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kfp import dsl

from components._common.model_location import MANIFEST_FILE, resolve_model_dir
from components.training.finetuning import train_model
from components.training.finetuning.contract import TrainingConfigError
from components.training.finetuning.run import run_train_model
from components.training.finetuning.tests.cluster_doubles import validate_pytorchjob, workspace_task_config
from components.training.finetuning.tests.training_hub_keywords import assert_lands_in_training_hub
from tests.harness.kube import condition, validate_trainjob
from tests.harness.requests import dataset_metadata, train_model_request

pytestmark = pytest.mark.slow

FAST = {
    "effective_batch_size": 16,
    "learning_rate": 3e-3,
    "max_seq_len": 256,
    "max_tokens_per_gpu": 1024,
    "max_steps": 4,
}
NS = "team-a"
PROGRESS_PORT = 28111


def _artifacts(tmp_path, demo_dataset_path):
    data = tmp_path / "in" / "train"
    data.parent.mkdir(parents=True)
    shutil.copyfile(demo_dataset_path, data)
    dataset = dsl.Dataset(uri=str(data), metadata=dataset_metadata("hf://org/demo", dataset_sha256="abc123"))
    outputs = {
        name: cls(uri=str(tmp_path / "out" / name))
        for name, cls in (("model", dsl.Model), ("metrics", dsl.Metrics), ("report", dsl.HTML))
    }
    (tmp_path / "out").mkdir()
    return dataset, outputs


def test_python_func_trains_lora_locally_and_fills_the_outputs(
    tiny_model_dir, demo_dataset_path, tmp_path, mlflow_server
):
    dataset, out = _artifacts(tmp_path, demo_dataset_path)
    eval_data = tmp_path / "in" / "eval"
    eval_data.write_text("".join(demo_dataset_path.read_text().splitlines(keepends=True)[:16]))
    workspace = tmp_path / "ws"
    store = mlflow_server  # a real `mlflow server`, read back below by another client
    train_model.python_func(
        dataset=dataset,
        eval_dataset=dsl.Dataset(uri=str(eval_data)),
        output_model=out["model"],
        output_metrics=out["metrics"],
        output_loss_chart=out["report"],
        training_base_model=str(tiny_model_dir),
        task_config=None,
        training_algorithm="LoRA",
        training_launcher="local",
        training_lora_r=4,
        pvc_path=str(workspace),
        run_id="run-1",
        task_name="train-model",
        training_mlflow_tracking_uri=store,
        **{f"training_{name}": value for name, value in FAST.items()},
    )
    model_dir = Path(out["model"].path)
    assert (model_dir / "model.safetensors").is_file() and (model_dir / "tokenizer.json").is_file()
    meta = out["model"].metadata
    assert meta["algorithm"] == "lora" and meta["backend"] == "local" and meta["lora_weights"] == "merged"
    assert meta["base_model"] == str(tiny_model_dir) and meta["job_name"] == ""
    assert meta["dataset_uri"] == "hf://org/demo" and meta["dataset_sha256"] == "abc123"
    assert meta["hyperparameters"]["lora_r"] == 4 and meta["hyperparameters"]["max_steps"] == 4
    # The local launcher's run directory is scratch: the model artifact is the lasting copy the metadata names.
    assert meta["checkpoint_path"] == out["model"].uri
    (checkpoint,) = workspace.glob("train_model/*/output/final")  # the run directory, stable for this run and task
    assert (checkpoint / "model.safetensors").is_file()
    assert Path(meta["adapter_path"], "adapter_config.json").is_file()
    metrics = out["metrics"].metadata
    assert set(metrics) == {
        "final_loss",
        "min_loss",
        "steps",
        "train_seconds",
        "tokens_per_second",
        "eval_loss",
        "base_eval_loss",
    }
    assert metrics["steps"] == 4 and metrics["min_loss"] <= metrics["final_loss"]
    records = [json.loads(line) for line in (checkpoint.parent / "metrics.jsonl").read_text().splitlines()]
    assert metrics["final_loss"] == records[-1]["loss"]
    assert metrics["tokens_per_second"] == records[-1]["tokens_per_second"]
    html = Path(out["report"].path).read_text()
    assert "data:image/png;base64," in html and "lora_r" in html and "local launcher: no cluster job" in html
    # The MLflow run: parameters, every step's metrics as the trainer logged them, the model location, its id.
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=store)
    run = client.get_run(meta["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.data.tags["kfp_finetune.run_key"] == "run-1/train-model"
    params = run.data.params
    assert (params["algorithm"], params["lora_r"], params["max_steps"]) == ("lora", "4", "4")
    assert params["backend_used"] == "local"
    assert params["base_model"] == str(tiny_model_dir) and params["dataset_sha256"] == "abc123"
    assert params["total_steps"] == "4"
    losses = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "loss"))
    assert losses == [(r["step"], pytest.approx(r["loss"])) for r in records]
    assert run.data.tags["kfp_finetune.model_location"] == meta["checkpoint_path"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"training_algorithm": "dpo"}, "algorithm='dpo': must be one of sft, osft, lora"),
        ({"training_unfreeze_rank_ratio": 0.0}, r"unfreeze_rank_ratio=0.0: must be in \(0, 1\]"),
        ({"training_lora_r": 0}, "lora_r=0: LoRA rank must be >= 1"),
        ({"training_launcher": "slurm"}, "training_launcher='slurm': must be one of trainjob, local"),
        ({"training_cleanup_policy": "forget"}, "cleanup_policy='forget'"),
        ({"training_launcher": "pytorchjob"}, "training_image='': required when the launcher is pytorchjob"),
        ({"training_lr_scheduler": "linear"}, "lr_scheduler='linear' is not supported by training-hub sft"),
        (
            {"training_progress_metrics_port": 80},
            r"training_progress_metrics_port=80: must be an integer in \[1024, 65535\]",
        ),
        (
            {"training_progress_poll_interval_seconds": 1},
            r"training_progress_poll_interval_seconds=1: must be an integer in \[",
        ),
    ],
)
def test_bad_parameters_fail_before_anything_is_trained_or_submitted(
    overrides, message, tiny_model_dir, demo_dataset_path, tmp_path, kube_api
):
    dataset, out = _artifacts(tmp_path, demo_dataset_path)
    with pytest.raises(TrainingConfigError, match=message):
        run_train_model(
            train_model_request(
                dataset=dataset,
                training_base_model=str(tiny_model_dir),
                pvc_path=str(tmp_path / "ws"),
                training_namespace=NS,
                **overrides,
            ),
            **out,
            api_client=kube_api.api_client,
        )
    assert kube_api.requests == [] and not (tmp_path / "ws").exists()
    assert not any((tmp_path / "out").iterdir())


def test_bad_rows_fail_with_file_and_line(tiny_model_dir, demo_dataset_path, tmp_path):
    dataset, out = _artifacts(tmp_path, demo_dataset_path)
    with open(dataset.path, "a") as handle:
        handle.write('{"messages": "oops"}\n')
    with pytest.raises(ValueError, match=r"train_dataset .*train:401 \[messages_not_list\] messages is str"):
        run_train_model(
            train_model_request(dataset=dataset, training_base_model=str(tiny_model_dir), training_launcher="local"),
            **out,
        )


@dsl.component(install_kfp_package=False)
def _chat_splits(source: str, train: dsl.Output[dsl.Dataset], evaluation: dsl.Output[dsl.Dataset]):
    lines = open(source).read().splitlines(keepends=True)
    open(train.path, "w").write("".join(lines[40:]))
    open(evaluation.path, "w").write("".join(lines[:40]))
    from components._common.dataset_metadata import DATASET_METADATA_VERSION, DatasetMetadata

    described = DatasetMetadata(
        DATASET_METADATA_VERSION, "file://" + source, "r", "0" * 64, 360, "messages", "train", 7
    )
    train.metadata.update(described.to_metadata())


def test_runs_through_kfp_local(kfp_local, tiny_model_dir, demo_dataset_path):
    @dsl.pipeline
    def fine_tune(base_model: str, source: str) -> dsl.Model:
        data = _chat_splits(source=source)
        trained = train_model(
            dataset=data.outputs["train"],
            eval_dataset=data.outputs["evaluation"],
            training_base_model=base_model,
            training_algorithm="osft",
            training_launcher="local",
            training_unfreeze_rank_ratio=0.5,
            **{f"training_{name}": value for name, value in FAST.items()},
        )
        return trained.outputs["output_model"]

    model = fine_tune(base_model=str(tiny_model_dir), source=str(demo_dataset_path)).output
    assert model.metadata["algorithm"] == "osft" and model.metadata["backend"] == "local"
    assert model.metadata["dataset_uri"] == f"file://{demo_dataset_path}"
    assert model.metadata["checkpoint_path"] == model.uri  # no workspace: the artifact is the only copy
    assert (Path(model.path) / "model.safetensors").is_file()

    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(model.path).config.hidden_size == 64


# -- the TrainJob path, to the edge ------------------------------------------------------------------------------------
FAKE_TRAINING_HUB = '''
"""Stands in for training-hub inside the test's "pod": records the call, writes what the real backends write."""
import json, os, shutil
from pathlib import Path

def _record(function, kwargs):
    Path(os.environ["FAKE_HUB_CALLS"]).write_text(json.dumps({"function": function, "kwargs": kwargs}))
    out = Path(kwargs["ckpt_output_dir"])
    final = out / "hf_format" / "samples_64.0"
    shutil.copytree(kwargs["model_path"], final)
    with open(out / "training_metrics_0.jsonl", "w") as handle:
        for step, loss in enumerate([2.0, 1.5, 1.25, 1.4], start=1):
            handle.write(json.dumps({"step": step, "epoch": 0, "steps_per_epoch": 4, "lr": 1e-5, "loss": loss,
                                     "tokens_per_second": 1000.0 * step, "time_per_batch": 0.5}) + "\\n")

def sft(**kwargs): _record("sft", kwargs)
def osft(**kwargs): _record("osft", kwargs)
def lora_sft(**kwargs): _record("lora_sft", kwargs)
'''


TRAINER_ENV = {
    "PET_NNODES": "2",
    "PET_NPROC_PER_NODE": "4",
    "PET_NODE_RANK": "0",
    "PET_MASTER_ADDR": "tj-node-0-0",
    "PET_MASTER_PORT": "29500",
}
#: What a Training Operator v1 without PET_* injects into the master pod of a 2-node x 4-GPU PyTorchJob.
OPERATOR_V1_ENV = {"MASTER_ADDR": "tm-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "8", "RANK": "0"}


def _play_the_cluster(kube_api, tmp_path, seen, kind="trainjob"):
    """Waits for the job, runs its command as the (master) pod would (fake training-hub), then marks it complete."""
    plural = kind + "s"
    job = kube_api.wait_for(lambda: kube_api.objects(plural, NS))[0]
    seen["manifest"] = job
    hub = tmp_path / "fake-hub"
    (hub / "training_hub").mkdir(parents=True)
    (hub / "training_hub" / "__init__.py").write_text(textwrap.dedent(FAKE_TRAINING_HUB))
    if kind == "trainjob":
        trainer, injected = job["spec"]["trainer"], TRAINER_ENV
    else:
        trainer, injected = (
            job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0],
            (OPERATOR_V1_ENV),
        )
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(hub),
        "FAKE_HUB_CALLS": str(tmp_path / "calls.json"),
        **injected,
    }
    command = [sys.executable if trainer["command"][0] == "python" else trainer["command"][0]]
    run = subprocess.run(
        [*command, *trainer["command"][1:], *trainer["args"]], env=env, capture_output=True, text=True, timeout=60
    )
    seen["pod_output"] = run.stdout + run.stderr
    assert run.returncode == 0, seen["pod_output"]
    if kind == "trainjob":
        kube_api.set_trainjob_status(NS, job["metadata"]["name"], {"conditions": [condition("Complete")]})
    else:
        kube_api.set_pytorchjob_status(NS, job["metadata"]["name"], {"conditions": [condition("Succeeded")]})


@pytest.mark.parametrize("launcher", ["trainjob", "auto"])
def test_trainjob_path_submits_the_entrypoint_and_reads_back_the_result(
    launcher, kube_api, tiny_model_dir, demo_dataset_path, tmp_path
):
    kube_api.create_runtime("training-hub")
    dataset, out = _artifacts(tmp_path, demo_dataset_path)
    workspace = tmp_path / "kfp-workspace"
    task_config = workspace_task_config(
        workspace,
        env=[{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )
    seen, logged = {}, []
    with kube_api.in_background(lambda: _play_the_cluster(kube_api, tmp_path, seen)):
        outcome = run_train_model(
            train_model_request(
                dataset=dataset,
                task_config=task_config,
                training_base_model=str(tiny_model_dir),
                training_algorithm="osft",
                training_launcher=launcher,
                training_namespace=NS,
                pvc_path=str(workspace),
                run_id="run-7",
                task_name="train-model",
                training_num_nodes=2,
                training_gpus_per_node=4,
                training_max_steps=40,
                training_seed=7,
                training_unfreeze_rank_ratio=0.3,
                s3_secret_name="models-s3",
                training_progress_metrics_port=PROGRESS_PORT,
                training_backend="mini-trainer",
                training_env_vars={"INSTRUCTLAB_NCCL_TIMEOUT_MS": "600000"},
            ),
            **out,
            api_client=kube_api.api_client,
            log=logged.append,
            job_options={"poll_interval_seconds": 0.2},
        )
    manifest = seen["manifest"]
    validate_trainjob({key: manifest[key] for key in ("apiVersion", "kind", "metadata", "spec")})
    # The dashboard's progress tracking (on by default): the annotations, and the rank-0 pod's server started.
    annotations = manifest["metadata"]["annotations"]
    assert annotations["trainer.opendatahub.io/progression-tracking"] == "true"
    assert annotations["trainer.opendatahub.io/metrics-port"] == str(PROGRESS_PORT)
    assert "[Kubeflow] Initializing Training Hub progression tracking" in seen["pod_output"]
    # The guide's troubleshooting hooks: the "Job: <job-name>" log line (the namespace on its own line) and the pods'
    # job-name label.
    name = manifest["metadata"]["name"]
    assert f"Job: {name}" in logged and f"Namespace: {NS}" in logged
    # ... and the guide's `oc get pods -l ...` / `oc logs <pod> -c <container>` with the container the pods really run
    # (the guide's `-c pytorch` is a PyTorchJob's; RHOAI's runtimes name the TrainJob's trainer container `node`).
    container = "node" if manifest["kind"] == "TrainJob" else "pytorch"
    hint = f"Pods: oc get pods -n {NS} -l training.kubeflow.org/job-name={name}; logs: oc logs <pod-name> -n {NS}"
    assert f"{hint} -c {container}" in logged, logged
    if manifest["kind"] == "TrainJob":
        (patch,) = manifest["spec"]["runtimePatches"]
        (replicated,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        assert replicated["template"]["spec"]["template"]["metadata"]["labels"] == {
            "training.kubeflow.org/job-name": name
        }
    env = {e["name"]: e.get("value") for e in manifest["spec"]["trainer"]["env"]}
    assert env["INSTRUCTLAB_NCCL_TIMEOUT_MS"] == "600000"
    trainer = manifest["spec"]["trainer"]
    run_dir = Path(trainer["args"][1]).parent
    assert trainer["command"] == ["python", str(run_dir / "entrypoint.py")] and trainer["numNodes"] == 2
    assert run_dir.is_relative_to(workspace) and (run_dir / "entrypoint.py").is_file()
    # Secrets are referenced, never copied: the HF token and the S3 keys come from secretKeyRefs.
    secret_refs = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in trainer["env"] if "valueFrom" in e}
    assert secret_refs["HF_TOKEN"] == "hf-token" and secret_refs["AWS_SECRET_ACCESS_KEY"] == "models-s3"
    # The pod called training-hub's osft with keywords that all land in the installed Training Hub.
    call = json.loads((tmp_path / "calls.json").read_text())
    assert call["function"] == "osft"
    assert_lands_in_training_hub(call)
    kwargs = call["kwargs"]
    assert (kwargs["seed"], kwargs["unfreeze_rank_ratio"], kwargs["max_steps"]) == (7, 0.3, 40)
    assert kwargs["backend"] == "mini-trainer"  # training_backend: Training Hub's backend
    assert (kwargs["nnodes"], kwargs["nproc_per_node"], kwargs["rdzv_endpoint"]) == (2, 4, "tj-node-0-0:29500")
    assert kwargs["model_path"] == str(tiny_model_dir) and kwargs["data_path"] == str(run_dir / "data/train.jsonl")
    # The outputs name the real checkpoint on the workspace and the TrainJob; metrics come from its log.
    meta = out["model"].metadata
    assert meta["checkpoint_path"] == str(run_dir / "checkpoints/hf_format/samples_64.0")
    assert meta["job_name"] == manifest["metadata"]["name"] == outcome.job_name
    assert meta["backend"] == "trainjob"
    # Issue 44: the artifact holds the manifest, not the weights; they are read in place on the workspace.
    assert sorted(p.name for p in Path(out["model"].path).iterdir()) == [MANIFEST_FILE]
    assert resolve_model_dir(out["model"].path) == run_dir / "checkpoints/hf_format/samples_64.0" == outcome.model_dir
    assert meta["weights_storage"] == "workspace" and meta["weights_in_artifact"] is False
    assert meta["weights_bytes"] == sum(p.stat().st_size for p in outcome.model_dir.rglob("*") if p.is_file())
    assert out["metrics"].metadata == {
        "final_loss": 1.4,
        "min_loss": 1.25,
        "steps": 4.0,
        "train_seconds": 2.0,
        "tokens_per_second": 4000.0,
    }
    assert manifest["metadata"]["name"] in Path(out["report"].path).read_text()


def test_trainjob_path_needs_the_workspace_on_a_passed_volume(kube_api, tiny_model_dir, demo_dataset_path, tmp_path):
    dataset, out = _artifacts(tmp_path, demo_dataset_path)
    with pytest.raises(TrainingConfigError, match="is on no volume passed to the TrainJob"):
        run_train_model(
            train_model_request(
                dataset=dataset,
                task_config=dsl.TaskConfig(),
                training_base_model=str(tiny_model_dir),
                training_namespace=NS,
                pvc_path=str(tmp_path / "ws"),
            ),
            **out,
            api_client=kube_api.api_client,
        )
    assert kube_api.requests == []


def test_auto_falling_back_to_pytorchjob_needs_an_image_before_anything_is_submitted(
    kube_api, tiny_model_dir, demo_dataset_path, tmp_path
):
    kube_api.call(lambda: kube_api.emulator.resources.setdefault("kubeflow.org/v1/pytorchjobs", {}))
    dataset, out = _artifacts(tmp_path, demo_dataset_path)
    workspace = tmp_path / "kfp-workspace"
    task_config = workspace_task_config(workspace)
    with pytest.raises(TrainingConfigError, match=r"training_image='': required .*training_launcher='auto'"):
        run_train_model(
            train_model_request(
                dataset=dataset,
                task_config=task_config,
                training_base_model=str(tiny_model_dir),
                training_launcher="auto",
                training_namespace=NS,
                pvc_path=str(workspace),
            ),
            **out,
            api_client=kube_api.api_client,
            log=lambda line: None,
        )
    assert kube_api.requests and all(request.verb in ("get", "list") for request in kube_api.requests)


def test_pytorchjob_path_runs_the_entrypoint_with_the_operator_v1_env(
    kube_api, tiny_model_dir, demo_dataset_path, tmp_path, monkeypatch, mlflow_server
):
    # MLflow (a real server) from the environment this time (the step records are read back from the metrics file).
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    dataset, out = _artifacts(tmp_path, demo_dataset_path)
    workspace = tmp_path / "kfp-workspace"
    task_config = workspace_task_config(workspace)
    seen = {}
    with kube_api.in_background(lambda: _play_the_cluster(kube_api, tmp_path, seen, kind="pytorchjob")):
        outcome = run_train_model(
            train_model_request(
                dataset=dataset,
                task_config=task_config,
                training_base_model=str(tiny_model_dir),
                training_launcher="pytorchjob",
                training_image="quay.io/example/training-hub:0.11",
                training_namespace=NS,
                pvc_path=str(workspace),
                run_id="run-8",
                task_name="train-model",
                training_num_nodes=2,
                training_gpus_per_node=4,
            ),
            **out,
            api_client=kube_api.api_client,
            log=lambda line: None,
            job_options={"poll_interval_seconds": 0.2},
        )
    manifest = seen["manifest"]
    validate_pytorchjob({key: manifest[key] for key in ("apiVersion", "kind", "metadata", "spec")})
    replicas = manifest["spec"]["pytorchReplicaSpecs"]
    assert (replicas["Master"]["replicas"], replicas["Worker"]["replicas"]) == (1, 1)
    master = replicas["Master"]["template"]["spec"]["containers"][0]
    assert master["image"] == "quay.io/example/training-hub:0.11" and master["name"] == "pytorch"
    # No runtime is looked up for a PyTorchJob: the first request creates it.
    assert kube_api.requests_summary()[0] == "create pytorchjobs"
    kwargs = json.loads((tmp_path / "calls.json").read_text())["kwargs"]
    assert (kwargs["nnodes"], kwargs["nproc_per_node"], kwargs["node_rank"]) == (2, 4, 0)
    assert kwargs["rdzv_endpoint"] == "tm-master-0:23456"
    meta = out["model"].metadata
    assert meta["backend"] == "pytorchjob" and meta["job_name"] == manifest["metadata"]["name"]
    assert outcome.summary["steps"] == 4.0
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_server)
    run = client.get_run(meta["mlflow_run_id"])
    assert run.data.params["backend"] == "pytorchjob" and run.data.params["backend_used"] == "pytorchjob"
    # The pods hand the same server and experiment to Training Hub, under a run name of their own.
    run_config = json.loads((Path(meta["checkpoint_path"]).parents[2] / "run_config.json").read_text())
    assert run_config["mlflow"] == {
        "tracking_uri": mlflow_server,
        "experiment_name": "kfp-finetune",
        "run_name": f"{manifest['metadata']['name']}-training-hub",
    }
    losses = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "loss"))
    assert losses == [(1, 2.0), (2, 1.5), (3, 1.25), (4, 1.4)]
    assert run.data.tags["kfp_finetune.model_location"] == meta["checkpoint_path"]
