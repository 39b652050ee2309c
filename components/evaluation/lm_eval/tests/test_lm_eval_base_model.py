"""The base model's evaluation downloads a remote base model once into the workspace (``pvc_path``); without a
workspace the source is used as given (and an ``s3://`` one is skipped by ``skip_unusable_model_source``)."""

from __future__ import annotations

from components._common.base_model import model_cache_dir, staged_base_model
from components.evaluation.lm_eval.run import located_model_source
from tests.harness.requests import lm_eval_request


def test_an_s3_base_model_is_staged_on_the_workspace_for_the_later_steps(tmp_path, tiny_model_dir, s3_data_connection):
    client, bucket = s3_data_connection
    for path in tiny_model_dir.iterdir():
        client.upload_file(str(path), bucket, f"base/{path.name}")
    uri, workspace = f"s3://{bucket}/base", tmp_path / "kfp-workspace"
    located = located_model_source(lm_eval_request(model_source=uri, pvc_path=str(workspace)))
    assert located.startswith(str(model_cache_dir(workspace)))
    assert sorted(p.name for p in tiny_model_dir.iterdir()) == sorted(
        p.name for p in model_cache_dir(workspace).glob("s3-*/*")
    )
    staged = staged_base_model(uri, workspace)  # what train_model finds next, without S3
    assert staged is not None and str(staged.path) == located


def test_without_a_workspace_or_for_a_local_path_nothing_is_staged(tmp_path, tiny_model_dir):
    assert located_model_source(lm_eval_request(model_source="s3://b/base")) == "s3://b/base"
    local = str(tiny_model_dir)
    assert located_model_source(lm_eval_request(model_source=local, pvc_path=str(tmp_path))) == local
    assert not model_cache_dir(tmp_path).exists()


def test_a_failed_download_skips_the_base_evaluation_only_when_asked(tmp_path, s3_data_connection):
    import json

    import pytest

    from components._common.base_model import BaseModelError
    from components.evaluation.lm_eval.run import run_lm_eval

    _, bucket = s3_data_connection
    arguments = {"model_source": f"s3://{bucket}/missing", "pvc_path": str(tmp_path / "ws"), "task_names": ["x"]}
    results, report = tmp_path / "results.json", tmp_path / "report.html"
    outcome = run_lm_eval(lm_eval_request(**arguments, skip_unusable_model_source=True), str(results), str(report))
    assert outcome.results_metadata["skipped"].startswith("model_source not staged: model_source='s3://")
    assert json.loads(results.read_text())["skipped"] == outcome.results_metadata["skipped"]
    with pytest.raises(BaseModelError, match="no objects under that S3 prefix"):
        run_lm_eval(lm_eval_request(**arguments), str(tmp_path / "r2.json"), str(tmp_path / "r2.html"))
