"""Unit tests of the pure training modules: config rules, metrics readers, report, entrypoint mapping, data checks."""

import base64
import json
import re
from pathlib import Path

import pytest

from components._common.files import write_text_atomically
from components.training.finetuning import report
from components.training.finetuning.contract import TrainingConfigError
from components.training.finetuning.pod import entrypoint, inputs, metrics
from tests.harness.requests import pod_run_config, training_config


# -- config ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "value", "rule"),
    [
        ("algorithm", "dpo", "must be one of sft, osft, lora"),
        ("unfreeze_rank_ratio", 0.0, r"must be in \(0, 1\]"),
        ("unfreeze_rank_ratio", 1.5, r"must be in \(0, 1\]"),
        ("lora_r", 0, "LoRA rank must be >= 1"),
        ("lora_dropout", 1.0, r"must be in \[0, 1\)"),
        ("learning_rate", float("nan"), "must be finite"),
        ("lr_scheduler", "exponential", "must be one of linear, cosine"),
        ("fsdp_sharding_strategy", "ZERO3", "must be one of FULL_SHARD"),
        ("max_tokens_per_gpu", 100, "must be >= max_seq_len"),
        ("num_epochs", 0, "must be >= 1"),
        ("num_epochs", True, "must be of type int"),
        ("seed", "1", "must be of type int"),
        ("base_model", " ", "must name a model"),
    ],
)
def test_config_rejects_bad_values_naming_parameter_and_value(name, value, rule):
    params = {"base_model": "org/model", name: value}
    with pytest.raises(TrainingConfigError, match=rf"train_model parameter training_{name}=.*{rule}"):
        training_config(**params)


def test_config_accepts_defaults_and_boundaries():
    config = training_config(base_model="m", unfreeze_rank_ratio=1.0, lora_dropout=0.0, learning_rate=1)
    assert config.unfreeze_rank_ratio == 1.0
    assert "base_model" not in config.hyperparameters()
    assert config.hyperparameters()["seed"] == 42
    assert training_config(base_model="m").algorithm == "sft"


# -- metrics ---------------------------------------------------------------------------------------------------------
def _write_lines(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("algorithm", ["sft", "osft", "lora"])
def test_reads_what_the_real_writers_write_with_the_runs_step_total(algorithm, tmp_path):
    """2 epochs of 10 steps: every step read, in order, and the total is 20 (not one epoch's 10)."""
    from components.training.finetuning.tests.real_metrics_writers import LOSSES, write_metrics

    write_metrics(algorithm, tmp_path, steps_per_epoch=10, epochs=2)
    records = metrics.read_metrics(tmp_path, num_epochs=2)
    assert [r["step"] for r in records] == list(range(1, 21))
    assert [r["loss"] for r in records][:4] == list(LOSSES[:4])
    assert {r["total_steps"] for r in records} == {20}
    assert all(r["lr"] for r in records)
    if algorithm != "lora":  # the SFT/OSFT writers stamp each line; times count from the first step
        assert records[0]["time"] == 0.0 and records[-1]["time"] >= records[1]["time"] > 0
    if algorithm == "osft":
        assert report.summarize(records)["tokens_per_second"] == 900.0
    # Without the run's epochs, a per-epoch count is not taken for a total (LoRA's line carries its own).
    unknown = metrics.read_metrics(tmp_path)[-1]["total_steps"]
    assert unknown == (20 if algorithm == "lora" else None)


def test_reads_lora_layout_and_skips_torn_last_line(tmp_path):
    path = _write_lines(
        tmp_path / "training_metrics.jsonl",
        [{"step": 5, "loss": 1.25, "epoch": 0.5, "learning_rate": 2e-4, "max_steps": 10}, {"train_runtime": 3.0}],
    )
    path.write_text(path.read_text() + '{"step": 6, "lo')
    records = metrics.read_metrics(path)
    assert records == [
        {"step": 5, "epoch": 0.5, "loss": 1.25, "lr": 2e-4, "tokens_per_second": None, "time": None, "total_steps": 10}
    ]
    assert "tokens_per_second" not in report.summarize(records, train_seconds=7.0)
    assert report.summarize(records, train_seconds=7.0)["train_seconds"] == 7.0


def test_metrics_errors_name_the_file_and_line(tmp_path):
    with pytest.raises(metrics.MetricsFileError, match="no metrics file"):
        metrics.read_metrics(tmp_path)
    bad = tmp_path / "training_metrics.jsonl"
    bad.write_text('{"step": 1, "loss": 1.0}\nnot json\n{"step": 2, "loss": 1.0}\n')
    with pytest.raises(metrics.MetricsFileError, match=r"training_metrics.jsonl:2: not valid JSON"):
        metrics.read_metrics(bad)
    empty = _write_lines(tmp_path / "x" / "metrics.jsonl", [{"note": "no steps"}])
    with pytest.raises(metrics.MetricsFileError, match="holds no step records"):
        metrics.read_metrics(empty)


def test_local_records_round_trip(tmp_path):
    path = tmp_path / metrics.LOCAL_METRICS_FILE
    record = {"step": 1, "epoch": 0.5, "loss": 1.5, "lr": 1e-3, "tokens_per_second": 10.0, "time": 0.1}
    record["total_steps"] = 2
    metrics.append_record(path, record)
    assert metrics.read_metrics(tmp_path) == [record]


# -- report ----------------------------------------------------------------------------------------------------------
def test_report_embeds_png_params_and_trainjob(tmp_path):
    records = [{"step": s, "loss": 3.0 / s, "lr": 1e-3} for s in range(1, 6)]
    html = report.render_report(
        records,
        report.summarize(records, 1.0),
        {"learning_rate": 1e-3, "lora_r": 8},
        {"algorithm": "lora", "base_model": "<tiny>", "job_name": "train-model-abc"},
    )
    image = re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html).group(1)
    assert base64.b64decode(image).startswith(b"\x89PNG")
    assert "train-model-abc" in html and "lora_r" in html and "&lt;tiny&gt;" in html
    # Only the chosen algorithm's knobs: no LoRA or OSFT settings in an SFT report.
    settings = {"learning_rate": 1e-3, "lora_r": 8, "unfreeze_rank_ratio": 0.25, "fsdp_sharding_strategy": "FULL_SHARD"}
    sft = report.render_report(
        records, report.summarize(records, 1.0), settings, {"algorithm": "sft", "base_model": "m"}
    )
    assert "fsdp_sharding_strategy" in sft and "learning_rate" in sft
    assert "lora_r" not in sft and "unfreeze_rank_ratio" not in sft
    target = tmp_path / "sub" / "report.html"
    write_text_atomically(target, html)
    assert target.read_text() == html and [p.name for p in target.parent.iterdir()] == ["report.html"]


