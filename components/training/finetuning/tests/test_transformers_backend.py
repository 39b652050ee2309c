"""``training_backend="transformers"``: validation, runtime choice, staging, the launcher's bundle, and ``train_model``
end to end against the Kubernetes emulator with the pod command really training (one node, gloo, CPU)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kfp import dsl

from components._common.model_location import resolve_model_dir
from components.training.finetuning import job_from_request, transformers_backend
from components.training.finetuning.config import TrainingConfigError, runtime_name_of
from components.training.finetuning.run import run_train_model, validate_request, write_run_config
from tests.harness.http_server import free_port
from tests.harness.kube import condition, validate_trainjob
from tests.harness.requests import pod_settings, train_model_request, training_config

NS = "team-a"
FAST = {"effective_batch_size": 16, "learning_rate": 3e-3, "max_seq_len": 256, "max_tokens_per_gpu": 1024}
FINETUNING = Path(transformers_backend.__file__).parent


def _artifacts(tmp_path, demo_dataset_path):
    data = tmp_path / "in" / "train"
    data.parent.mkdir(parents=True)
    shutil.copyfile(demo_dataset_path, data)
    dataset = dsl.Dataset(uri=str(data), metadata={"dataset_uri": "hf://org/demo", "dataset_sha256": "abc123"})
    outputs = {
        name: cls(uri=str(tmp_path / "out" / name))
        for name, cls in (("model", dsl.Model), ("metrics", dsl.Metrics), ("report", dsl.HTML))
    }
    (tmp_path / "out").mkdir()
    return dataset, outputs


def _workspace(path):
    """The run's workspace PVC as KFP mounts it into the task, at ``path``."""
    return dsl.TaskConfig(
        volumes=[{"name": "workspace", "persistentVolumeClaim": {"claimName": "run-ws"}}],
        volume_mounts=[{"name": "workspace", "mountPath": str(path)}],
    )


@pytest.mark.parametrize("algorithm", ["sft", "osft", "lora"])
def test_transformers_is_a_backend_of_every_algorithm(algorithm):
    request = train_model_request(
        training_base_model="m", training_algorithm=algorithm, training_backend="transformers"
    )
    config = validate_request(request, False)
    assert config.backend == "transformers"


def test_an_unknown_backend_names_the_choices():
    with pytest.raises(TrainingConfigError) as error:
        training_config(base_model="m", algorithm="osft", backend="transformer")
    message = str(error.value)
    assert "training_backend='transformer'" in message and "mini-trainer" in message and "'transformers'" in message


def test_settings_the_backend_cannot_honour_fail_before_anything_runs():
    def request(**changes):
        arguments = {"training_base_model": "m", "training_backend": "transformers", "training_launcher": "trainjob"}
        return train_model_request(**{**arguments, "training_use_liger": True, **changes})

    with pytest.raises(
        TrainingConfigError, match=r"use_liger=True is not supported by training_backend='transformers'"
    ):
        validate_request(request(), False)
    # Training Hub's own restrictions do not apply: its SFT takes no scheduler or max_steps, this trainer does.
    validate_request(request(training_use_liger=False, training_lr_scheduler="linear", training_max_steps=5), False)


def test_the_runtime_follows_the_backend_unless_named():
    assert runtime_name_of("", "transformers") == "torch-distributed"
    assert runtime_name_of("", "") == runtime_name_of("", "mini-trainer") == "training-hub"
    assert runtime_name_of("my-torch", "transformers") == "my-torch"
    assert runtime_name_of(" training-hub ", "transformers") == "training-hub"


def _staged(tmp_path, demo_dataset_path, backend="transformers"):
    config = training_config(base_model="org/model", backend=backend, **FAST)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return write_run_config(config, run_dir, demo_dataset_path, None, None, 1, pod_settings())


def _manifest(kind, config_path, **arguments):
    request = train_model_request(training_namespace=NS, **arguments)
    return job_from_request.build_job_manifest(kind, config_path, None, "run-3", "train-model", request, None)


