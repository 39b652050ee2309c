"""The guide's Quick Start pipeline (OSFT-minimal), unmodified, runs under ``kfp.local`` on a machine without a cluster.

``training_launcher=auto`` picks the local launcher there and says so in one line.
"""

from __future__ import annotations

import pytest

from components.training.finetuning.run import resolve_auto_launcher
from pipelines.compile import pipeline_function
from pipelines.demo.demo_summary import output_types, summarize_run
from tests.harness.requests import train_model_request

NO_CLUSTER_LINE = "training_launcher=auto: no cluster here"


@pytest.mark.slow
def test_unmodified_osft_minimal_runs_under_kfp_local_with_the_local_launcher(quick_start_run):
    """Run by ``tests/conftest.py`` (``_QUICK_START``) in another interpreter of this venv, in the background from the
    first test of ``tests/``, with no ``KUBERNETES_*`` address in its environment."""
    run = quick_start_run.wait()
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-3000:])
    assert run.stdout.count(NO_CLUSTER_LINE) + run.stderr.count(NO_CLUSTER_LINE) == 1
    [run_dir] = [path for path in (quick_start_run.root / "kfp-root").iterdir() if path.is_dir()]
    summary = summarize_run(run_dir, output_types(pipeline_function("osft-minimal").pipeline_spec))
    data = summary["dataset-download"]["metrics"]
    assert (data["train_rows"], data["eval_rows"]) == (54, 6), data
    assert summary["train-model"]["metadata"]["output_model"]["backend"] == "local"
    assert summary["train-model"]["metrics"]["steps"] >= 1
    assert summary["model-registry"]["parameters"]["status"] == "skipped"


def test_auto_launcher_stays_on_the_cluster_when_there_is_one(monkeypatch):
    from kfp import dsl

    lines: list[str] = []
    request = train_model_request(training_base_model="m")
    assert resolve_auto_launcher(request, {}, lines.append).job.launcher == "local"
    assert len(lines) == 1 and lines[0].startswith(NO_CLUSTER_LINE)
    # In a pod, with an API server named, or with the workspace reaching the job's pods: the cluster launchers.
    for environ in ({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, {"KUBERNETES_SERVER_URL": "https://api:6443"}):
        assert resolve_auto_launcher(request, environ, lines.append).job.launcher == "auto"
    workspace = dsl.TaskConfig(volume_mounts=[{"name": "kfp-workspace", "mountPath": "/kfp-workspace"}])
    with_workspace = train_model_request(training_base_model="m", task_config=workspace)
    assert resolve_auto_launcher(with_workspace, {}, lines.append).job.launcher == "auto"
    assert resolve_auto_launcher(request, {}, lines.append, api_client=object()).job.launcher == "auto"
    explicit = train_model_request(training_base_model="m", training_launcher="trainjob")
    assert resolve_auto_launcher(explicit, {}, lines.append) is explicit
    assert len(lines) == 1
