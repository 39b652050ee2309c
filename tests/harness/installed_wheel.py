"""The built wheel installed as a user installs it, beside a user's project (``tests/test_wheel.py``'s subject).

The wheel is built once per session (``pip wheel --no-deps --no-build-isolation`` of a copy of the sources, so the
clone gets no ``build/``) and installed with ``--no-deps`` into a fresh venv that sees this environment's third-party
packages through a ``.pth`` file. A directory a ``.pth`` file adds is not a site directory, so the ``.pth`` files in
it (the editable install's finder among them) are not run: the venv sees the wheel's ``kfp_finetune`` and nothing of
the clone. The user's project has its own ``components`` and ``pipelines`` packages, the names the clone uses.
Session fixtures, so that ``tests/conftest.py`` can start the wheel's demo in the background early.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
#: What the build needs from the clone (pyproject's readme included).
SOURCES = ("components", "pipelines", "kfp_finetune", "setup.py", "pyproject.toml", "README.md")


def user_environment(**env: str) -> dict[str, str]:
    """This process's environment without ``PYTHONPATH``/``PYTHONHOME`` (the clone stays out of sight), plus ``env``."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")} | env


def run_checked(argv: list[str], cwd: Path, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    """Runs ``argv`` in ``cwd`` with :func:`user_environment`; fails the test with its output unless it exits 0."""
    result = subprocess.run(argv, cwd=cwd, env=user_environment(**env), capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{argv} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the clone's sources."""
    source = tmp_path_factory.mktemp("source")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "*.egg-info")
    for name in SOURCES:
        copy = shutil.copytree if (REPO_ROOT / name).is_dir() else shutil.copy2
        copy(REPO_ROOT / name, source / name, **({"ignore": ignore} if (REPO_ROOT / name).is_dir() else {}))
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w"]
    run_checked([*pip, str(out), str(source)], cwd=source)
    (built,) = out.glob("kfp_finetune-*.whl")
    return built


@pytest.fixture(scope="session")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed (``--no-deps``) on this environment's third-party packages."""
    return _venv_with_the_wheel(tmp_path_factory.mktemp("venv"), wheel, sysconfig.get_paths()["purelib"])


def _purelib(python: Path | str, cwd: Path) -> str:
    """The site-packages folder of ``python``."""
    probe = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return run_checked([str(python), "-c", probe], cwd).stdout.strip()


def _venv_with_the_wheel(venv: Path, wheel: Path, base_purelib: str) -> Path:
    """A fresh venv in ``venv`` that sees ``base_purelib``'s packages (a ``.pth`` file), the wheel installed there."""
    run_checked([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], cwd=venv)
    python = venv / "bin" / "python"
    Path(_purelib(python, venv), "zz-base-environment.pth").write_text(base_purelib + "\n")
    run_checked(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        venv,
    )
    return venv


@pytest.fixture(scope="session")
def user_project(tmp_path_factory) -> Path:
    """A user's project with its own ``components`` and ``pipelines`` packages."""
    project = tmp_path_factory.mktemp("user-project")
    for name in ("components", "pipelines"):
        (project / name).mkdir()
        (project / name / "__init__.py").write_text(f'OWNER = "the user\'s {name}"\n')
    return project


#: The core install's dependencies only (``scripts/setup_core_venv.sh``, run by ``scripts/setup.sh``).
CORE_VENV = REPO_ROOT / ".venv-core"


@pytest.fixture(scope="session")
def core_venv(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed ``--no-deps`` on :data:`CORE_VENV`'s packages (the core dependencies,
    nothing of an extra): what ``pip install kfp-finetune`` gives a user."""
    core_python = CORE_VENV / "bin" / "python"
    if not core_python.exists():
        pytest.fail(f"{core_python} is missing: run `bash scripts/setup.sh --test` (it builds the core install's venv)")
    venv = tmp_path_factory.mktemp("core-venv")
    return _venv_with_the_wheel(venv, wheel, _purelib(core_python, venv))