def test_the_jobs_target_torch_distributed_and_run_the_staged_launcher(tmp_path, demo_dataset_path):
    config_path = _staged(tmp_path, demo_dataset_path)
    params = {"training_backend": "transformers", "training_num_nodes": 2, "training_gpus_per_node": 1}
    manifest = _manifest("trainjob", config_path, **params)
    validate_trainjob(manifest)
    spec = manifest["spec"]
    assert spec["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
        "name": "torch-distributed",
    }
    assert spec["trainer"]["command"] == ["python", str(config_path.parent / "transformers" / "launch.py")]
    assert spec["trainer"]["args"] == ["--config", str(config_path)]
    assert (spec["trainer"]["numNodes"], spec["trainer"]["numProcPerNode"]) == (2, 1)
    named = _manifest("trainjob", config_path, **params, training_runtime_name="rt")
    assert named["spec"]["runtimeRef"]["name"] == "rt"
    hub = _manifest("trainjob", config_path)
    assert hub["spec"]["runtimeRef"]["name"] == "training-hub"
    assert hub["spec"]["trainer"]["command"] == ["python", str(config_path.parent / "entrypoint.py")]
    manifest = _manifest("pytorchjob", config_path, training_backend="transformers", training_image="q.io/o/t:1")
    container = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert container["command"][1] == str(config_path.parent / "transformers" / "launch.py")


def test_staging_writes_the_code_tree_and_plain_data(tmp_path):
    source = tmp_path / "rows.jsonl"
    parts = [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]
    source.write_text(
        json.dumps({"messages": [{"role": "user", "content": parts}, {"role": "assistant", "content": "ok"}]}) + "\n"
    )
    config_path = _staged(tmp_path, source)
    run_dir = config_path.parent
    staged = json.loads((run_dir / "data" / "train.jsonl").read_text())
    assert staged["messages"][0]["content"] == "first\nsecond"
    assert not (run_dir / "entrypoint.py").exists()
    root = run_dir / "transformers"
    files = {str(path.relative_to(root)) for path in root.rglob("*.py") if path.name != "__init__.py"}
    expected = {module.replace(".", "/") + ".py" for module in transformers_backend.STAGED_MODULES}
    assert files == expected | set(transformers_backend.ROOT_SCRIPTS)
    assert json.loads(config_path.read_text())["hyperparameters"]["backend"] == "transformers"


