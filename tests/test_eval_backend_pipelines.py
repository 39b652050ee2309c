"""The unmodified ``sft`` pipeline on ``kfp.local`` (tiny model, 3 steps, held-out split only, CPU) with
``eval_backend`` lmevaljob and evalhub against the emulated services (``tests/harness``) decides as with ``lm-eval``.

The three runs train the same model (equal ``weights_digest``), so any difference is the backend's. The steps reach the
Kubernetes emulator as a pod reaches its API server; the lm_eval pod mounts the run's workspace from a PVC. Each run is
a child interpreter killed after :data:`RUN_TIMEOUT_S`; the three run at once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from components.deployment.kubeflow_model_registry.gates import evaluate_delta_gate
from pipelines.demo.demo_data import DEMO_DATASET_PATH
from pipelines.demo.demo_summary import STEP_TASKS
from tests.harness.evalhub_server import running_evalhub
from tests.harness.trustyai_controller import TrustyAIController, step_pod

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[1]
NAMESPACE, CLAIM = "team-a", "sft-run-workspace"
RUN_TIMEOUT_S = 900
#: The arguments on top of the demo's, by step and component argument (the pipeline parameter feeding each is looked
#: up): a short, CPU-only run of the held-out evaluation.
OVERRIDES = {
    ("train", "training_num_epochs"): 1,
    ("train", "training_max_steps"): 3,
    ("eval", "task_names"): [],
    ("eval", "max_samples"): 4,
    ("eval", "max_new_tokens"): 8,
    ("eval", "device"): "cpu",
}
#: Registry gates (metric, min improvement, max regression) decided on each run's comparison, as model_registry does.
GATES = (
    ("heldout_perplexity/token_loss", 0.0, -1.0),
    ("heldout_perplexity/token_loss", 1e6, -1.0),
    ("heldout_generation/chrf", 0.0, 0.0),
)
#: The child interpreter: runs the pipeline on kfp.local and prints the run folder.
RUNNER = """
import json, sys
from kfp import local
from pipelines.compile import pipeline_function
from pipelines.local_pipeline import local_pipeline
root, workspace, arguments = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=root, workspace_root=workspace,
           raise_on_error=True)
local_pipeline(pipeline_function("sft"))(**arguments)
"""


def _arguments(base_model: Path, **eval_arguments) -> dict:
    """The demo's arguments for ``sft``, :data:`OVERRIDES` and ``eval_arguments``, by pipeline parameter."""
    from pipelines.compile import pipeline_function
    from pipelines.demo.run_demo import demo_arguments
    from pipelines.training.finetuning.interface import parameter_feeding

    pipeline = pipeline_function("sft")
    arguments = demo_arguments("sft", base_model, str(DEMO_DATASET_PATH), registry_address="")
    overrides = {**OVERRIDES, **{("eval", name): value for name, value in eval_arguments.items()}}
    for (step, argument), value in overrides.items():
        name = parameter_feeding(pipeline, step, argument)
        assert name is not None, (step, argument)
        arguments[name] = value
    return arguments


def _run_sft(out: Path, base_model: Path, environment: dict[str, str], **eval_arguments) -> dict:
    """Runs the pipeline (bounded); returns ``{task: executor_output.json}`` of the run."""
    root, workspace = out / "kfp-root", out / "kfp-workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    arguments = json.dumps(_arguments(base_model, **eval_arguments))
    env = {
        **os.environ,
        **environment,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TMPDIR": str(out),
    }
    command = [sys.executable, "-c", RUNNER, str(root), str(workspace), arguments]
    process = subprocess.Popen(
        command, cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"the sft pipeline did not end in {RUN_TIMEOUT_S}s: {output[-3000:]}")
    assert process.returncode == 0, output[-5000:]
    [run_dir] = [path for path in root.iterdir() if path.is_dir()]
    return {path.parent.name: json.loads(path.read_text()) for path in run_dir.glob("*/executor_output.json")}


def _metadata(run: dict, task: str, output: str) -> dict:
    return run[task]["artifacts"][output]["artifacts"][0].get("metadata", {})


