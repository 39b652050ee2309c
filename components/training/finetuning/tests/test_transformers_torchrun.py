"""``training_backend="transformers"`` for real: the staged pod command under real ``torchrun`` (gloo, CPU).

Two "pods" (``PET_*`` as Kubeflow Trainer's torch runtime sets them) run the TrainJob's command with only the staged
tree importable; the first run is paused (SIGTERM) mid-training, the second resumes and finishes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from components.training.finetuning import job_from_request
from components.training.finetuning.contract import ProgressSettings
from components.training.finetuning.pod import metrics as metrics_module
from components.training.finetuning.run import write_run_config
from components.training.finetuning.tests.test_progress_server import get_progress
from tests.harness.http_server import free_port
from tests.harness.requests import pod_settings, train_model_request, training_config

pytestmark = pytest.mark.slow

MAX_STEPS = 24
SETTINGS = {
    "effective_batch_size": 16,
    "learning_rate": 3e-3,
    "max_seq_len": 256,
    "max_tokens_per_gpu": 1024,
    "lr_scheduler": "constant",
    "max_steps": MAX_STEPS,
    "num_epochs": 1,
    "backend": "transformers",
}


def job_manifest(config_path: Path, **arguments) -> dict:
    """The TrainJob ``train_model`` submits for a staged run of the transformers backend."""
    request = train_model_request(training_backend="transformers", training_namespace="team-a", **arguments)
    return job_from_request.build_job_manifest("trainjob", config_path, None, "run-1", "train-model", request, None)


def _pod_env(node_rank: int, master_port: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(extra or {})
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        PET_NNODES="2",
        PET_NPROC_PER_NODE="1",
        PET_NODE_RANK=str(node_rank),
        PET_MASTER_ADDR="127.0.0.1",
        PET_MASTER_PORT=str(master_port),
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def _start_pods(
    command: list[str], cwd: Path, logs: Path, attempt: str, extra_env: dict[str, str] | None = None
) -> list[tuple[subprocess.Popen, Path]]:
    port = free_port()
    pods = []
    for rank in (0, 1):
        log = logs / f"{attempt}-node{rank}.log"
        handle = log.open("w")
        env = _pod_env(rank, port, extra_env)
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT)
        handle.close()
        pods.append((process, log))
    return pods


def _wait(pods, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    codes = []
    for process, log in pods:
        try:
            codes.append(process.wait(timeout=max(deadline - time.monotonic(), 1)))
        except subprocess.TimeoutExpired:
            for other, _ in pods:
                other.kill()
            pytest.fail(f"the pod command did not end in {timeout}s:\n{log.read_text()[-3000:]}")
    return codes


@pytest.fixture
def staged_job(tiny_model_dir, demo_dataset_path, tmp_path):
    """The run directory as ``train_model`` stages it for this backend, and the TrainJob that runs it."""
    run_dir = tmp_path / "workspace" / "train_model" / "run-1-train-model"
    run_dir.mkdir(parents=True)
    config = training_config(base_model=str(tiny_model_dir), **SETTINGS)
    progress_port = free_port()
    termination_log = tmp_path / "termination-log"
    termination_log.write_text("")
    settings = pod_settings(
        progress=ProgressSettings(enabled=True, port=progress_port, termination_log=str(termination_log))
    )
    config_path = write_run_config(config, run_dir, demo_dataset_path, None, None, 1, settings)
    manifest = job_manifest(config_path, training_num_nodes=2, training_gpus_per_node=0)
    return run_dir, manifest, progress_port, termination_log


@pytest.fixture
def status_endpoint(tmp_path):
    """Kubeflow Trainer's status endpoint (``TrainJobRuntimeStatus``), as the controller injects it into every pod."""
    from components.training.finetuning.tests.test_kubeflow_status import StatusEndpoint

    server = StatusEndpoint(tmp_path / "tls")
    yield server
    server.close()