def test_the_staged_tree_needs_no_project_dependency(tmp_path, demo_dataset_path):
    """The pod image has torch and transformers (and so PyYAML): none of the project's other dependencies."""
    root = _staged(tmp_path, demo_dataset_path).parent / "transformers"
    blocked = ["msgspec", "kfp", "kubernetes", "boto3", "mlflow", "tenacity"]
    script = "; ".join(
        [
            "import sys",
            f"sys.modules.update(dict.fromkeys({blocked!r}))",
            "import launch, worker",
            "import components.training.finetuning.hf_trainer.training as training",
            "assert training.__file__.startswith(sys.argv[1]), training.__file__",
        ]
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    run = subprocess.run(
        [sys.executable, "-c", script, str(root)], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]


def test_the_launchers_package_carries_what_staging_copies():
    """Every staged module is a product module (not a test module, which the wheel and the image leave out)."""
    components_root = FINETUNING.parents[1]
    for module in transformers_backend.STAGED_MODULES:
        path = components_root.parent / (module.replace(".", "/") + ".py")
        assert path.is_file() and "tests" not in path.relative_to(components_root).parts, module


def test_auto_looks_for_the_backends_runtime(kube_api, tiny_model_dir, demo_dataset_path, tmp_path):
    """``auto`` with ``transformers`` checks torch-distributed: with only training-hub it falls back to PyTorchJob."""
    kube_api.create_runtime("training-hub")
    dataset, out = _artifacts(tmp_path, demo_dataset_path)
    workspace = tmp_path / "ws"
    with pytest.raises(TrainingConfigError, match="training_image='': required when the launcher is pytorchjob"):
        run_train_model(
            train_model_request(
                dataset=dataset,
                task_config=_workspace(workspace),
                training_base_model=str(tiny_model_dir),
                training_backend="transformers",
                training_launcher="auto",
                training_namespace=NS,
                pvc_path=str(workspace),
            ),
            **out,
            api_client=kube_api.api_client,
            log=lambda line: None,
        )
    assert not kube_api.objects("trainjobs", NS) and not kube_api.objects("pytorchjobs", NS)


def _play_one_node(kube_api, seen):
    """Runs the TrainJob's command as its single pod would (real torchrun, one node), then marks the job complete."""
    job = kube_api.wait_for(lambda: kube_api.objects("trainjobs", NS), timeout=60)[0]
    seen["manifest"] = job
    trainer = job["spec"]["trainer"]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
        PET_NNODES="1",
        PET_NPROC_PER_NODE="1",
        PET_NODE_RANK="0",
        PET_MASTER_ADDR="127.0.0.1",
        PET_MASTER_PORT=str(free_port()),
        OMP_NUM_THREADS="1",
    )
    run = subprocess.run(
        [*trainer["command"], *trainer["args"]], env=env, capture_output=True, text=True, timeout=180, check=False
    )
    seen["pod_output"] = run.stdout + run.stderr
    conditions = [condition("Complete" if run.returncode == 0 else "Failed", message="pod exited")]
    kube_api.set_trainjob_status(NS, job["metadata"]["name"], {"conditions": conditions})


