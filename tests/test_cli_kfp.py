"""``kfp-finetune upload | run | schedule`` end to end against the loopback KFP API stub."""

from pipelines.cli import main
from tests.harness.compiled import pipeline_documents

DATASET = "phase_01_dataset_man_data_uri"


def test_upload_a_named_pipeline_compiled_with_cli_settings(kfp_api_stub, monkeypatch, capsys):
    monkeypatch.setenv("KFP_TOKEN", "sha256~cli-token")
    code = main(["upload", "osft-minimal", "--host", kfp_api_stub.url, "--pvc-size", "80Gi", "--name", "osft"])
    assert code == 0, capsys.readouterr().err
    (pipeline,) = kfp_api_stub.pipelines.values()
    assert pipeline["display_name"] == "osft"
    (upload,) = [r for r in kfp_api_stub.requests if r.method == "POST" and r.path.endswith("/pipelines/upload")]
    assert upload.headers.get("authorization") == "Bearer sha256~cli-token"
    (_, package), *_ = upload.multipart_files().values()
    documents = pipeline_documents(package)
    assert DATASET in documents[0]["root"]["inputDefinitions"]["parameters"]
    assert documents[1]["platforms"]["kubernetes"]["pipelineConfig"]["workspace"]["size"] == "80Gi"
    printed = capsys.readouterr()
    assert "uploaded: pipeline_id=" in printed.out
    assert "cli-token" not in printed.out + printed.err


