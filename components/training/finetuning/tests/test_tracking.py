"""MLflow tracking against a real ``mlflow server``, read back with another client (failures: a file store)."""

import shutil
import uuid

import pytest

from components.training.finetuning.tracking import (
    MODEL_LOCATION_TAG,
    RUN_KEY_TAG,
    MlflowLogger,
    TrackingError,
    is_rank_zero,
    mask_uri,
    step_metrics,
)
from tests.harness.follow_doubles import Log


def _records(first, last, total):
    return [
        {
            "step": step,
            "epoch": step / total,
            "loss": 2.0 / step,
            "lr": 1e-4 * (1 - step / total),
            "tokens_per_second": 1000.0 + step,
            "time": 0.5 * step,
            "total_steps": total,
        }
        for step in range(first, last + 1)
    ]


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return f"file:{tmp_path / 'mlruns'}"


def _client(store):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=store)


def _history(client, run_id, key):
    return [
        (metric.step, metric.value) for metric in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)
    ]


@pytest.fixture
def server(mlflow_server, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return mlflow_server


def test_a_run_gets_params_per_step_metrics_and_the_model_location(server):
    store, log = server, Log()
    records = _records(1, 4, 4)
    with MlflowLogger(
        environ={"MLFLOW_TRACKING_URI": store, "RANK": "0", "MLFLOW_EXPERIMENT_NAME": "params-and-metrics"},
        run_name="train-model",
        log=log,
    ) as logger:
        assert logger.enabled and logger.run_id
        logger.log_params(
            {
                "algorithm": "lora",
                "learning_rate": 1e-4,
                "target_modules": ["q_proj", "v_proj"],
                "hf_token": "hf_abcdefghijklmnopqrstu",
            }
        )
        for record in records:
            logger.log_step(record)
        logger.log_model_location("pvc://workspace/run-1/output/final")
    client = _client(store)
    run = client.get_run(logger.run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "train-model"
    assert client.get_experiment(run.info.experiment_id).name == "params-and-metrics"
    assert run.data.params == {
        "algorithm": "lora",
        "learning_rate": "0.0001",
        "target_modules": '["q_proj", "v_proj"]',
        "total_steps": "4",
    }
    assert run.data.tags[MODEL_LOCATION_TAG] == "pvc://workspace/run-1/output/final"
    for key in ("epoch", "loss", "lr", "tokens_per_second", "time"):
        assert _history(client, logger.run_id, key) == [(r["step"], pytest.approx(r[key])) for r in records], key
    assert "total_steps" not in run.data.metrics and "step" not in run.data.metrics
    assert "MLflow: not logging parameters that look like secrets: ['hf_token']" in log
    assert logger.run_id in log[0] and "hf_abc" not in "\n".join(log)


def test_a_resumed_job_with_the_same_run_key_continues_its_run(server):
    experiment = f"team-a-{uuid.uuid4().hex[:8]}"  # the server lives for the whole session
    environ = {"MLFLOW_TRACKING_URI": server, "MLFLOW_EXPERIMENT_NAME": experiment}
    first = MlflowLogger(run_key="run-1/train-model", environ=environ, log=Log())
    for record in _records(1, 3, 6):
        first.log_step(record)
    first.finish("KILLED")
    other = MlflowLogger(run_key="run-2/train-model", environ=environ, log=Log())
    other.finish()
    log = Log()
    with MlflowLogger(run_key="run-1/train-model", environ=environ, log=log) as resumed:
        for record in _records(4, 6, 6):
            resumed.log_step(record)
    assert resumed.run_id == first.run_id != other.run_id
    assert f"MLflow: continuing run {first.run_id} (run key 'run-1/train-model')" in log
    client = _client(server)
    run = client.get_run(first.run_id)
    assert run.info.status == "FINISHED" and run.data.tags[RUN_KEY_TAG] == "run-1/train-model"
    assert [step for step, _ in _history(client, first.run_id, "loss")] == [1, 2, 3, 4, 5, 6]
    assert client.get_experiment(run.info.experiment_id).name == experiment


def test_no_uri_or_another_rank_means_no_tracking_at_all(store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for environ in (
        {},
        {"MLFLOW_TRACKING_URI": store, "RANK": "3"},
        {"MLFLOW_TRACKING_URI": store, "PET_NODE_RANK": "1"},
    ):
        logger = MlflowLogger(environ=environ, log=Log())
        assert not logger.enabled and logger.run_id == "" and logger.tracking_uri == ""
        logger.log_params({"a": 1})
        logger.log_step({"no": "step"})  # not even checked: nothing is logged
        logger.log_model_location("x")
        logger.finish()
    assert sorted(path.name for path in tmp_path.iterdir()) == []  # no store, no ./mlruns


def test_the_parameter_wins_over_the_environment(store, tmp_path):
    other = f"file:{tmp_path / 'other'}"
    logger = MlflowLogger(store, environ={"MLFLOW_TRACKING_URI": other}, log=Log())
    logger.finish()
    assert logger.tracking_uri == store
    assert _client(store).get_run(logger.run_id).info.status == "FINISHED"
    assert not (tmp_path / "other").exists()


def test_failures_after_the_start_warn_once_and_training_goes_on(store, tmp_path):
    log = Log()
    with pytest.raises(RuntimeError, match="boom"):
        with MlflowLogger(store, log=log) as logger:
            logger.log_step(_records(1, 1, 2)[0])
            shutil.rmtree(tmp_path / "mlruns")  # the store disappears under the run
            logger.log_step(_records(2, 2, 2)[0])
            assert not logger.enabled
            logger.log_model_location("s3://bucket/model")  # silently skipped now
            raise RuntimeError("boom")
    warnings = [line for line in log if line.startswith("WARNING")]
    assert len(warnings) == 1 and "logging step 2 failed" in warnings[0]


def test_an_exception_marks_the_run_failed_and_system_exit_killed(store):
    with pytest.raises(ValueError):
        with MlflowLogger(store, log=Log()) as failed:
            raise ValueError("bad data")
    with pytest.raises(SystemExit):
        with MlflowLogger(store, log=Log()) as killed:
            raise SystemExit(143)
    client = _client(store)
    assert client.get_run(failed.run_id).info.status == "FAILED"
    assert client.get_run(killed.run_id).info.status == "KILLED"


def test_a_run_that_cannot_start_is_a_clear_error_without_credentials(store):
    with pytest.raises(TrackingError, match=r"tracking_uri='ftp://\*\*\*@mlflow.example.com'.*cannot start the run"):
        MlflowLogger("ftp://user:s3cret@mlflow.example.com", log=Log())
    with pytest.raises(TrackingError, match=r"MLFLOW_TRACKING_URI='ftp:") as error:
        MlflowLogger(environ={"MLFLOW_TRACKING_URI": "ftp://user:s3cret@host"}, log=Log())
    assert "s3cret" not in str(error.value)


def test_rank_rules_and_record_rules():
    assert is_rank_zero({}) and is_rank_zero({"RANK": "0", "LOCAL_RANK": "0", "PET_NODE_RANK": "0"})
    assert not is_rank_zero({"RANK": "0", "LOCAL_RANK": "1"})
    assert not is_rank_zero({"PET_NODE_RANK": "2"})
    with pytest.raises(ValueError, match="RANK='master'"):
        is_rank_zero({"RANK": "master"})
    assert step_metrics({"step": 3, "loss": 1, "note": "x", "ok": True, "total_steps": 9}) == (3, {"loss": 1.0})
    with pytest.raises(ValueError, match="'step' must be an integer"):
        step_metrics({"loss": 1.0})
    assert (
        mask_uri("https://me:pw@mlflow.example.com/x and http://host")
        == "https://***@mlflow.example.com/x and http://host"
    )


def test_the_component_pins_the_mlflow_client_the_server_tests_use():
    import tomllib
    from importlib.metadata import version
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).resolve().parents[4] / "pyproject.toml").read_text())
    # the steps' extra is what the step image installs (Containerfile: ".[local]", which includes it)
    assert f"mlflow-skinny=={version('mlflow-skinny')}" in pyproject["project"]["optional-dependencies"]["steps"]
    assert version("mlflow") == version("mlflow-skinny")  # the server and the client are one release
    test_extra = pyproject["project"]["optional-dependencies"]["test"]
    assert f"mlflow=={version('mlflow')}" in test_extra and f"mlflow-skinny=={version('mlflow')}" in test_extra
