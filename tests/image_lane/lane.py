"""The image lane: the four steps' compiled commands run inside the built step image against servers on 127.0.0.1.

    python -m tests.image_lane.lane --image localhost/kfp-finetune:lane --work DIR

1. ``KFP_FINETUNE_IMAGE=<image> KFP_FINETUNE_EVAL_IMAGE=<image> kfp-finetune compile sft``: every step on the image;
   the lane checks each executor names the image and carries no embedded archive and no ``pip install``.
2. ``dataset_download`` on the shipped demo dataset (a local file): train and eval JSONL written.
3. ``train_model`` with ``training_launcher=trainjob`` against the Kubernetes emulator (kmock, ``tests/harness``): a
   TrainJob created with the run's labels; this driver plays the cluster (runs the TrainJob's pod command on the host
   with a stand-in for Training Hub, then marks the job Complete); the model artifact is read back from the workspace.
4. ``lm_eval`` on that (tiny) model on CPU with the held-out split: results JSON and metrics written.
5. ``model_registry`` against the Model Registry stub (``tests/harness``): the model and its version registered.
6. A dependency missing from the image fails the lane: ``msgspec`` (the dataset step's chat-format decoder) is
   uninstalled from the working container and the dataset step must fail naming it.

Each step's output is in ``DIR/logs/<step>.log``. Exit 0 when every check holds, 1 with one line naming the first
that does not.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from tests.image_lane.container import WorkingContainer
from tests.image_lane.steps import RUN_ID, compiled_steps, outputs, resolved_command, typed

REPO_ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "image-lane"
DEMO_DATASET = REPO_ROOT / "pipelines" / "demo" / "data" / "demo_chat.jsonl"
#: The package the missing-dependency check removes, and the error the dataset step must then end with.
REMOVED_PACKAGE, MISSING_MODULE_ERROR = "msgspec", "No module named 'msgspec'"

FAKE_TRAINING_HUB = '''
"""Stands in for Training Hub in the lane's "pod": writes what the real backends write (checkpoint, metrics)."""
import json, shutil
from pathlib import Path

def _record(kwargs):
    out = Path(kwargs["ckpt_output_dir"])
    shutil.copytree(kwargs["model_path"], out / "hf_format" / "samples_64.0")
    with open(out / "training_metrics_0.jsonl", "w") as handle:
        for step, loss in enumerate([2.0, 1.5, 1.25, 1.4], start=1):
            handle.write(json.dumps({"step": step, "epoch": 0, "steps_per_epoch": 4, "lr": 1e-5, "loss": loss,
                                     "tokens_per_second": 1000.0 * step, "time_per_batch": 0.5}) + "\\n")

