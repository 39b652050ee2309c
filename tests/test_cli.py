"""The ``kfp-finetune`` CLI: help everywhere, compile with compile-time flags, exit codes."""

import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.cli import build_parser, main
from pipelines.training.finetuning import PIPELINES
from tests.harness.compiled import pipeline_documents

REPO_ROOT = Path(__file__).resolve().parents[1]
SUBCOMMANDS = ["compile", "demo", "validate-dataset", "doctor", "upload", "run", "schedule"]


@pytest.mark.parametrize("command", [[], *([c] for c in SUBCOMMANDS)])
def test_help_everywhere(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([*command, "--help"])
    assert exit_info.value.code == 0
    assert "usage: kfp-finetune" in capsys.readouterr().out


def test_compile_one_with_compile_time_flags(tmp_path):
    output = tmp_path / "osft.yaml"
    flags = "--pvc-size 120Gi --pvc-storage-class ocs-cephfs --pvc-access-modes ReadWriteMany,ReadOnlyMany"
    assert main(["compile", "osft-minimal", "-o", str(output), *flags.split(), "--pipeline-name", "my-osft"]) == 0
    documents = pipeline_documents(output)
    assert documents[0]["pipelineInfo"]["name"] == "my-osft"
    workspace = documents[1]["platforms"]["kubernetes"]["pipelineConfig"]["workspace"]
    assert workspace["size"] == "120Gi"
    assert workspace["kubernetes"]["pvcSpecPatch"]["accessModes"] == ["ReadWriteMany", "ReadOnlyMany"]


def test_compile_all_into_a_directory(shipped_pipeline_yamls):
    (directory,) = {path.parent for path in shipped_pipeline_yamls.values()}
    assert sorted(p.stem for p in directory.glob("*.yaml")) == sorted(PIPELINES)


def test_bad_input_exits_2_with_a_clear_message(tmp_path, capsys):
    assert main(["compile", "nonexistent", "-o", str(tmp_path / "x.yaml")]) == 2
    assert "unknown pipeline 'nonexistent'" in capsys.readouterr().err
    assert main(["compile", "sft", "-o", str(tmp_path / "x.yaml"), "--pvc-size", "lots"]) == 2
    assert "pvc_size must be a Kubernetes quantity" in capsys.readouterr().err
    assert main(["compile"]) == 2


def test_validate_dataset_prints_the_report_and_exits_by_result(tmp_path, demo_dataset_path, capsys):
    assert main(["validate-dataset", str(demo_dataset_path)]) == 0
    assert "400" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n'
        '{"messages": [{"role": "user", "content": "only a question"}]}\n'
    )
    assert main(["validate-dataset", str(bad)]) == 1
    report = capsys.readouterr().out
    assert "2" in report and "assistant" in report
    assert main(["validate-dataset", str(tmp_path / "missing.jsonl")]) == 2


