"""The six pipelines compiled as ``kfp-finetune compile --all`` ships them (the YAMLs are generated, not committed).

``shipped_pipeline_yamls`` compiles them once per session in a fresh process with the default settings (no
``KFP_FINETUNE_*`` variables, so the steps pip-install their packages as on a cluster) into a temporary directory.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
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


#: An embedded code archive in a compiled component (KFP's ``embedded_artifact_path``).
EMBEDDED_ARCHIVE = re.compile(r"__KFP_EMBEDDED_ARCHIVE_B64 = '([A-Za-z0-9+/=]+)'")


def open_embedded_archive(encoded: str) -> tarfile.TarFile:
    """The tar archive of a compiled component's ``__KFP_EMBEDDED_ARCHIVE_B64`` value (KFP packs it as tar.gz)."""
    return tarfile.open(fileobj=io.BytesIO(base64.b64decode(encoded)), mode="r:*")


def normalised_yaml(text: str) -> str:
    """``text`` with each embedded archive replaced by a digest of its members' names and contents.

    KFP's gzip header carries the compile time and its tar headers the user, so two compiles of the same code differ
    in those bytes only.
    """

    def digest(match: re.Match) -> str:
        with open_embedded_archive(match.group(1)) as tar:
            files = sorted((m.name, tar.extractfile(m).read()) for m in tar.getmembers() if m.isfile())
        return f"__KFP_EMBEDDED_ARCHIVE_B64 = 'sha256:{hashlib.sha256(repr(files).encode()).hexdigest()}'"

    return EMBEDDED_ARCHIVE.sub(digest, text)