# -- entrypoint: training-hub mapping against the real signatures -----------------------------------------------------
TORCHRUN_ENV = {
    "PET_NNODES": "2",
    "PET_NPROC_PER_NODE": "8",
    "PET_NODE_RANK": "1",
    "PET_MASTER_ADDR": "job-0",
    "PET_MASTER_PORT": "29400",
}


def _run_config(algorithm, eval_data=None, nproc_per_node=0, **overrides):
    return pod_run_config(
        algorithm, eval_data_path=eval_data or "", nproc_per_node=nproc_per_node, hyperparameters=overrides
    )


@pytest.mark.parametrize(("algorithm", "function"), [("sft", "sft"), ("osft", "osft"), ("lora", "lora_sft")])
@pytest.mark.parametrize("eval_data", [None, "/ws/data/eval.jsonl"])
def test_every_keyword_lands_in_the_installed_training_hub(algorithm, function, eval_data):
    """Each keyword is a parameter of the real function or reaches its backend's config (not silently dropped)."""
    from components.training.finetuning.tests.training_hub_keywords import backend_keywords, unknown_keywords

    name, kwargs = entrypoint.training_hub_call(_run_config(algorithm, eval_data, max_steps=0), TORCHRUN_ENV)
    resume, _ = ({"resume_from_full_state_checkpoint": "/ws/ckpt/x"}, "") if algorithm == "osft" else ({}, "")
    kwargs.update(resume)
    assert name == function
    assert not unknown_keywords(function, kwargs), sorted(unknown_keywords(function, kwargs))
    assert kwargs["nnodes"] == 2 and kwargs["nproc_per_node"] == 8 and kwargs["node_rank"] == 1
    assert kwargs["rdzv_endpoint"] == "job-0:29400"
    # The backend fields really are what the pod relies on: SFT's seed is instructlab-training's random_seed;
    # OSFT's step mode and resume are mini-trainer TrainingArgs fields.
    assert {"random_seed", "fsdp_options", "use_liger"} <= backend_keywords("sft")
    assert {"training_mode", "max_steps", "resume_from_full_state_checkpoint"} <= backend_keywords("osft")
    assert {"seed", "save_model", "eval_data_path"} <= backend_keywords("lora_sft")