def _outcome(run: dict) -> dict:
    """What the comparison of a run decided: metrics, changes, verdict, gate decisions, the trained model's digest."""
    results = _metadata(run, STEP_TASKS["eval"], "results")
    comparison = results["comparison"]
    return {
        "metrics": _metadata(run, STEP_TASKS["eval"], "metrics"),
        "base_metrics": _metadata(run, STEP_TASKS["base_eval"], "metrics"),
        "changes": {name: (record["change"], record["beyond_noise"]) for name, record in comparison.items()},
        "verdict": results["verdict"],
        "gates": [evaluate_delta_gate(comparison, *gate, False).passed for gate in GATES],
        "results": results,
        "trained_digest": _metadata(run, STEP_TASKS["train"], "output_model")["weights_digest"],
    }


def _in_cluster(kube_api, run: str, workspace: Path) -> dict[str, str]:
    """Puts the run's lm_eval pod on the emulator; the environment its steps reach the API server with."""
    kube_api.put_pod(step_pod(f"{run}-lm-eval", NAMESPACE, CLAIM, workspace))
    return {
        "KUBERNETES_SERVER_URL": kube_api.url,
        "KUBERNETES_AUTH_TOKEN": "test-token",
        "POD_NAMESPACE": NAMESPACE,
        "KFP_POD_NAME": f"{run}-lm-eval",
        "KFP_FINETUNE_EVAL_POLL_SECONDS": "0.2",
    }


def _same_decisions(reference: dict, remote: dict) -> None:
    assert remote["trained_digest"] == reference["trained_digest"]  # the same trained model
    for key in ("metrics", "base_metrics"):
        assert set(remote[key]) == set(reference[key]), key
        for name, value in reference[key].items():
            assert remote[key][name] == pytest.approx(value, rel=1e-6, abs=1e-9), (key, name)
    assert remote["changes"] == reference["changes"]
    assert remote["verdict"] == reference["verdict"]
    assert remote["gates"] == reference["gates"]


def test_the_sft_pipeline_decides_the_same_on_every_evaluation_backend(tiny_model_dir, kube_api, tmp_path):
    """The three runs at once (each its own child interpreter), each against its own emulated service."""
    kube_api.track_metadata("lmevaljobs")
    workspaces = {name: tmp_path / name / "kfp-workspace" for name in ("lmevaljob", "evalhub")}
    environments = {name: _in_cluster(kube_api, name, workspace) for name, workspace in workspaces.items()}
    with (
        TrustyAIController(kube_api, {CLAIM: workspaces["lmevaljob"]}, timeout=300) as controller,
        running_evalhub({CLAIM: workspaces["evalhub"]}) as evalhub,
        ThreadPoolExecutor(max_workers=3) as pool,
    ):
        runs = [
            pool.submit(_run_sft, tmp_path / "lm-eval", tiny_model_dir, {}),
            pool.submit(
                _run_sft, tmp_path / "lmevaljob", tiny_model_dir, environments["lmevaljob"], eval_backend="lmevaljob"
            ),
            pool.submit(
                _run_sft,
                tmp_path / "evalhub",
                tiny_model_dir,
                environments["evalhub"],
                eval_backend="evalhub",
                evalhub_url=evalhub.url,
            ),
        ]
        reference, lmevaljob, hub = (_outcome(run.result()) for run in runs)
    assert reference["changes"] and "heldout_perplexity/token_loss" in reference["changes"]
    assert "eval_backend" not in reference["results"]  # the in-step default records nothing new

    _same_decisions(reference, lmevaljob)
    assert lmevaljob["results"]["eval_backend"] == "lmevaljob"
    assert lmevaljob["results"]["evaluated_model_digest"] == lmevaljob["trained_digest"]
    assert len(controller.commands) == 2  # the base model's and the fine-tuned model's LMEvalJob
    assert kube_api.objects("lmevaljobs") == []  # eval_cleanup_policy=delete once the results were read

    _same_decisions(reference, hub)
    assert hub["results"]["eval_backend"] == "evalhub" and hub["results"]["evalhub"]["state"] == "completed"
    assert hub["results"]["evaluated_model_digest"] == hub["trained_digest"]
    assert {request.tenant for request in evalhub.requests} == {NAMESPACE}
