"""The launcher -> pod contract: ``run_config.json`` written by staging, read strictly by the staged entrypoint."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from components.training.finetuning import launch
from components.training.finetuning.contract import (
    RUN_CONFIG_VERSION,
    MlflowSettings,
    ProgressSettings,
    RunConfig,
    RunConfigError,
    decode_run_config,
    encode_run_config,
    load_run_config,
)
from components.training.finetuning.pod import entrypoint
from components.training.finetuning.run import write_run_config
from tests.harness.requests import training_config

SETTINGS = launch.PodSettings(
    progress=ProgressSettings(enabled=False, port=28080, termination_log="/dev/termination-log"),
    jit_checkpoint=True,
    mlflow=MlflowSettings(tracking_uri="", experiment_name="", run_name=""),
)


@pytest.fixture
def staged(tmp_path, demo_dataset_path):
    run_dir = tmp_path / "ws" / "train_model" / "train-model-abc"
    run_dir.mkdir(parents=True)
    config = training_config(base_model="org/model", algorithm="osft", num_epochs=7)
    return write_run_config(config, run_dir, demo_dataset_path, None, None, 2, SETTINGS)


def test_what_staging_writes_is_what_the_pod_reads(staged):
    run_config = load_run_config(staged)
    assert run_config.version == RUN_CONFIG_VERSION and run_config.nproc_per_node == 2
    assert run_config.hyperparameters.num_epochs == 7 and run_config.hyperparameters.algorithm == "osft"
    assert run_config.eval_data_path == "" and run_config.model_path == ""
    name, kwargs = entrypoint.training_hub_call(run_config, {})
    assert name == "osft" and kwargs["num_epochs"] == 7 and kwargs["model_path"] == "org/model"
    assert decode_run_config(json.loads(encode_run_config(run_config))) == run_config


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda c: c.update(extra=1),
            rf"unknown field extra \(run config version {RUN_CONFIG_VERSION} has version, base_model",
        ),
        (lambda c: c.pop("data_path"), "missing field data_path"),
        (lambda c: c["hyperparameters"].update(lr=1.0), "unknown field hyperparameters.lr "),
        (lambda c: c["hyperparameters"].pop("num_epochs"), "missing field hyperparameters.num_epochs"),
        (
            lambda c: c["hyperparameters"].update(num_epochs="3"),
            "field hyperparameters.num_epochs='3' must be of type int",
        ),
        (lambda c: c["progress"].update(enabled=1), "field progress.enabled=1 must be of type bool"),
        (lambda c: c["pvc_mounts"].update(ws=1), "field pvc_mounts=.* must be of type dict"),
        (
            lambda c: c.update(version=RUN_CONFIG_VERSION + 1),
            f"field version={RUN_CONFIG_VERSION + 1}: this entrypoint reads run config version {RUN_CONFIG_VERSION}",
        ),
        (lambda c: c.update(mlflow=[]), "mlflow must be a JSON object"),
    ],
)
def test_a_run_config_of_another_shape_fails_naming_the_file_and_the_field(staged, change, message):
    data = json.loads(staged.read_text())
    change(data)
    staged.write_text(json.dumps(data))
    with pytest.raises(RunConfigError, match=message) as error:
        load_run_config(staged)
    assert str(error.value).startswith(f"{staged}: ") and "\n" not in str(error.value)


def test_the_staged_entrypoint_refuses_a_mismatched_run_config_in_one_line(staged):
    """In the pod: no traceback, one line naming the file and the field, a non-zero exit, Training Hub never called."""
    data = json.loads(staged.read_text())
    data["hyperparameters"]["epochs"] = data["hyperparameters"].pop("num_epochs")
    staged.write_text(json.dumps(data))
    result = subprocess.run(
        [sys.executable, str(staged.parent / "entrypoint.py"), "--config", str(staged)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},  # the staged directory alone: no project package, no training_hub
        check=False,
    )
    # stdout: only the first line the pod always prints, the installed Training Hub stack.
    assert result.returncode == 1 and [line.split(" (")[0] for line in result.stdout.splitlines()] == [
        "training-hub 0.11.2"
    ]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"entrypoint: {staged}: unknown field hyperparameters.epochs")


def test_the_writer_refuses_what_the_pod_would_refuse():
    config = training_config()
    bad = dataclasses.replace(config.training_settings(), num_epochs="3")
    with pytest.raises(RunConfigError, match="num_epochs='3' must be of type int"):
        encode_run_config(
            RunConfig(
                version=RUN_CONFIG_VERSION,
                base_model="m",
                model_path="",
                data_path="/d",
                eval_data_path="",
                ckpt_output_dir="/c",
                model_cache_dir="/m",
                pvc_mounts={},
                nproc_per_node=1,
                hyperparameters=bad,
                progress=SETTINGS.progress,
                jit_checkpoint=True,
                mlflow=SETTINGS.mlflow,
            )
        )