def test_a_keyword_the_backend_would_drop_is_caught():
    from components.training.finetuning.tests.training_hub_keywords import unknown_keywords

    assert unknown_keywords("osft", {"model_path": "m", "max_step": 4}) == {"max_step"}  # a typo mini-trainer drops
    assert unknown_keywords("sft", {"seed": 1}) == {"seed"}  # SFT's seed is random_seed


@pytest.mark.parametrize(
    ("env", "nproc_per_node", "expected"),
    [
        # Kubeflow Trainer / Training Operator v1.7+: PET_* win over the v1 variables.
        (
            {**TORCHRUN_ENV, "RANK": "3", "WORLD_SIZE": "64", "MASTER_ADDR": "o", "MASTER_PORT": "1"},
            4,
            (8, 2, 1, "job-0:29400"),
        ),
        # Training Operator v1 without PET_*: RANK, WORLD_SIZE / processes per node, MASTER_ADDR:MASTER_PORT.
        (
            {"MASTER_ADDR": "tm-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "12", "RANK": "2"},
            4,
            (4, 3, 2, "tm-master-0:23456"),
        ),
        # No port: the operator's default 23456; PET_NPROC_PER_NODE alone still divides WORLD_SIZE.
        ({"MASTER_ADDR": "m", "WORLD_SIZE": "16", "RANK": "0", "PET_NPROC_PER_NODE": "8"}, 0, (8, 2, 0, "m:23456")),
    ],
)
def test_torchrun_settings_from_pet_variables_first_then_training_operator_v1(env, nproc_per_node, expected):
    keys = ("nproc_per_node", "nnodes", "node_rank", "rdzv_endpoint")
    assert entrypoint.torchrun_kwargs(env, nproc_per_node=nproc_per_node) == dict(zip(keys, expected))


def test_torchrun_variables_that_cannot_be_read_are_one_line():
    assert entrypoint.torchrun_kwargs({}) == {}
    with pytest.raises(entrypoint.EntrypointError, match=r"WORLD_SIZE=6: not a multiple .*\(4\)"):
        entrypoint.torchrun_kwargs({"WORLD_SIZE": "6"}, nproc_per_node=4)
    with pytest.raises(entrypoint.EntrypointError, match="RANK='x'"):
        entrypoint.torchrun_kwargs({"RANK": "x"})


def test_run_config_processes_per_node_reach_the_v1_fallback():
    env = {"MASTER_ADDR": "tm-master-0", "WORLD_SIZE": "8", "RANK": "1"}
    _, kwargs = entrypoint.training_hub_call(_run_config("sft", nproc_per_node=4), env)
    assert (kwargs["nnodes"], kwargs["nproc_per_node"], kwargs["node_rank"]) == (2, 4, 1)
    assert kwargs["rdzv_endpoint"] == "tm-master-0:23456"


@pytest.mark.parametrize("algorithm", ["sft", "osft", "lora"])
def test_every_user_parameter_reaches_the_algorithm(algorithm):
    changed = {
        "num_epochs": 5,
        "effective_batch_size": 7,
        "learning_rate": 3e-4,
        "max_seq_len": 1000,
        "max_tokens_per_gpu": 5000,
        "warmup_steps": 9,
        "seed": 1234,
    }
    per_algorithm = {
        "sft": {"use_liger": True, "checkpoint_at_epoch": True, "fsdp_sharding_strategy": "HYBRID_SHARD"},
        "osft": {
            "unfreeze_rank_ratio": 0.4,
            "use_liger": True,
            "lr_scheduler": "linear",
            "checkpoint_at_epoch": True,
            "save_final_checkpoint": False,
            "max_steps": 11,
        },
        "lora": {
            "lora_r": 4,
            "lora_alpha": 8,
            "lora_dropout": 0.2,
            "lr_scheduler": "linear",
            "save_final_checkpoint": False,
        },
    }[algorithm]
    _, kwargs = entrypoint.training_hub_call(_run_config(algorithm, **changed, **per_algorithm), {})
    flat = json.dumps(kwargs, sort_keys=True)
    if algorithm == "lora":  # the Unsloth backend never reads max_tokens_per_gpu: not passed rather than ignored
        assert "max_tokens_per_gpu" not in kwargs
        changed.pop("max_tokens_per_gpu")
    for name, value in {**changed, **per_algorithm}.items():
        assert json.dumps(value) in flat, (name, value, kwargs)
    seed_key = {"sft": "random_seed", "osft": "seed", "lora": "seed"}[algorithm]
    assert kwargs[seed_key] == 1234


@pytest.mark.parametrize(
    ("algorithm", "setting", "message"),
    [
        ("sft", {"lr_scheduler": "linear"}, "lr_scheduler='linear' is not supported by training-hub sft"),
        ("sft", {"max_steps": 5}, "max_steps=5 is not supported"),
        ("lora", {"use_liger": True}, "use_liger=True is not supported by training-hub lora"),
        ("osft", {"fsdp_sharding_strategy": "NO_SHARD"}, "mini-trainer always shards fully"),
        ("osft", {"save_final_checkpoint": False}, "needs checkpoint_at_epoch=True"),
        ("lora_grpo", {"lora_use_dora": True}, "lora_use_dora=True is not supported by training-hub lora_grpo"),
    ],
)
def test_settings_training_hub_would_ignore_are_refused(algorithm, setting, message):
    """Refused before anything is read or downloaded (GRPO: DoRA is a lora_sft option)."""
    with pytest.raises(entrypoint.EntrypointError, match=re.escape(message)):
        entrypoint.training_hub_call(_run_config(algorithm, **setting), {})


def test_entrypoint_is_stdlib_only():
    """Each staged pod module imports at its top level only the standard library and the other staged modules."""
    import ast
    import importlib.util
    import sys

    from components.training.finetuning.contract import POD_MODULES

    assert entrypoint.__name__ in POD_MODULES
    for module in POD_MODULES:
        tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text())
        imported = set()
        for node in tree.body:
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                # "from package import module" names a module; "from module import name" names the module
                imported |= {base if base in POD_MODULES else f"{base}.{alias.name}" for alias in node.names}
        outside = {
            name
            for name in imported
            if name.split(".")[0] not in {*sys.stdlib_module_names, "__future__"} and name not in POD_MODULES
        }
        assert not outside, (module, outside)


