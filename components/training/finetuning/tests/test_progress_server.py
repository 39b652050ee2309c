"""The dashboard progress server, run for real: the staged entrypoint as a subprocess with a stand-in Training Hub.

The stand-in records its keywords and replays each backend's real metrics lines (:mod:`.real_metrics_writers`), one
step at a time, waiting for the test to read the progress over HTTP.
"""

import dataclasses
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from components.training.finetuning import contract, launch
from components.training.finetuning.cluster import progress as cluster_progress
from components.training.finetuning.contract import MlflowSettings, ProgressSettings, load_run_config
from components.training.finetuning.manifests import progress
from components.training.finetuning.manifests.names import job_name
from components.training.finetuning.plan import RunPlan
from components.training.finetuning.pod import checkpoints, metrics, progress_server
from components.training.finetuning.pod.progress_server import INIT_LINE, ProgressTracker
from components.training.finetuning.run import write_run_config
from components.training.finetuning.tests.training_hub_keywords import assert_lands_in_training_hub
from tests.harness.http_server import free_port
from tests.harness.requests import train_model_request, training_config

STEPS_PER_EPOCH, EPOCHS = 2, 2
STEPS = STEPS_PER_EPOCH * EPOCHS

STAND_IN = """
import json, os, time
from pathlib import Path

_UNSET = object()
ROWS = json.loads(os.environ["FAKE_HUB_ROWS"])


def _train(function, passed):
    Path(os.environ["FAKE_HUB_CALLS"]).write_text(json.dumps({"function": function, "kwargs": passed}, default=str))
    ckpt = Path(passed["ckpt_output_dir"])
    ckpt.mkdir(parents=True, exist_ok=True)
    gate = os.environ.get("FAKE_HUB_GATE")
    for row in ROWS:
        with (ckpt / os.environ["FAKE_HUB_FILE"]).open("a") as handle:
            handle.write(json.dumps(row) + "\\n")
        if gate and "step" in row:
            ack = Path(gate) / f"ack-{row['step']}"
            deadline = time.monotonic() + 30
            while not ack.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the test never read step {row['step']}")
                time.sleep(0.01)
"""


class _Unset:
    def __repr__(self) -> str:
        return "_UNSET"


def _stand_in(directory: Path) -> Path:
    """A ``training_hub`` package whose ``sft``, ``osft`` and ``lora_sft`` record their keywords and replay rows."""
    import inspect

    import training_hub

    code = [textwrap.dedent(STAND_IN)]
    for name in ("sft", "osft", "lora_sft"):  # the real parameter names and kinds; defaults: "not passed"
        signature = inspect.signature(getattr(training_hub, name))
        parameters = [
            p.replace(annotation=p.empty, default=p.empty if p.default is p.empty else _Unset())
            for p in signature.parameters.values()
        ]
        code.append(
            f"def {name}{signature.replace(parameters=parameters, return_annotation=signature.empty)}:\n"
            "    passed = {k: v for k, v in locals().items() if k != 'kwargs' and v is not _UNSET}\n"
            "    passed.update(kwargs)\n"
            f"    _train({name!r}, passed)\n"
        )
    (directory / "training_hub").mkdir(parents=True)
    (directory / "training_hub" / "__init__.py").write_text("\n".join(code))
    return directory


_ROWS: dict[str, list[dict]] = {}


def _rows(algorithm: str) -> list[dict]:
    """What each backend's own writer writes for a 2-epoch run of 2 steps per epoch (written once per session)."""
    if algorithm not in _ROWS:
        import tempfile

        from components.training.finetuning.tests.real_metrics_writers import write_metrics

        with tempfile.TemporaryDirectory() as directory:
            _ROWS[algorithm] = write_metrics(algorithm, Path(directory), STEPS_PER_EPOCH, EPOCHS)
    return _ROWS[algorithm]