def test_two_nodes_train_pause_and_resume_under_torchrun(staged_job, status_endpoint, tmp_path):
    run_dir, manifest, progress_port, termination_log = staged_job
    status_env = status_endpoint.env(tmp_path / "sa-token")
    trainer = manifest["spec"]["trainer"]
    assert manifest["spec"]["runtimeRef"]["name"] == "torch-distributed"
    command = [*trainer["command"], *trainer["args"]]
    ckpt_dir = run_dir / "checkpoints"
    cwd = tmp_path / "pod-cwd"
    cwd.mkdir()

    # Run 1: paused (SIGTERM to both pods) while the progress server reports training.
    pods = _start_pods(command, cwd, tmp_path, "first", status_env)
    deadline, seen = time.monotonic() + 90, None
    while time.monotonic() < deadline and all(process.poll() is None for process, _ in pods):
        seen = get_progress(progress_port)
        if seen and seen.get("currentStep", 0) >= 3:
            break
        time.sleep(0.05)
    assert seen and seen["currentStep"] >= 3, [log.read_text()[-2000:] for _, log in pods]
    assert seen["totalSteps"] == MAX_STEPS and 0 < seen["progressPercentage"] < 100
    assert seen["trainMetrics"]["loss"] > 0
    for process, _ in pods:
        process.send_signal(signal.SIGTERM)
    _wait(pods, 60)
    first_log = pods[0][1].read_text()
    assert "SIGTERM: checkpoint saved" in first_log, first_log[-3000:]
    checkpoints = sorted((ckpt_dir / "checkpoints").glob("step_*"))
    assert len(checkpoints) == 1, first_log[-3000:]
    paused_at = json.loads((checkpoints[0] / "done.json").read_text())["step"]
    assert 3 <= paused_at < MAX_STEPS
    assert not (ckpt_dir / "final").exists()

    # Run 2: the resumed job continues at the next step and finishes.
    pods = _start_pods(command, cwd, tmp_path, "second", status_env)
    codes = _wait(pods, 120)
    node0, node1 = (log.read_text() for _, log in pods)
    assert codes == [0, 0], node0[-3000:] + node1[-3000:]
    assert f"step {paused_at})" in node0 and "resuming from" in node0
    assert f"step {paused_at + 1}/{MAX_STEPS}" in node0
    # Rank 0 alone writes: each step once in the metrics, the model saved once, no step lines from node 1.
    records = metrics_module.read_metrics(ckpt_dir / "metrics.jsonl")
    assert [record["step"] for record in records] == list(range(1, MAX_STEPS + 1))
    assert "saved the final model" in node0 and "saved the final model" not in node1
    assert f"/{MAX_STEPS} epoch" not in node1
    losses = [record["loss"] for record in records]
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 * 0.8, losses
    # The checkpoint loads with transformers; the progress reached 100 %; the result is there for train_model.
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(ckpt_dir / "final")
    assert model.config.model_type == "llama"
    assert json.loads(termination_log.read_text())["progressPercentage"] == 100
    # Upstream Kubeflow Trainer's status.trainerStatus: rank 0 posted the progress, the last one final.
    final = status_endpoint.bodies[-1]["trainerStatus"]
    metrics = {metric["name"]: metric["value"] for metric in final["metrics"]}
    assert final["progressPercentage"] == 100, status_endpoint.bodies
    assert (metrics["current_step"], metrics["total_steps"]) == (str(MAX_STEPS), str(MAX_STEPS))
    assert status_endpoint.rejected == 0
    result = json.loads((ckpt_dir / "result.json").read_text())
    assert result["resumed_from"].endswith(checkpoints[0].name)


@pytest.mark.parametrize(("algorithm", "sharding"), [("osft", "FULL_SHARD"), ("sft", "HYBRID_SHARD")])
def test_two_ranks_make_the_same_steps_as_one_process(algorithm, sharding, tiny_model_dir, demo_dataset_path, tmp_path):
    """Two CPU nodes (DDP) make the same steps as the in-process trainer, each accumulating two one-sample batches.

    OSFT's projections of a replicated model must not be summed over the ranks (mini-trainer's are).
    """
    from components.training.finetuning.local.trainer import train_locally

    # The demo's longest sample has 39 tokens: a budget of 40 makes micro-batches of one sample.
    settings = {**SETTINGS, "effective_batch_size": 4, "max_seq_len": 40, "max_tokens_per_gpu": 40, "max_steps": 4}
    config = training_config(
        base_model=str(tiny_model_dir), algorithm=algorithm, fsdp_sharding_strategy=sharding, **settings
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config_path = write_run_config(config, run_dir, demo_dataset_path, None, None, 1, pod_settings())
    trainer = job_manifest(config_path)
    cwd = tmp_path / "pod-cwd"
    cwd.mkdir()
    pods = _start_pods(
        [*trainer["spec"]["trainer"]["command"], *trainer["spec"]["trainer"]["args"]], cwd, tmp_path, "dp"
    )
    alone = train_locally(config, demo_dataset_path, tmp_path / "alone", log=lambda line: None)  # while they start
    codes = _wait(pods, 120)
    node0 = pods[0][1].read_text()
    assert codes == [0, 0], node0[-3000:]
    assert "data-parallel over 2 process(es): DDP (every process holds the model)" in node0
    records = metrics_module.read_metrics(run_dir / "checkpoints" / "metrics.jsonl")
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    expected = [r["loss"] for r in alone.records]
    assert [r["loss"] for r in records] == pytest.approx(expected, rel=1e-5)
