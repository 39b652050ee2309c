"""``eval_backend=lmevaljob`` against the emulated TrustyAI controller (running the real ``lm_eval``): the model read
in place and checked, and each misbehaviour one error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from components._common.model_location import read_manifest
from components.evaluation.lm_eval.tests.test_lm_eval_component import _manifest_artifact, _run, _train
from tests.harness.requests import remote_evaluation
from tests.harness.trustyai_controller import TrustyAIController, step_pod

pytestmark = pytest.mark.slow

NAMESPACE = "team-a"
POD = "lm-eval-pod"
CLAIM = "run-workspace"


@pytest.fixture(scope="module")
def workspace(tiny_model_dir, tmp_path_factory) -> Path:
    """The run's workspace PVC (a local directory): the fine-tuned model where train_model leaves it."""
    root = tmp_path_factory.mktemp("workspace")
    _train(tiny_model_dir, root / "train_model" / "run-1" / "final")
    return root


@pytest.fixture(scope="module")
def model_artifact(workspace, tmp_path_factory) -> Path:
    """train_model's ``Model`` artifact for a cluster job: the manifest of the weights on the workspace (issue 44)."""
    return _manifest_artifact(workspace / "train_model" / "run-1" / "final", tmp_path_factory.mktemp("root") / "model")


def _trained(artifact: Path) -> dict:
    """The ``Model`` artifact's metadata as train_model records it (``weights_digest``...)."""
    return read_manifest(artifact).metadata()


@pytest.fixture
def in_cluster(kube_api, workspace, monkeypatch):
    """The step as it runs in its pod: namespace, pod name, credentials of the emulated API server."""
    kube_api.track_metadata("lmevaljobs")
    kube_api.put_pod(step_pod(POD, NAMESPACE, CLAIM, workspace))
    for name, value in {
        "POD_NAMESPACE": NAMESPACE,
        "KFP_POD_NAME": POD,
        "HOSTNAME": POD,
        "KUBERNETES_SERVER_URL": kube_api.url,
        "KUBERNETES_AUTH_TOKEN": "test-token",
        "KFP_FINETUNE_EVAL_POLL_SECONDS": "0.2",
    }.items():
        monkeypatch.setenv(name, value)
    return kube_api


def test_lmevaljob_backend_reads_the_trained_model_in_place(in_cluster, workspace, model_artifact, tmp_path, capfd):
    """The remote backends' comparison and gates against lm-eval's: ``test_eval_backend_pipelines``."""
    with TrustyAIController(in_cluster, {CLAIM: workspace}) as controller:
        run = _run(tmp_path, model_artifact, metadata=_trained(model_artifact), eval_backend="lmevaljob",
                   pvc_path=str(workspace))  # fmt: skip
    assert run.metrics["heldout_perplexity/token_loss"] > 0 and run.results_metadata["eval_backend"] == "lmevaljob"
    # read in place where train_model left it (no copy under lm_eval/<job>/model), identified by its manifest
    assert run.results_metadata["evaluated_model_location"] == "/opt/app-root/src/hf_home/train_model/run-1/final"
    assert run.results_metadata["evaluated_model_digest"] == _trained(model_artifact)["weights_digest"]
    # the controller ran lm_eval with the held-out tasks from the PVC, offline, as the TrustyAI driver does
    [command] = controller.commands
    assert "--include_path" in command and "heldout_perplexity" in ",".join(command)
    assert in_cluster.objects("lmevaljobs") == []  # cleanup_policy=delete once the results are read
    assert "deleted after reading its results (cleanup_policy=delete)" in "".join(capfd.readouterr())


def test_a_wrong_model_is_refused_in_one_line(in_cluster, workspace, model_artifact, tmp_path):
    """The manifest found is not the trained model's (its digest is not the artifact's ``weights_digest``)."""
    with pytest.raises(ValueError) as refused:
        _run(
            tmp_path,
            model_artifact,
            metadata={**_trained(model_artifact), "weights_digest": "sha256:" + "0" * 64},
            eval_backend="lmevaljob",
            pvc_path=str(workspace),
        )
    message = str(refused.value)
    assert "\n" not in message and "refusing to evaluate" in message and "weights_digest" in message
    assert in_cluster.objects("lmevaljobs") == []  # nothing submitted


