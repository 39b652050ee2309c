"""``train_model``'s ``Model`` artifact (a manifest of the weights on the workspace, the opt-in copy, the local
launcher's files) and the base model handed to the pods (an earlier step's copy: ``test_base_model.py``)."""

from __future__ import annotations

from pathlib import Path

from kfp import dsl

from components._common.model_location import MANIFEST_FILE, read_manifest, resolve_model_dir
from components.training.finetuning.plan import LauncherRun, RunPlan
from components.training.finetuning.publish import publish_outputs
from components.training.finetuning.staging import stage_base_model as stage_for_the_pods
from tests.harness.requests import train_model_request


def plan_for(tmp_path: Path, launcher: str = "trainjob", **arguments) -> RunPlan:
    request = train_model_request(**{"training_base_model": "org/model", "training_launcher": launcher, **arguments})
    return RunPlan(
        request=request,
        config=request.training,
        data_file=tmp_path / "train.jsonl",
        eval_file=None,
        task_config=None,
        run_id="run-1",
        task_name="train-model",
        workspace=tmp_path / "ws",
    )


def _checkpoint(tmp_path: Path) -> Path:
    final = tmp_path / "ws" / "train_model" / "train-model-1" / "checkpoints" / "final"
    final.mkdir(parents=True)
    (final / "config.json").write_text('{"model_type": "llama"}')
    (final / "model.safetensors").write_bytes(b"\0" * 4096)
    return final


def _publish(tmp_path: Path, plan: RunPlan, final: Path, launcher: str):
    out = {n: c(uri=str(tmp_path / "out" / n)) for n, c in (("model", dsl.Model), ("m", dsl.Metrics), ("r", dsl.HTML))}
    trained = LauncherRun(final, [{"step": 1, "loss": 1.0, "time": 1.0}], 1.0, "tj-1", launcher=launcher)
    outcome = publish_outputs(plan, trained, out["model"], out["m"], out["r"], {}, None)
    return outcome, out["model"]


def test_the_opt_in_copy_puts_the_files_beside_the_manifest(tmp_path):
    final = _checkpoint(tmp_path)
    outcome, model = _publish(tmp_path, plan_for(tmp_path, training_copy_model_to_artifact=True), final, "trainjob")
    names = sorted(p.name for p in Path(model.path).iterdir())
    assert names == sorted(["config.json", "model.safetensors", MANIFEST_FILE])
    assert (Path(model.path) / "model.safetensors").read_bytes() == (final / "model.safetensors").read_bytes()
    manifest = read_manifest(model.path)
    assert manifest.in_artifact and manifest.storage == "workspace" and manifest.weights_path == str(final)
    assert model.metadata["weights_in_artifact"] is True and outcome.model_dir == final
    assert resolve_model_dir(model.path) == final  # read in place while the workspace lives


def test_the_local_launcher_keeps_its_model_in_the_artifact(tmp_path):
    final = _checkpoint(tmp_path)
    outcome, model = _publish(tmp_path, plan_for(tmp_path, launcher="local"), final, "local")
    assert read_manifest(model.path).storage == "artifact" and model.metadata["weights_path"] == ""
    assert outcome.model_dir == Path(model.path) == resolve_model_dir(model.path)
    assert (Path(model.path) / "model.safetensors").is_file()


def test_without_a_staged_copy_the_pods_resolve_the_base_model(tmp_path):
    assert stage_for_the_pods(plan_for(tmp_path), log=lambda _: None) == (None, {})