# -- entrypoint: data and model sources ------------------------------------------------------------------------------
def test_chat_rows_errors_name_file_and_line(tmp_path):
    path = tmp_path / "train.jsonl"
    good = '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n'
    path.write_text(good + '{"messages": [{"role": "user"}]}\n')
    with pytest.raises(entrypoint.EntrypointError, match=r"train.jsonl:2 \[content_not_string\] messages\[0\]"):
        inputs.count_chat_rows(path)
    path.write_text('{"text": "x"}\n')
    with pytest.raises(entrypoint.EntrypointError, match=r"train.jsonl:1 \[missing_field\] messages field not found"):
        inputs.count_chat_rows(path)
    path.write_bytes(good.encode() + b'{"messages": [{"role": "user", "content": "caf\xe9"}]}\n')
    with pytest.raises(entrypoint.EntrypointError, match=r"train.jsonl:2 \[invalid_utf8\] not valid UTF-8 at byte"):
        inputs.count_chat_rows(path, "train_dataset")
    path.write_text("\n \n")
    with pytest.raises(entrypoint.EntrypointError, match=r"train.jsonl \[no_rows\]"):
        inputs.count_chat_rows(path)


def test_load_chat_rows_streams_with_constant_memory(tmp_path):
    import tracemalloc

    row = {"messages": [{"role": "user", "content": "q" * 200}, {"role": "assistant", "content": "a" * 200}]}
    path = tmp_path / "big.jsonl"
    with path.open("w") as handle:
        for _ in range(40_000):  # ~18 MB
            handle.write(json.dumps(row) + "\n")
    tracemalloc.start()
    try:
        assert inputs.count_chat_rows(path) == 40_000
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # A few of the reader's 1 MiB blocks (components/_common/chat_files.py), whatever the file size (~19 MB here).
    from components._common.chat_files import _BLOCK

    assert peak < 5 * _BLOCK < path.stat().st_size / 3, f"peak {peak} bytes for an {path.stat().st_size} byte file"
    rows = inputs.load_chat_rows(path)
    assert next(rows) == row  # lazy: the first row comes before the rest is read


