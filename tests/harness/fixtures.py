"""Core fixtures: the tiny offline model, the demo dataset, single-threaded torch and a fresh ``kfp.local`` runner."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pipelines.demo.demo_data import DEMO_DATASET_PATH

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama chat model + tokenizer, built once per session (read-only: copy it before changing it)."""
    from pipelines.demo.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "model")


@pytest.fixture
def tiny_model_copy(tiny_model_dir: Path, tmp_path: Path) -> Path:
    """A private, writable copy of the tiny model."""
    return Path(shutil.copytree(tiny_model_dir, tmp_path / "base-model"))


@pytest.fixture
def demo_dataset_path() -> Path:
    """The shipped demo chat dataset (JSONL, ``messages`` format)."""
    return DEMO_DATASET_PATH


@pytest.fixture(autouse=True)
def _single_torch_thread():
    """Torch on 2 cores: one thread per test is faster than contention, and seeded runs repeat exactly."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is part of the test install
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def kfp_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Initialises ``kfp.local`` (subprocess runner, fresh workspace); returns the pipeline root.

    Its tasks import this checkout (``PYTHONPATH``) and run torch on one thread (``OMP_NUM_THREADS=1``, as
    ``kfp-finetune demo`` sets: a second thread on the tiny model only contends).
    """
    from kfp import local

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    pipeline_root = tmp_path / "kfp-root"
    workspace_root = tmp_path / "kfp-workspace"
    workspace_root.mkdir()
    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=str(pipeline_root),
        workspace_root=str(workspace_root),
        raise_on_error=True,
    )
    return pipeline_root


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 1 MiB tmpfs mounted under ``tmp_path`` (a full disk for real ENOSPC); skips where it cannot be mounted."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)