@pytest.mark.slow
def test_train_model_runs_the_transformers_backend_in_a_trainjob(
    kube_api, mlflow_server, tiny_model_dir, demo_dataset_path, tmp_path, monkeypatch
):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    kube_api.create_runtime("torch-distributed")
    dataset, out = _artifacts(tmp_path, demo_dataset_path)
    eval_data = tmp_path / "in" / "eval.jsonl"
    eval_data.write_text("".join(demo_dataset_path.read_text().splitlines(keepends=True)[:16]))
    workspace = tmp_path / "kfp-workspace"
    seen, logged = {}, []
    with kube_api.in_background(lambda: _play_one_node(kube_api, seen)):
        outcome = run_train_model(
            train_model_request(
                dataset=dataset,
                eval_dataset=dsl.Dataset(uri=str(eval_data)),
                task_config=_workspace(workspace),
                training_base_model=str(tiny_model_dir),
                training_algorithm="lora",
                training_lora_r=8,
                training_lora_alpha=16,
                training_backend="transformers",
                training_launcher="auto",
                training_namespace=NS,
                pvc_path=str(workspace),
                run_id="run-9",
                task_name="train-model",
                training_max_steps=6,
                training_num_epochs=1,
                training_lr_scheduler="constant",
                training_mlflow_tracking_uri=mlflow_server,
                training_progress_metrics_port=free_port(),
                **{f"training_{name}": value for name, value in FAST.items()},
            ),
            **out,
            api_client=kube_api.api_client,
            log=logged.append,
            job_options={"poll_interval_seconds": 0.2},
        )
    assert "transformers backend: lora on 1 process(es)" in seen["pod_output"], seen["pod_output"][-3000:]
    manifest = seen["manifest"]
    validate_trainjob({key: manifest[key] for key in ("apiVersion", "kind", "metadata", "spec")})
    assert manifest["spec"]["runtimeRef"]["name"] == "torch-distributed"
    run_dir = Path(manifest["spec"]["trainer"]["args"][1]).parent
    meta = out["model"].metadata
    assert meta["checkpoint_path"] == str(run_dir / "checkpoints" / "final")
    assert meta["backend"] == "trainjob" and meta["job_kind"] == "TrainJob"
    # The artifact is the manifest of the weights the job wrote on the workspace (issue 44), read there in place.
    assert (resolve_model_dir(out["model"].path) / "config.json").is_file()
    assert resolve_model_dir(out["model"].path) == run_dir / "checkpoints" / "final"
    metrics = out["metrics"].metadata
    assert metrics["steps"] == 6.0 and metrics["eval_loss"] < metrics["base_eval_loss"]
    assert [record["step"] for record in outcome.records] == [1, 2, 3, 4, 5, 6]
    assert manifest["metadata"]["name"] in Path(out["report"].path).read_text()
    # MLflow: the step's own run, and the pods' run beside it with every step, as Training Hub's would be.
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_server)
    experiment = client.get_experiment_by_name("kfp-finetune")
    runs = {run.info.run_name: run for run in client.search_runs([experiment.experiment_id])}
    pod_run = runs[f"{manifest['metadata']['name']}-transformers"]
    assert pod_run.info.status == "FINISHED" and pod_run.data.params["world_size"] == "1"
    assert [m.step for m in client.get_metric_history(pod_run.info.run_id, "loss")] == [1, 2, 3, 4, 5, 6]
    assert meta["mlflow_run_id"] in {run.info.run_id for run in runs.values()}


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "4", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "tj-node-0-0"},
            ["--nnodes=2", "--nproc-per-node=4", "--node-rank=1", "--master-addr=tj-node-0-0", "--master-port=29500"],
        ),
        (  # Training Operator v1 without PET_*: the node count from WORLD_SIZE / the run config's processes per node
            {"MASTER_ADDR": "tm-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "8", "RANK": "1"},
            ["--nnodes=2", "--nproc-per-node=4", "--node-rank=1", "--master-addr=tm-master-0", "--master-port=23456"],
        ),
        ({}, ["--nnodes=1", "--nproc-per-node=4", "--node-rank=0"]),
    ],
)
def test_the_pod_command_turns_the_controllers_env_into_torchrun_arguments(env, expected, tmp_path):
    from components.training.finetuning.hf_trainer.pod_launch import torchrun_argv

    argv = torchrun_argv(4, env, tmp_path / "worker.py", tmp_path / "run_config.json", "/m")
    assert argv[1:4] == ["-m", "torch.distributed.run", "--max-restarts=0"]
    assert argv[4:-5] == expected
    assert argv[-5:] == [
        str(tmp_path / "worker.py"),
        "--config",
        str(tmp_path / "run_config.json"),
        "--model-path",
        "/m",
    ]


def test_an_image_without_transformers_fails_in_one_line(tmp_path, demo_dataset_path):
    """The pod command checks its image before torchrun starts: one line naming the package and the fix."""
    config_path = _staged(tmp_path, demo_dataset_path)
    launch_py = config_path.parent / "transformers" / "launch.py"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    script = (
        "import importlib.util, runpy, sys; real = importlib.util.find_spec; "
        "importlib.util.find_spec = lambda name, *a: None if name == 'transformers' else real(name, *a); "
        "sys.argv = sys.argv[1:]; sys.path.insert(0, sys.argv[0].rpartition('/')[0]); "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(launch_py), "--config", str(config_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stderr[-2000:]
    assert "ERROR: training_backend='transformers' needs transformers in the training image" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("algorithm", "absent", "expected"),
    [
        ("osft", "mini_trainer", ["rhai-innovation-mini-trainer"]),
        ("sft", "mini_trainer", []),
        ("lora", "peft", ["peft"]),
        ("sft", "accelerate", ["accelerate"]),
        ("osft", "trl", ["trl"]),
    ],
)
def test_the_trainer_s_packages_are_named_as_pip_installs_them(algorithm, absent, expected, monkeypatch):
    import importlib.util

    from components.training.finetuning.hf_trainer.pod_launch import missing_trainer_packages

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == absent else real(name, *a))
    assert missing_trainer_packages(algorithm) == expected