def test_pod_script_runs_alone_with_the_standard_library(tmp_path):
    import subprocess
    import sys

    from components.training.finetuning.launch import stage_pod_script

    script = stage_pod_script(tmp_path)  # exactly how the launcher stages it
    # -S: no site-packages at all (the project is installed there, which would hide a missing staged module);
    # not -I, which would drop the script's own directory from sys.path, where the staged modules lie.
    done = subprocess.run(
        [sys.executable, "-E", "-s", "-S", str(script), "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "--config" in done.stdout


def test_model_sources(tmp_path):
    (tmp_path / "claim-root" / "models" / "m").mkdir(parents=True)
    mounts = {"models-pvc": str(tmp_path / "claim-root")}
    resolved = inputs.resolve_base_model("pvc://models-pvc/models/m", tmp_path / "cache", mounts, {})
    assert resolved == str(tmp_path / "claim-root" / "models" / "m")
    with pytest.raises(entrypoint.EntrypointError, match="PVC 'other' is not mounted"):
        inputs.resolve_base_model("pvc://other/m", tmp_path, mounts, {})
    # oci:// is pulled by train_model before the job starts; a pod without the staged model_path says so.
    with pytest.raises(entrypoint.EntrypointError, match="oci:// models are pulled by train_model before training"):
        inputs.resolve_base_model("oci://quay.io/x/y:1", tmp_path, mounts, {})
    with pytest.raises(entrypoint.EntrypointError, match="scheme gs:// is not supported"):
        inputs.resolve_base_model("gs://bucket/m", tmp_path, mounts, {})
    with pytest.raises(entrypoint.EntrypointError, match="does not exist"):
        inputs.resolve_base_model(str(tmp_path / "missing"), tmp_path, mounts, {})


def test_s3_model_is_downloaded_once(tmp_path, s3_data_connection, tiny_model_dir):
    import os

    client, bucket = s3_data_connection
    for file in tiny_model_dir.iterdir():
        client.upload_file(str(file), bucket, f"models/tiny/{file.name}")
    resolved = Path(inputs.resolve_base_model(f"s3://{bucket}/models/tiny", tmp_path, {}, dict(os.environ)))
    assert sorted(p.name for p in resolved.iterdir()) == sorted(p.name for p in tiny_model_dir.iterdir())
    assert (resolved / "config.json").read_bytes() == (tiny_model_dir / "config.json").read_bytes()
    client.delete_object(Bucket=bucket, Key="models/tiny/config.json")
    assert inputs.resolve_base_model(f"s3://{bucket}/models/tiny", tmp_path, {}, dict(os.environ)) == str(resolved)
    with pytest.raises(entrypoint.EntrypointError, match="no objects under that S3 prefix"):
        inputs.resolve_base_model(f"s3://{bucket}/models/none", tmp_path, {}, dict(os.environ))
    env = {k: v for k, v in os.environ.items() if k != "AWS_SECRET_ACCESS_KEY"}  # the secret lacks a key
    with pytest.raises(entrypoint.EntrypointError, match=r"^base_model='s3://.*S3 credentials missing: set AWS_SECRET"):
        inputs.resolve_base_model(f"s3://{bucket}/models/other", tmp_path, {}, env)
    assert not (tmp_path / "models").exists() or not any("other" in p.name for p in tmp_path.rglob("*"))


# -- train: reading Training Hub's output back -------------------------------------------------------------------------
def test_final_checkpoint_is_the_one_with_most_samples(tmp_path):
    from components.training.finetuning.publish import find_final_checkpoint

    with pytest.raises(FileNotFoundError, match="no final checkpoint"):
        find_final_checkpoint(tmp_path)
    for name in ("samples_64.0", "samples_640", "samples_128"):
        (tmp_path / "hf_format" / name).mkdir(parents=True)
        (tmp_path / "hf_format" / name / "config.json").write_text("{}")
    (tmp_path / "hf_format" / "samples_9999").mkdir()  # incomplete: no config.json
    assert find_final_checkpoint(tmp_path) == tmp_path / "hf_format" / "samples_640"
    lora = tmp_path / "lora"
    lora.mkdir()
    (lora / "adapter_config.json").write_text("{}")
    assert find_final_checkpoint(lora) == lora


def test_sft_always_asks_for_epoch_checkpoints_since_instructlab_never_saves_last():
    """instructlab-training's torchrun command has no --save_last: only epoch checkpoints leave a model behind."""
    import inspect

    from instructlab.training import main_ds

    source = inspect.getsource(main_ds.run_training)
    assert "--save_last" not in source and '"--checkpoint_at_epoch"' in source
    _, kwargs = entrypoint.training_hub_call(_run_config("sft", checkpoint_at_epoch=False), {})
    assert kwargs["checkpoint_at_epoch"] is True and kwargs["accelerate_full_state_at_epoch"] is False
