"""The core install (the wheel without extras, as ``pip install kfp-finetune`` gives it): every command works or
says in one line which extra to install; no traceback, not even for ``--help``.

The wheel is built from the clone and installed ``--no-deps`` on an overlay of ``.venv-core`` (the core dependencies
of ``pyproject.toml`` at the lock's versions, built by ``scripts/setup.sh``: tests never download), so an import of
an extra's package is met here as a user meets it. The commands talk to the loopback KFP API stub.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from pipelines.cli import build_parser
from tests.harness.installed_wheel import user_environment

DATASET = "phase_01_dataset_man_data_uri"
ROW = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}


def _kfp_finetune(core_venv, tmp_path, *arguments: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``kfp-finetune ARGUMENTS`` of the core install, from a folder outside the clone, with its own HOME."""
    env = user_environment(HOME=str(tmp_path / "home"))
    env = {k: v for k, v in env.items() if not k.startswith(("KFP_FINETUNE_", "KUBERNETES_", "KF_PIPELINES_"))}
    env.pop("KFP_HOST", None)
    return subprocess.run(
        [str(core_venv / "bin" / "kfp-finetune"), *arguments],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _subcommands() -> list[str]:
    parser = build_parser()
    (sub,) = [action for action in parser._actions if action.__class__.__name__ == "_SubParsersAction"]  # noqa: SLF001
    return list(sub.choices)


EXTRAS_ONLY = ("torch", "transformers", "datasets", "boto3", "lm_eval", "model_registry", "pyarrow")


def test_the_core_install_carries_no_extra(core_venv):
    listed = subprocess.run(
        [
            str(core_venv / "bin" / "python"),
            "-c",
            f"import importlib.util as u; print([m for m in {EXTRAS_ONLY!r} if u.find_spec(m)])",
        ],
        capture_output=True,
        text=True,
        env=user_environment(),
        timeout=60,
    )
    assert listed.stdout.strip() == "[]", listed.stderr


@pytest.mark.parametrize("command", ["", *_subcommands()])
def test_help_of_every_command_works_from_the_core_install(core_venv, tmp_path, command):
    done = _kfp_finetune(core_venv, tmp_path, *([command] if command else []), "--help")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "usage: kfp-finetune" in done.stdout


def test_upload_run_and_schedule_work_from_the_core_install(core_venv, tmp_path, kfp_api_stub):
    upload = _kfp_finetune(core_venv, tmp_path, "upload", "osft-minimal", "--host", kfp_api_stub.url)
    assert upload.returncode == 0, upload.stderr
    run = _kfp_finetune(
        core_venv, tmp_path, "run", "sft-minimal", "--host", kfp_api_stub.url, "--param", f"{DATASET}=s3://b/c.jsonl"
    )
    assert run.returncode == 0, run.stderr
    schedule = _kfp_finetune(
        core_venv,
        tmp_path,
        "schedule",
        "lora-minimal",
        "--host",
        kfp_api_stub.url,
        "--interval",
        "3600",
        "--param",
        f"{DATASET}=pvc://data/chat.jsonl",
    )
    assert schedule.returncode == 0, schedule.stderr
    assert len(kfp_api_stub.pipelines) == 1 and len(kfp_api_stub.runs) == 1 and len(kfp_api_stub.recurring_runs) == 1


def test_validate_dataset_and_doctor_work_and_the_demo_names_its_extra(core_venv, tmp_path):
    data = tmp_path / "chat.jsonl"
    data.write_text(json.dumps(ROW) + "\n")
    validated = _kfp_finetune(core_venv, tmp_path, "validate-dataset", str(data), "--train-split-ratio", "1.0")
    assert validated.returncode == 0, validated.stderr
    doctor = _kfp_finetune(core_venv, tmp_path, "doctor")  # no cluster here: its checks say so, line by line
    assert "Traceback" not in doctor.stderr + doctor.stdout and "cannot connect to Kubernetes" in doctor.stdout
    demo = _kfp_finetune(core_venv, tmp_path, "demo")
    assert demo.returncode == 2 and "Traceback" not in demo.stderr
    (line,) = demo.stderr.strip().splitlines()
    assert line.startswith("kfp-finetune demo: needs the Python package 'torch'")
    assert "pip install 'kfp-finetune[demo]'" in line