def test_secret_names_are_compile_time_flags(tmp_path):
    output = tmp_path / "sft.yaml"
    assert (
        main(["compile", "sft", "-o", str(output), *"--hf-token-secret my-hf --s3-secret my-bucket-conn".split()]) == 0
    )
    documents = pipeline_documents(output)
    executors = documents[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    train_secrets = {entry["secretName"] for entry in executors["exec-train-model"]["secretAsEnv"]}
    assert {"my-hf", "my-bucket-conn", "kubernetes-credentials"} <= train_secrets
    assert "hf-token" not in train_secrets
    task = documents[0]["root"]["dag"]["tasks"]["train-model"]
    assert task["inputs"]["parameters"]["hf_token_secret_name"]["runtimeValue"]["constant"] == "my-hf"


def test_compile_several_pipelines_to_a_yaml_path_is_an_error_naming_the_rule(tmp_path, capsys):
    assert main(["compile", "--all", "-o", str(tmp_path / "single.yaml")]) == 2
    error = capsys.readouterr().err
    assert "-o" in error and "single.yaml" in error and "--all" in error and "must be a directory" in error
    assert not (tmp_path / "single.yaml").exists()
    assert main(["compile", "sft", "lora", "-o", str(tmp_path / "two.yml")]) == 2
    assert "2 pipelines" in capsys.readouterr().err and not (tmp_path / "two.yml").exists()
    existing = tmp_path / "a-file"
    existing.write_text("x")
    assert main(["compile", "sft", "lora", "-o", str(existing)]) == 2
    assert "is a file" in capsys.readouterr().err and existing.read_text() == "x"


def test_validate_dataset_has_a_flag_for_every_option_of_the_dataset_step():
    import inspect

    from components.data_processing.dataset_download.run import run_dataset_download

    (validate,) = [
        action.choices["validate-dataset"] for action in build_parser()._actions if getattr(action, "choices", None)
    ]
    flags = {option for action in validate._actions for option in action.option_strings}
    for name, parameter in inspect.signature(run_dataset_download).parameters.items():
        if parameter.default is not inspect.Parameter.empty:
            assert f"--{name.replace('_', '-')}" in flags, name
            assert validate.get_default(name) == parameter.default


def test_validate_dataset_max_invalid_fraction_and_the_rule_that_failed(tmp_path, capsys):
    good = '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n'
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good * 3 + '{"messages": [{"role": "user", "content": "only a question"}]}\n')
    assert main(["validate-dataset", str(bad)]) == 1
    report = capsys.readouterr().out
    # The hint names the flags to type here, not the Python parameters.
    assert (
        "- Result: FAILED: 1 of 4 rows (25.00%) break the rules and --on-invalid fail accepts none "
        "(--on-invalid drop with --max-invalid-fraction drops them instead)"
    ) in report
    assert main(["validate-dataset", str(bad), "--on-invalid", "drop", "--max-invalid-fraction", "0.1"]) == 1
    report = capsys.readouterr().out
    assert "- Result: FAILED: 1 of 4 rows (25.00%) break the rules, more than --max-invalid-fraction 0.1" in report
    split = tmp_path / "split"
    argv = ["validate-dataset", str(bad), "--on-invalid", "drop", "--max-invalid-fraction", "0.25"]
    assert main([*argv, "--train-split-ratio", "0.5", "--output-dir", str(split)]) == 0
    report = capsys.readouterr().out
    assert "- Result: passed: 1 of 4 rows (25.00%) break the rules and are dropped" in report
    assert "- Train: 1 rows" in report and "- Eval: 2 rows" in report  # round(3 x 0.5) = 2 held out
    assert [len((split / f"{name}.jsonl").read_text().splitlines()) for name in ("train", "eval")] == [1, 2]
    assert main(["validate-dataset", str(bad), "--max-invalid-fraction", "2"]) == 2
    assert "max_invalid_fraction=2.0 must be within [0, 1]" in capsys.readouterr().err


def test_validate_dataset_on_a_binary_file_prints_no_control_characters(tmp_path, capsys):
    binary = tmp_path / "image.jsonl"
    binary.write_bytes(b"\x1b[31mRED\x00\x07 binary\n\x89PNG\r\n\x1a\n" + bytes(range(256)))
    assert main(["validate-dataset", str(binary)]) == 2
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert "invalid_json" in printed and "\\x1b[31mRED\\x00\\x07" in printed, printed
    assert not [c for c in printed if c != "\n" and (ord(c) < 32 or 127 <= ord(c) < 160)], repr(printed)


def test_every_subcommand_has_a_description():
    (commands,) = [action.choices for action in build_parser()._actions if getattr(action, "choices", None)]
    for name, parser in commands.items():
        assert parser.description and len(parser.description) > 40, name


def test_validate_dataset_reads_the_components_defaults_without_importing_it():
    import inspect

    from components.data_processing.dataset_download import dataset_download
    from pipelines.cli import dataset_step_defaults

    signature = inspect.signature(dataset_download.python_func).parameters.items()
    options = {n: p.default for n, p in signature if isinstance(p.default, (bool, int, float, str))}
    assert dataset_step_defaults() == options
    probe = "import sys; from pipelines.cli import build_parser; build_parser(); print('kfp' in sys.modules)"
    repo = Path(__file__).resolve().parents[1]
    command = [sys.executable, "-c", probe]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True, cwd=repo)
    assert done.stdout.strip() == "False"  # neither KFP nor the Kubernetes client on the validate-dataset path