def test_changed_weights_on_the_workspace_are_refused_in_one_line(in_cluster, workspace, tmp_path):
    """Weights rewritten since train_model wrote the manifest (issue 44's check) are never submitted."""
    from components._common.model_location import ModelLocationError

    weights = Path(shutil.copytree(workspace / "train_model" / "run-1" / "final", workspace / "train_model" / "x"))
    try:
        artifact = _manifest_artifact(weights, tmp_path / "root" / "model")
        (weights / "config.json").write_text((weights / "config.json").read_text().replace(" ", "\t"))
        with pytest.raises(ModelLocationError) as refused:
            _run(tmp_path / "out", artifact, metadata=_trained(artifact), eval_backend="lmevaljob",
                 pvc_path=str(workspace))  # fmt: skip
    finally:
        shutil.rmtree(weights)
    assert "\n" not in str(refused.value) and "refusing to use changed weights" in str(refused.value)
    assert in_cluster.objects("lmevaljobs") == []  # nothing submitted


def _on_lmevaljob(out: Path, workspace: Path, **params):
    """The fine-tuned weights (a directory on the workspace) evaluated by an LMEvalJob."""
    return _run(
        out, workspace / "train_model" / "run-1" / "final", eval_backend="lmevaljob", pvc_path=str(workspace), **params
    )


@pytest.mark.parametrize(
    ("misbehaviour", "error", "match", "params"),
    [
        ({"results_text": "<html>proxy error</html>"}, "LmEvalJobResultsError", "status.results is not JSON", {}),
        ({"fail_with": "pod OOMKilled"}, "JobFailed", "", {}),
        ({"never_complete": True}, "JobFailed", "timeout_seconds=3", {"eval_timeout_seconds": 3}),
    ],
    ids=["results-not-json", "failed", "never-completes"],
)
def test_a_misbehaving_lmevaljob_is_one_error(in_cluster, workspace, tmp_path, misbehaviour, error, match, params):
    from components.evaluation.lm_eval import lmevaljob_backend
    from components.training.finetuning.cluster import errors

    expected = getattr(lmevaljob_backend, error, None) or getattr(errors, error)
    with TrustyAIController(in_cluster, {CLAIM: workspace}) as controller:
        for name, value in misbehaviour.items():
            setattr(controller, name, value)
        with pytest.raises(expected, match=match):
            _on_lmevaljob(tmp_path, workspace, **params)
    if "never_complete" in misbehaviour:
        assert in_cluster.objects("lmevaljobs") == []  # cleanup_policy=delete after the timeout


def test_a_forbidden_lmevaljob_create_is_one_error(in_cluster, workspace, tmp_path):
    from components.training.finetuning.cluster.errors import JobApiError

    in_cluster.fail("create", "lmevaljobs", status=403)
    with pytest.raises(JobApiError, match="403"):
        _on_lmevaljob(tmp_path, workspace)
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_an_lmevaljob_of_another_model_under_this_name_is_refused_in_one_line(in_cluster, workspace, tmp_path):
    """A job of this run/task that evaluates another model is refused before it is followed (``lifecycle.py``)."""
    from components.evaluation.lm_eval.custom_task import HELDOUT_TASKS
    from components.evaluation.lm_eval.lmevaljob_backend import build_lmevaljob
    from components.evaluation.lm_eval.remote_evaluation import evaluation_name
    from components.training.finetuning.cluster.errors import JobIncomplete
    from components.training.finetuning.manifests.names import ownership_labels

    model = workspace / "train_model" / "run-1" / "final"
    name = evaluation_name(str(model), list(HELDOUT_TASKS))
    evaluation = remote_evaluation(
        name=name,
        namespace=NAMESPACE,
        pvc_name=CLAIM,
        task_names=HELDOUT_TASKS,
        model_relative="train_model/run-0/final",
        batch_size="8",
    )
    other = build_lmevaljob(evaluation, ownership_labels(POD, name))
    in_cluster.custom.create_namespaced_custom_object(
        "trustyai.opendatahub.io", "v1alpha1", NAMESPACE, "lmevaljobs", other
    )
    results = json.dumps({"results": {"heldout_perplexity": {"token_loss,none": 1.0}}})
    status = {"state": "Complete", "reason": "Succeeded", "message": "done", "results": results}
    in_cluster.custom.patch_namespaced_custom_object_status(
        "trustyai.opendatahub.io", "v1alpha1", NAMESPACE, "lmevaljobs", name, {"status": status}
    )
    with pytest.raises(JobIncomplete) as refused:
        _run(tmp_path, model, eval_backend="lmevaljob", pvc_path=str(workspace))
    message = str(refused.value)
    assert "\n" not in message and f"LMEvalJob {NAMESPACE}/{name}" in message
    assert "spec.modelArgs[name=pretrained].value" in message  # the other model's path, not the one sent
    assert not (tmp_path / "results.json").exists()  # nothing written
    assert in_cluster.objects("lmevaljobs") == []  # cleanup_policy=delete
