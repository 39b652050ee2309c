"""The six pipelines compiled as ``kfp-finetune compile --all`` ships them (the YAMLs are generated, not committed).

``shipped_pipeline_yamls`` compiles them once per session in a fresh process with the default settings (no
``KFP_FINETUNE_*`` variables) into a temporary directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def pipeline_documents(source: Path | str | bytes) -> list:
    """The YAML documents of a compiled pipeline (a path, or its text), parsed as ``yaml.safe_load_all`` parses them,
    by libyaml where PyYAML has it (the product's ``FAST_SAFE_LOADER``; ``test_pipelines.py`` checks they agree)."""
    import yaml

    from pipelines.kfp_api.arguments import FAST_SAFE_LOADER

    text = source.read_text() if isinstance(source, Path) else source
    return list(yaml.load_all(text, Loader=FAST_SAFE_LOADER))


def compile_shipped(output_dir: Path) -> dict[str, Path]:
    """Runs ``kfp-finetune compile --all -o output_dir`` with default settings; returns pipeline name -> YAML."""
    from pipelines.training.finetuning import PIPELINES

    env = {k: v for k, v in os.environ.items() if not k.startswith("KFP_FINETUNE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "compile", "--all", "-o", str(output_dir), "--no-image-check"],
        cwd=REPO_ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return {name: output_dir / f"{name}.yaml" for name in PIPELINES}


@pytest.fixture(scope="session")
def shipped_pipeline_yamls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Pipeline name -> its YAML compiled with default settings, once per session (read-only)."""
    return compile_shipped(tmp_path_factory.mktemp("shipped-pipelines"))


@pytest.fixture(scope="session")
def default_settings_yamls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Pipeline name -> its YAML compiled in this process with ``CompileSettings()``, once per session (read-only)."""
    from pipelines.compile import CompileSettings, compile_named
    from pipelines.training.finetuning import PIPELINES

    out = tmp_path_factory.mktemp("compiled-default")
    return {name: compile_named(name, out / f"{name}.yaml", CompileSettings()) for name in PIPELINES}


@pytest.fixture(scope="session")
def environment_settings_yamls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Pipeline name -> its YAML compiled in this process with the suite's ``KFP_FINETUNE_*`` variables, as
    ``compile_named`` does without settings, once per session (read-only)."""
    from pipelines.compile import compile_named
    from pipelines.training.finetuning import PIPELINES

    out = tmp_path_factory.mktemp("compiled-environment")
    return {name: compile_named(name, out / f"{name}.yaml") for name in PIPELINES}


#: The most a compiled task's container spec may weigh: KFP's Argo backend keeps it five times in the Workflow (the
#: arguments, the driver's inputs and its pod spec patch, twice more in the executor's inputs: benchmarks/).
CONTAINER_SPEC_LIMIT_BYTES = 16 * 1024


def container_spec_sizes(spec: dict) -> dict[str, int]:
    """``{executor: bytes}`` of each executor's container spec in a compiled pipeline (compact JSON, as KFP's
    backend stores it in the Argo Workflow's arguments and hands it to the task's driver)."""
    import json

    executors = spec.get("deploymentSpec", {}).get("executors", {})
    return {
        name: len(json.dumps(executor["container"], separators=(",", ":")).encode())
        for name, executor in executors.items()
    }


#: The reinforcement-learning pipelines: one flavour each, no lm-eval step (the reward gate decides), and the
#: single-GPU shape of the guide's hardware table (OSFT's row).
GRPO_PIPELINES = ("grpo", "lora-grpo")