def sft(**kwargs): _record(kwargs)
def osft(**kwargs): _record(kwargs)
def lora_sft(**kwargs): _record(kwargs)
'''


class LaneFailure(Exception):
    """A check of the lane does not hold; the message is the one line to print."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise LaneFailure(message)


def compile_pipeline(image: str, work: Path) -> Path:
    """``sft`` compiled with every step on ``image`` (KFP_FINETUNE_IMAGE, KFP_FINETUNE_EVAL_IMAGE), no image check."""
    target = work / "sft.yaml"
    env = {
        **os.environ,
        "KFP_FINETUNE_IMAGE": image,
        "KFP_FINETUNE_EVAL_IMAGE": image,
        "KFP_FINETUNE_NO_IMAGE_CHECK": "1",
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "compile", "sft", "-o", str(target), "--eval-gpus", "0"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    _check(done.returncode == 0, f"compile failed: {done.stderr.strip().splitlines()[-1:]}")
    return target


class Lane:
    """The lane's state: the working container, the folders, the servers' addresses and each step's outputs."""

    def __init__(self, container: WorkingContainer, work: Path, steps: dict[str, Any]) -> None:
        self.container, self.work, self.steps = container, work, steps
        self.root = work / "pipeline-root"
        self.workspace = work / "workspace"
        self.results: dict[str, dict[str, Any]] = {}
        self.timings: dict[str, float] = {}
        self.env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}

    def run_step(self, name: str, arguments: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
        """Runs step ``name``'s compiled command in the container; its outputs, or LaneFailure naming the error."""
        step = self.steps[name]
        command, task_root = resolved_command(step, arguments, self.root)
        _make_writable(self.work)
        started = time.monotonic()
        finished = self.container.run(
            command, env={**self.env, **(env or {})}, mounts=[self.work], log=self.work / "logs" / f"{name}.log"
        )
        self.timings[name] = time.monotonic() - started
        _check(
            finished.returncode == 0,
            f"{name} failed inside the image (exit {finished.returncode}): {finished.last_error()} "
            f"(full output: {self.work / 'logs' / f'{name}.log'})",
        )
        self.results[name] = outputs(task_root)
        return self.results[name]


def _make_writable(folder: Path) -> None:
    """The image runs as uid 1001 (as OpenShift runs a random uid): the mounted folders must be writable by it."""
    subprocess.run(["chmod", "-R", "a+rwX", str(folder)], check=True, timeout=120)


def dataset_step(lane: Lane) -> None:
    result = lane.run_step("dataset-download", {"dataset_uri": str(lane.work / "data" / "demo_chat.jsonl")})
    train, evaluation = (Path(result["artifacts"][key].uri) for key in ("train_dataset", "eval_dataset"))
    rows = [json.loads(line) for line in _jsonl_file(train).read_text().splitlines()]
    valid = len(rows) > 100 and all("messages" in row for row in rows)
    _check(valid, f"dataset-download: train JSONL {train}: {len(rows)} rows, expected > 100 chat rows")
    _check(_jsonl_file(evaluation).stat().st_size > 0, f"dataset-download: eval JSONL {evaluation} is empty")


def _jsonl_file(path: Path) -> Path:
    return path if path.is_file() else next(path.glob("*.jsonl"))


def _play_the_cluster(kube_api: Any, lane: Lane, seen: dict[str, Any]) -> None:
    """Waits for the TrainJob, runs its pod command on the host with the stand-in Training Hub, marks it Complete."""
    from tests.harness.kube import condition

    job = kube_api.wait_for(lambda: kube_api.objects("trainjobs", NAMESPACE), timeout=300)[0]
    seen["job"] = job
    hub = lane.work / "fake-hub"
    (hub / "training_hub").mkdir(parents=True, exist_ok=True)
    (hub / "training_hub" / "__init__.py").write_text(textwrap.dedent(FAKE_TRAINING_HUB))
    trainer = job["spec"]["trainer"]
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(hub), "PET_NNODES": "1", "PET_NPROC_PER_NODE": "1"}
    env.update({"PET_NODE_RANK": "0", "PET_MASTER_ADDR": "localhost", "PET_MASTER_PORT": "29500"})
    command = [sys.executable if trainer["command"][0] == "python" else trainer["command"][0], *trainer["command"][1:]]
    pod = subprocess.run([*command, *trainer.get("args", [])], env=env, capture_output=True, text=True, timeout=120)
    (lane.work / "logs" / "training-pod.log").write_text(pod.stdout + pod.stderr)
    _make_writable(lane.workspace)
    condition_type = "Complete" if pod.returncode == 0 else "Failed"
    kube_api.set_trainjob_status(NAMESPACE, job["metadata"]["name"], {"conditions": [condition(condition_type)]})


def train_step(lane: Lane, base_model: Path) -> None:
    from components.training.finetuning.manifests.names import RUN_ID_LABEL, TASK_NAME_LABEL
    from tests.harness.kube import running_kube_api

    dataset = lane.results["dataset-download"]["artifacts"]
    task_config = {
        "volumes": [{"name": "workspace", "persistentVolumeClaim": {"claimName": "image-lane-ws"}}],
        "volumeMounts": [{"name": "workspace", "mountPath": str(lane.workspace)}],
    }
    arguments = {
        "dataset": typed(dataset["train_dataset"], "Dataset"),
        "eval_dataset": typed(dataset["eval_dataset"], "Dataset"),
        "training_base_model": str(base_model),
        "training_algorithm": "sft",
        "training_launcher": "trainjob",
        "training_namespace": NAMESPACE,
        "pvc_path": str(lane.workspace),
        "task_config": task_config,
        "run_id": RUN_ID,
        "task_name": "train-model",
    }
    seen: dict[str, Any] = {}
    with running_kube_api() as kube_api:
        kube_api.track_metadata("trainjobs")
        kube_api.create_runtime("training-hub")
        env = {"KUBERNETES_SERVER_URL": kube_api.url, "KUBERNETES_AUTH_TOKEN": "image-lane-token"}
        with kube_api.in_background(lambda: _play_the_cluster(kube_api, lane, seen)):
            result = lane.run_step("train-model", arguments, env)
        jobs = kube_api.objects("trainjobs", NAMESPACE)
    _check(len(jobs) == 1, f"train-model: {len(jobs)} TrainJobs in the emulator, expected 1")
    job = jobs[0]
    labels = job["metadata"].get("labels") or {}
    expected = {RUN_ID_LABEL: RUN_ID, TASK_NAME_LABEL: "train-model"}
    _check(
        all(labels.get(key) == value for key, value in expected.items()),
        f"train-model: the TrainJob's labels {labels} do not tie it to the run and task {expected}",
    )
    _check(bool(job["metadata"].get("uid")), "train-model: the TrainJob has no uid (not created by the API server)")
    _check(job["spec"]["runtimeRef"]["name"] == "training-hub", f"train-model: runtimeRef {job['spec']['runtimeRef']}")
    model = result["artifacts"]["output_model"]
    _check(
        model.metadata.get("job_name") == job["metadata"]["name"],
        f"train-model: model metadata job_name {model.metadata.get('job_name')!r} is not the TrainJob's",
    )
    from components._common.model_location import resolve_model_dir

    weights = resolve_model_dir(model.uri)  # the artifact holds the manifest; the weights stay on the workspace
    _check(
        lane.workspace in weights.parents and (weights / "config.json").is_file(),
        f"train-model: the model artifact {model.uri} does not point at weights on the workspace ({weights})",
    )


def eval_step(lane: Lane) -> None:
    model = lane.results["train-model"]["artifacts"]["output_model"]
    arguments = {
        "model": typed(model, "Model"),
        "eval_dataset": typed(lane.results["dataset-download"]["artifacts"]["eval_dataset"], "Dataset"),
        "pvc_path": str(lane.workspace),  # read the weights in place, as the pipeline's task does
        "max_samples": 6,
        "max_new_tokens": 12,
        "batch_size": "8",
        "bootstrap_iters": 100,
        "device": "cpu",
    }
    result = lane.run_step("lm-eval", arguments, {"OMP_NUM_THREADS": "1"})
    results = json.loads(_file_of(Path(result["artifacts"]["results"].uri)).read_text())
    _check(
        any(task.startswith("heldout") for task in results.get("results", {})),
        f"lm-eval: no held-out task in the results JSON (tasks: {sorted(results.get('results', {}))})",
    )
    _check(result["artifacts"]["metrics"].metadata, "lm-eval: the Metrics artifact carries no metric")


def _file_of(path: Path) -> Path:
    return path if path.is_file() else next(p for p in path.rglob("*") if p.is_file())


def registry_step(lane: Lane) -> None:
    from tests.harness.registry_stub import start_registry_stub, stop_registry_stub

    stub = start_registry_stub()
    try:
        arguments = {
            "model": typed(lane.results["train-model"]["artifacts"]["output_model"], "Model"),
            "eval_metrics": typed(lane.results["lm-eval"]["artifacts"]["metrics"], "Metrics"),
            "eval_results": typed(lane.results["lm-eval"]["artifacts"]["results"], "Artifact"),
            "registry_address": stub.address,
            "registry_port": stub.port,
            "is_secure": False,
            "model_name": "image-lane-tiny",
            "model_version": "1",
            "model_uri": "pvc://models/image-lane-tiny/1",  # a claim of the user's own: registered as given
            "pvc_path": str(lane.workspace),
            "pipeline_run_id": RUN_ID,
        }
        result = lane.run_step("model-registry", arguments)
        versions = stub.versions_of("image-lane-tiny")
        errors = list(stub.errors)
    finally:
        stop_registry_stub(stub)
    _check(not errors, f"model-registry: the stub saw requests that break the API spec: {errors[:1]}")
    _check(
        [version["name"] for version in versions] == ["1"],
        f"model-registry: versions in the stub {[v['name'] for v in versions]}, expected ['1']",
    )
    status = result["parameters"].get("status")
    _check(status == "registered", f"model-registry: status {status!r}, expected 'registered'")


def missing_dependency_fails(lane: Lane) -> str:
    """Removes :data:`REMOVED_PACKAGE` from the container; the dataset step must then fail naming it."""
    removed = lane.container.run(["python3", "-m", "pip", "uninstall", "-y", "-q", REMOVED_PACKAGE], user="0")
    _check(removed.returncode == 0, f"could not uninstall {REMOVED_PACKAGE}: {removed.last_error()}")
    try:
        lane.run_step("dataset-download", {"dataset_uri": str(lane.work / "data" / "demo_chat.jsonl")})
    except LaneFailure as failure:
        _check(MISSING_MODULE_ERROR in str(failure), f"without {REMOVED_PACKAGE} the step failed otherwise: {failure}")
        return str(failure)
    raise LaneFailure(f"the dataset step passed without {REMOVED_PACKAGE} in the image: the check cannot fail")


def check_compiled(steps: dict[str, Any], image: str, pipeline_yaml: Path) -> None:
    """Every executor runs on ``image`` with nothing embedded and nothing installed at start."""
    text = pipeline_yaml.read_text()
    for name, step in steps.items():
        _check(step.image == image, f"compile: {name} runs on {step.image}, not on {image}")
    _check("__KFP_EMBEDDED_ARCHIVE_B64" not in text, "compile: an executor embeds its code")
    _check("pip install" not in text, "compile: an executor pip-installs at start")


#: The README's name of each step's timing figure (``lane.step.<name>_seconds``).
STEP_FIGURES = {
    "dataset-download": "dataset",
    "train-model": "launcher",
    "lm-eval": "lm_eval",
    "model-registry": "registry",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", required=True, help="the built step image (local container storage)")
    parser.add_argument("--work", type=Path, required=True, help="a fresh folder for the lane's files")
    args = parser.parse_args(argv)
    from pipelines.demo.tiny_model import build_tiny_model

    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    for folder in ("logs", "data", "workspace", "pipeline-root"):
        (work / folder).mkdir(parents=True)
    shutil.copyfile(DEMO_DATASET, work / "data" / "demo_chat.jsonl")
    started = time.monotonic()
    try:
        pipeline_yaml = compile_pipeline(args.image, work)
        steps = compiled_steps(pipeline_yaml)
        check_compiled(steps, args.image, pipeline_yaml)
        base_model = build_tiny_model(work / "base-model")
        prepared = time.monotonic()
        with WorkingContainer(args.image, "kfp-finetune-image-lane") as container:
            print(
                f"image lane: compiled, tiny model built in {prepared - started:.0f}s; working container in "
                f"{time.monotonic() - prepared:.0f}s",
                file=sys.stderr,
            )
            lane = Lane(container, work, steps)
            dataset_step(lane)
            train_step(lane, base_model)
            eval_step(lane)
            registry_step(lane)
            timings = dict(lane.timings)
            failure = missing_dependency_fails(lane)
    except LaneFailure as error:
        print(f"image lane: FAILED: {error}", file=sys.stderr)
        return 1
    steps_line = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in timings.items())
    print(f"image lane: the four steps ran in {args.image}: {steps_line}", file=sys.stderr)
    print(f"image lane: without {REMOVED_PACKAGE} the lane fails as it must: {failure}", file=sys.stderr)
    print(f"image lane: passed in {time.monotonic() - started:.0f}s", file=sys.stderr)
    if os.environ.get("IMAGE_LANE_FIGURES"):  # the README's step timings (scripts/image_lane/run.sh records the rest)
        from scripts.figures import figure, record

        record(
            {
                f"lane.step.{STEP_FIGURES[name]}_seconds": figure(round(s, 1), "s", f"{s:.1f}")
                for name, s in timings.items()
            },
            "scripts/image_lane/run.sh",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