def _stage(tmp_path: Path, algorithm: str, port: int, demo_dataset_path: Path) -> Path:
    """The run directory exactly as ``train_model`` stages it on the workspace PVC."""
    run_dir = tmp_path / "ws" / "train_model" / "train-model-0123456789"
    run_dir.mkdir(parents=True)
    config = training_config(base_model=str(tmp_path), algorithm=algorithm, effective_batch_size=16, num_epochs=EPOCHS)
    termination_log = tmp_path / "termination-log"
    termination_log.write_text("")
    settings = launch.PodSettings(
        progress=ProgressSettings(enabled=True, port=port, termination_log=str(termination_log)),
        jit_checkpoint=True,
        mlflow=MlflowSettings(tracking_uri="http://mlflow.example:5000", experiment_name="team-a", run_name="tm-th"),
    )
    return write_run_config(config, run_dir, demo_dataset_path, None, None, 1, settings)


def _launch(tmp_path, config_path, algorithm, gate=None, **env):
    hub = _stand_in(tmp_path / "hub")
    variables = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(hub),  # only the stand-in: the staged run directory must be self-sufficient
        "FAKE_HUB_CALLS": str(tmp_path / "calls.json"),
        "FAKE_HUB_ROWS": json.dumps(_rows(algorithm)),
        "FAKE_HUB_FILE": metrics.TRAINING_HUB_METRICS_FILES[algorithm],
        "PET_NODE_RANK": "0",
        **env,
    }
    if gate is not None:
        variables["FAKE_HUB_GATE"] = str(gate)
    command = [sys.executable, str(config_path.parent / "entrypoint.py"), "--config", str(config_path)]
    return subprocess.Popen(command, env=variables, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def get_progress(port: int) -> dict | None:
    """The progress JSON the pod serves on ``port``, or None when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            return json.loads(response.read())
    except OSError:
        return None


@pytest.mark.parametrize("algorithm", ["sft", "osft", "lora"])
def test_the_staged_entrypoint_serves_progress_that_follows_the_metrics_file(algorithm, tmp_path, demo_dataset_path):
    port = free_port()
    config_path = _stage(tmp_path, algorithm, port, demo_dataset_path)
    gate = tmp_path / "gate"
    gate.mkdir()
    process = _launch(tmp_path, config_path, algorithm, gate=gate)
    seen = []
    try:
        for step in range(1, STEPS + 1):
            # Step 1 comes after the pod's start-up, which imports the installed backends' argument classes (torch)
            # to tell which keywords they take (pod/hub_compat.py): seconds, more on a busy machine.
            deadline = time.monotonic() + (180 if step == 1 else 20)
            status = None
            while time.monotonic() < deadline and process.poll() is None:
                status = get_progress(port)
                if status and status["currentStep"] == step:
                    break
                time.sleep(0.02)
            assert status and status["currentStep"] == step, (status, process.poll())
            seen.append(status)
            (gate / f"ack-{step}").touch()
        output, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, output
    assert INIT_LINE in output and "WARNING" not in output
    losses = [row.get("loss", row.get("avg_loss")) for row in _rows(algorithm) if "step" in row]
    losses = [loss for loss in losses if loss is not None]
    assert [s["currentStep"] for s in seen] == [1, 2, 3, 4] and {s["totalSteps"] for s in seen} == {STEPS}
    assert [s["trainMetrics"]["loss"] for s in seen] == losses
    # 25/50/75 %, then 99 (not 100) at the last step while training has not returned yet; 2 epochs, not 1.
    assert [s["progressPercentage"] for s in seen] == [25, 50, 75, 99]
    assert [s["currentEpoch"] for s in seen] == [0.5, 1.0, 1.5, 2.0] and seen[0]["totalEpochs"] == EPOCHS
    assert seen[-1]["estimatedRemainingSeconds"] == 0
    assert all(isinstance(s["estimatedRemainingSeconds"], int) for s in seen[1:])
    if algorithm == "sft":
        assert seen[1]["trainMetrics"]["grad_norm"] == 1.0 and seen[1]["trainMetrics"]["throughput_samples_sec"] == 12.5
    elif algorithm == "osft":
        assert seen[1]["trainMetrics"]["learning_rate"] == 2e-5 and seen[1]["trainMetrics"]["grad_norm"] == 0.3
    else:
        assert seen[2]["evalMetrics"] == {"eval_loss": 1.7, "eval_runtime": 0.1}
    final = json.loads((tmp_path / "termination-log").read_text())
    assert (final["progressPercentage"], final["currentStep"], final["estimatedRemainingSeconds"]) == (100, 4, 0)
    # Training Hub got the JIT checkpoint and MLflow settings, all landing in the installed Training Hub.
    call = json.loads((tmp_path / "calls.json").read_text())
    assert_lands_in_training_hub(call)
    assert call["kwargs"]["enable_jit_checkpoint"] is True
    assert call["kwargs"]["mlflow_tracking_uri"] == "http://mlflow.example:5000"
    assert (call["kwargs"]["mlflow_experiment_name"], call["kwargs"]["mlflow_run_name"]) == ("team-a", "tm-th")
    assert get_progress(port) is None  # the server is gone with the process


def test_a_taken_port_warns_once_and_training_goes_on(tmp_path, demo_dataset_path):
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config_path = _stage(tmp_path, "osft", port, demo_dataset_path)
        process = _launch(tmp_path, config_path, "osft")
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    warnings = [line for line in output.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and f"cannot serve on port {port}" in warnings[0] and "training goes on" in warnings[0]
    assert json.loads((tmp_path / "calls.json").read_text())["function"] == "osft"
    assert json.loads((tmp_path / "termination-log").read_text())["progressPercentage"] == 100


def test_only_node_rank_zero_serves_and_a_disabled_run_serves_nothing(tmp_path, demo_dataset_path):
    port = free_port()
    config_path = _stage(tmp_path, "lora", port, demo_dataset_path)
    process = _launch(tmp_path, config_path, "lora", PET_NODE_RANK="1", PET_NNODES="2", PET_NPROC_PER_NODE="1")
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    assert INIT_LINE not in output and (tmp_path / "termination-log").read_text() == ""
    disabled = load_run_config(config_path)
    disabled = dataclasses.replace(disabled, progress=dataclasses.replace(disabled.progress, enabled=False))
    assert progress_server.start_for_run(disabled, 0) is None


def test_a_failing_training_publishes_its_last_progress_below_100(tmp_path):
    tracker = ProgressTracker(tmp_path, "lora", total_epochs=1)
    (tmp_path / "training_metrics.jsonl").write_text(json.dumps({"step": 2, "loss": 1.0, "max_steps": 4}) + "\n")
    server = progress_server.ProgressServer(tracker, free_port(), log=lambda line: None)
    assert server.start()
    log = tmp_path / "termination-log"
    log.write_text("")
    assert server.stop(succeeded=False, termination_log=str(log))["progressPercentage"] == 50
    assert json.loads(log.read_text())["currentStep"] == 2


def test_a_torn_last_line_waits_for_the_rest(tmp_path):
    path = tmp_path / "training_metrics_0.jsonl"
    tracker = ProgressTracker(tmp_path, "osft", total_epochs=1)
    assert tracker.status()["currentStep"] == 0 and tracker.status()["totalSteps"] is None
    line = json.dumps({"step": 1, "loss": 2.0, "steps_per_epoch": 2})
    path.write_text(line[:10])
    assert tracker.status()["currentStep"] == 0
    with path.open("a") as handle:
        handle.write(line[10:] + "\n")
    assert tracker.status()["currentStep"] == 1 and tracker.status()["progressPercentage"] == 50


def test_a_long_log_keeps_bounded_memory_and_its_rare_eval_metrics(tmp_path):
    lines = [{"step": 1, "loss": 3.0, "max_steps": 6000}, {"step": 1, "eval_loss": 2.5}]
    lines += [{"step": step, "loss": 1.0, "max_steps": 6000, "time": step * 0.5} for step in range(2, 6001)]
    (tmp_path / "training_metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    tracker = ProgressTracker(tmp_path, "lora", total_epochs=2)
    status = tracker.status()
    assert (status["currentStep"], status["progressPercentage"], status["currentEpoch"]) == (6000, 99, 2.0)
    assert status["evalMetrics"] == {"eval_loss": 2.5} and len(tracker._raw) <= 2000
    assert tracker.finish()["progressPercentage"] == 100


def test_settings_are_checked_with_the_rule_and_the_value():
    progress.check_settings(28080, 30)
    with pytest.raises(ValueError, match=r"progress_metrics_port=80: must be an integer in \[1024, 65535\]"):
        progress.check_settings(80, 30)
    with pytest.raises(ValueError, match=r"progress_poll_interval_seconds=301"):
        progress.check_settings(28080, 301)


def test_the_trainer_status_annotation_wins_over_the_status_field():
    odh = {"currentStep": 3, "totalSteps": 6, "trainMetrics": {"loss": 0.5}, "progressPercentage": 50}
    job = {
        "metadata": {"annotations": {cluster_progress.TRAINER_STATUS_ANNOTATION: json.dumps(odh)}},
        "status": {"trainerStatus": {"progressPercentage": 10}},
    }
    assert cluster_progress.trainer_status(job) == odh
    assert cluster_progress.status_record(odh)["step"] == 3 and cluster_progress.status_record(odh)["percent"] == 50
    job["metadata"]["annotations"][cluster_progress.TRAINER_STATUS_ANNOTATION] = "not json"
    assert cluster_progress.trainer_status(job) == {"progressPercentage": 10}
    assert cluster_progress.status_record({"progressPercentage": 10}) == {}


# -- resume from the newest complete checkpoint --------------------------------------------------------------------
def _make(path: Path, *files: str) -> None:
    path.mkdir(parents=True)
    for name in files:
        (path / name).write_text("x")


def test_resume_picks_the_newest_complete_checkpoint_of_each_layout(tmp_path):
    _make(tmp_path / "osft/full_state_checkpoints/step_40", "training_state.pt")
    _make(tmp_path / "osft/full_state_checkpoints/step_120", "training_state.pt")
    _make(tmp_path / "osft/full_state_checkpoints/step_160")  # being written when the pod stopped
    kwargs, message = checkpoints.resume_kwargs("osft", tmp_path / "osft", resume=True)
    assert kwargs == {"resume_from_full_state_checkpoint": str(tmp_path / "osft/full_state_checkpoints/step_120")}
    assert "step_120" in message
    assert checkpoints.resume_kwargs("osft", tmp_path / "osft", resume=False) == ({}, "")
    _make(tmp_path / "lora/checkpoint-8", "trainer_state.json")
    _make(tmp_path / "lora/checkpoint-12", "trainer_state.json", checkpoints.HF_INCOMPLETE_MARKER)
    assert checkpoints.newest_complete_checkpoint("lora", tmp_path / "lora") == tmp_path / "lora/checkpoint-8"
    kwargs, message = checkpoints.resume_kwargs("lora", tmp_path / "lora", resume=True)
    assert kwargs == {} and "takes no resume argument" in message
    _make(tmp_path / "sft/full_state/epoch_1", "model.safetensors")
    _make(tmp_path / "sft/full_state/epoch_2", "model.safetensors")
    kwargs, message = checkpoints.resume_kwargs("sft", tmp_path / "sft", resume=True)
    assert kwargs == {} and "epoch_2" in message
    assert checkpoints.resume_kwargs("sft", tmp_path / "nothing", resume=True) == ({}, "")
    # The keyword exists where it is passed: mini-trainer's TrainingArgs (OSFT's **kwargs).
    from components.training.finetuning.tests.training_hub_keywords import backend_keywords

    assert "resume_from_full_state_checkpoint" in backend_keywords("osft")


def test_the_pods_get_progress_jit_and_mlflow_settings_but_never_credentials(mlflow_server, tmp_path):
    from components.training.finetuning.tracking import MlflowLogger

    def plan(**arguments):
        request = train_model_request(training_base_model="m", **arguments)
        config = request.training
        return RunPlan(request, config, tmp_path / "d.jsonl", None, None, "run-9", "train-model", tmp_path)

    log = []
    with MlflowLogger(mlflow_server, experiment_name="pods", log=log.append) as tracker:
        settings = launch.pod_settings(
            plan(training_progress_metrics_port=29001, training_jit_checkpoint=False), tracker, log.append
        )
    assert settings == launch.PodSettings(
        progress=ProgressSettings(enabled=True, port=29001, termination_log=contract.TERMINATION_LOG),
        jit_checkpoint=False,
        mlflow=MlflowSettings(
            tracking_uri=mlflow_server,
            experiment_name="pods",
            run_name=f"{job_name('run-9', 'train-model')}-training-hub",
        ),
    )
    with_password = mlflow_server.replace("http://", "http://alice:s3cret@")
    with MlflowLogger(with_password, experiment_name="pods", log=log.append) as tracker:
        settings = launch.pod_settings(plan(training_progress_tracking=False), tracker, log.append)
    assert settings.mlflow == MlflowSettings("", "", "") and settings.progress.enabled is False
    assert "not handing it to Training Hub" in "\n".join(log) and "s3cret" not in "\n".join(log)


def test_the_step_total_is_the_runs_own(tmp_path):
    """Rows / batch x epochs before a step, then the backend's steps per epoch x epochs; else max_steps."""
    data = tmp_path / "train.jsonl"
    data.write_text('{"messages": []}\n' * 40)
    tracker = ProgressTracker(tmp_path, "osft", total_epochs=2, effective_batch_size=8, dataset_path=str(data))
    assert tracker.status()["totalSteps"] == 10 and tracker.status()["progressPercentage"] == 0
    line = {"step": 3, "epoch": 0, "steps_per_epoch": 6, "loss": 1.0, "lr": 1e-5, "time_per_batch": 0.5}
    (tmp_path / "training_metrics_0.jsonl").write_text(json.dumps(line) + "\n")
    status = tracker.status()
    assert (status["totalSteps"], status["progressPercentage"], status["currentEpoch"]) == (12, 25, 0.5)
    limited = ProgressTracker(tmp_path, "osft", total_epochs=2, max_steps=4, dataset_path=str(data))
    assert limited.status()["totalSteps"] == 4 and limited.status()["progressPercentage"] == 75


def test_training_hubs_callbacks_lack_the_step_total_so_progress_follows_the_metrics_file(tmp_path):
    """A ``TrainingHubCallback``'s context, built by Training Hub's own adapters (0.11.2; 0.9.8's alike): SFT's lacks
    the steps per epoch, gradient norm and throughput, LoRA's ``max_steps`` (and its epoch is a whole number). Fails
    once they are there: then a callback can replace the file readers (component README, "Progress records")."""
    from instructlab.training.callbacks import TrainingContext
    from training_hub import TrainingHubCallback
    from training_hub.adapters.distributed import build_hub_context_from_native
    from training_hub.adapters.unsloth import UnslothCallbackAdapter
    from transformers import TrainerControl, TrainerState, TrainingArguments

    native = TrainingContext(step=3, loss=1.3, learning_rate=1e-5, grad_norm=1.5, overall_throughput=12.5)
    native.batch_metrics = {"total_samples": 16, "total_length": 1000, "num_loss_counted_tokens": 400}  # main_ds.py
    sft = build_hub_context_from_native(native)
    assert {*vars(sft), *sft.metrics} & {"num_epoch_steps", "total_steps", "grad_norm", "overall_throughput"} == set()
    seen = []
    recorder = type("Recorder", (TrainingHubCallback,), {"on_log": lambda self, context: seen.append(context)})
    state = TrainerState(max_steps=4, is_world_process_zero=True, global_step=1, epoch=0.5)
    args = TrainingArguments(output_dir=str(tmp_path), report_to="none")
    UnslothCallbackAdapter(recorder()).on_log(args, state, TrainerControl(), logs={"loss": 2.0, "learning_rate": 1e-4})
    assert {*vars(seen[0]), *seen[0].metrics} & {"max_steps", "total_steps"} == set() and seen[0].epoch == 0