def test_run_with_parameters_from_flags_and_a_file(kfp_api_stub, tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text("phase_02_train_man_train_epochs: 2\nphase_03_eval_man_eval_tasks: [arc_easy, hellaswag]\n")
    argv = f"run sft-minimal --host {kfp_api_stub.url} --param {DATASET}=s3://bucket/chat.jsonl --params-file {params}"
    code = main([*argv.split(), "--experiment", "fine-tuning", "--run-name", "nightly"])
    assert code == 0, capsys.readouterr().err
    (run,) = kfp_api_stub.runs.values()
    assert run["display_name"] == "nightly"
    assert run["runtime_config"]["parameters"] == {
        DATASET: "s3://bucket/chat.jsonl",
        "phase_02_train_man_train_epochs": 2,
        "phase_03_eval_man_eval_tasks": ["arc_easy", "hellaswag"],
    }
    assert [e["display_name"] for e in kfp_api_stub.experiments.values()] == ["fine-tuning"]


def test_schedule_a_recurring_run_with_cron(kfp_api_stub, capsys):
    argv = (
        f"schedule lora-minimal --host {kfp_api_stub.url} --param {DATASET}=pvc://data/chat.jsonl --name nightly-lora"
    )
    code = main([*argv.split(), "--cron", "0 0 2 * * *"])
    assert code == 0, capsys.readouterr().err
    (recurring,) = kfp_api_stub.recurring_runs.values()
    assert recurring["display_name"] == "nightly-lora"
    assert recurring["trigger"]["cron_schedule"]["cron"] == "0 0 2 * * *"
    assert "recurring_run_id=" in capsys.readouterr().out


def test_bad_input_and_server_failures_have_distinct_exit_codes(kfp_api_stub_factory, capsys):
    stub = kfp_api_stub_factory(required_token="right")
    # Bad input is exit 2 (test_errors_name_the_pipeline_not_a_temporary_copy); a refused token exit 1, with a remedy.
    code = main(["upload", "sft-minimal", "--host", stub.url])
    assert code == 1
    assert "failed" in capsys.readouterr().err


def _dashboard(step: str, name: str) -> str:
    """A pipeline parameter's dashboard name: the one feeding ``name`` of ``step`` in the sft pipeline."""
    from pipelines.compile import pipeline_function
    from pipelines.training.finetuning.interface import parameter_feeding

    return parameter_feeding(pipeline_function("sft"), step, name)


def test_run_arguments_break_the_components_rules_before_anything_is_sent(kfp_api_stub, tmp_path, capsys):
    dataset = f"{_dashboard('dataset', 'dataset_uri')}=s3://bucket/chat.jsonl"
    cases = [
        (
            ("train", "training_num_epochs"),
            "0",
            "step train-model: train_model parameter training_num_epochs=0: must be >= 1",
        ),
        (("dataset", "train_split_ratio"), "1.5", "step dataset-download: train_split_ratio=1.5 must be in (0, 1]"),
        (("dataset", "max_invalid_fraction"), "-0.1", "max_invalid_fraction=-0.1 must be within [0, 1]"),
        (("eval", "max_samples"), "0", "step lm-eval: max_samples must be -1 (all rows) or a positive count, got 0"),
    ]
    for (step, name), value, rule in cases:
        parameter = _dashboard(step, name)
        argv = ["run", "sft", "--host", kfp_api_stub.url, "--param", dataset, "--param", f"{parameter}={value}"]
        assert main(argv) == 2
        error = capsys.readouterr().err.strip()
        assert error.startswith("kfp-finetune run: error: pipeline 'sft', step ") and rule in error, error
        assert error.endswith(f"(pipeline parameter {parameter})")
    # A registry address with a name the registry would refuse (an empty name is derived: fine).
    address = f"{_dashboard('registry', 'registry_address')}=registry.example.com"
    name = _dashboard("registry", "model_name")
    argv = ["run", "sft", "--host", kfp_api_stub.url, "--param", dataset, "--param", address]
    assert main([*argv, "--param", f"{name}=my model"]) == 2
    error = capsys.readouterr().err.strip()
    assert "step model-registry: model_name='my model': must start with a letter or digit" in error, error
    assert error.endswith(f"(pipeline parameter {name})"), error
    # Every mistake at once: two steps' rules and two unknown names in one error each.
    split, epochs_name = _dashboard("dataset", "train_split_ratio"), _dashboard("train", "training_num_epochs")
    argv = ["run", "sft", "--host", kfp_api_stub.url, "--param", dataset]
    assert main([*argv, "--param", f"{split}=1.5", "--param", f"{epochs_name}=0"]) == 2
    error = capsys.readouterr().err
    assert "step dataset-download: train_split_ratio=1.5" in error and "step train-model: " in error, error
    assert main([*argv, "--param", "typo_one=1", "--param", "typo_two=2"]) == 2
    assert "parameters 'typo_one', 'typo_two' are not parameters of pipeline 'sft'" in capsys.readouterr().err
    # The same rules hold for a compiled file, and the error names the file as given.
    package = tmp_path / "sft.yaml"
    assert main(["compile", "sft", "-o", str(package)]) == 0
    epochs = _dashboard("train", "training_num_epochs")
    argv = ["schedule", str(package), "--host", kfp_api_stub.url, "--cron", "0 0 2 * * *"]
    assert main([*argv, "--param", dataset, "--param", f"{epochs}=0"]) == 2
    assert f"pipeline {str(package)!r}, step train-model" in capsys.readouterr().err
    assert kfp_api_stub.requests == []  # nothing was sent


def test_errors_name_the_pipeline_not_a_temporary_copy(kfp_api_stub, capsys):
    assert main(["run", "sft-minimal", "--host", kfp_api_stub.url, "--param", "no_such_parameter=1"]) == 2
    error = capsys.readouterr().err
    assert "parameter 'no_such_parameter' is not a parameter of pipeline 'sft-minimal'" in error
    assert "kfp-finetune-" not in error and ".yaml" not in error
    assert main(["run", "sft-minimal", "--host", kfp_api_stub.url]) == 2
    assert "pipeline 'sft-minimal' needs a value for" in capsys.readouterr().err
    assert kfp_api_stub.requests == []


def test_the_guides_quick_start_run_and_parameter_names_pass_the_cli_checks(kfp_api_stub_factory, capsys):
    guide_values = {
        "phase_01_dataset_man_data_uri": "LipengCS/Table-GPT:All",
        "phase_02_train_man_train_batch": 64,
        "phase_02_train_man_train_tokens": 32000,
        "phase_02_train_man_train_model": "Qwen/Qwen2.5-1.5B-Instruct",
        "phase_02_train_man_train_epochs": 2,
        "phase_04_registry_man_address": "registry.example.com",
    }
    stub = kfp_api_stub_factory()
    assert main(["run", "osft-minimal", "--host", stub.url, "--param", f"{DATASET}=LipengCS/Table-GPT:All"]) == 0
    for name in ("sft", "sft-minimal", "osft", "osft-minimal", "lora", "lora-minimal"):
        stub = kfp_api_stub_factory()
        flags = [f"--param={key}={value}" for key, value in guide_values.items()]
        code = main(["run", name, "--host", stub.url, *flags])
        assert code == 0, (name, capsys.readouterr().err)
        (run,) = stub.runs.values()
        assert run["runtime_config"]["parameters"] == guide_values, name


def test_cheap_checks_come_before_compiling(kfp_api_stub, tmp_path, capsys, monkeypatch):
    import pipelines.compile

    def no_compile(*args, **kwargs):
        raise AssertionError("compiled before the cheap checks")

    monkeypatch.setattr(pipelines.compile, "compile_named", no_compile)
    base = ["--host", kfp_api_stub.url, "--param", f"{DATASET}=s3://b/k.jsonl"]
    assert main(["schedule", "sft", *base, "--cron", "0 0 25 * * *"]) == 2
    assert "cron" in capsys.readouterr().err
    assert main(["run", "sft", *base, "--token-file", str(tmp_path / "missing-token")]) == 2
    assert "missing-token" in capsys.readouterr().err
    assert main(["run", "no-such-pipeline", *base]) == 2
    assert "is neither a pipeline name" in capsys.readouterr().err
    assert kfp_api_stub.requests == []
