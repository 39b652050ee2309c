"""The Training Hub environments of the set-up: one per release a RHOAI runtime image carries, plus the main .venv.

``scripts/setup_training_hub.sh`` builds each line of ``scripts/training-hub-envs.txt`` under
``.venv-training-hub/<version>`` (or leaves ``<version>.unavailable`` with the reason); the main ``.venv`` carries the
project's pin, 0.11.2. Tests run the pod command with an environment's Python, as the runtime image would.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
ENVS_ROOT = REPOSITORY / ".venv-training-hub"
ENVS_LIST = REPOSITORY / "scripts" / "training-hub-envs.txt"
#: The version the main .venv carries (pyproject's pin).
MAIN_VERSION = "0.11.2"


@dataclasses.dataclass(frozen=True)
class HubEnv:
    """One Training Hub environment: its version, its Python, and whether it shares the main .venv's transformers."""

    version: str
    python: Path
    own_transformers: bool

    @property
    def bin_dir(self) -> Path:
        """Where its ``torchrun`` is (put first on ``PATH``, as in the runtime image)."""
        return self.python.parent


def listed_versions() -> list[str]:
    """The versions of ``scripts/training-hub-envs.txt`` (oldest first)."""
    lines = [line.split() for line in ENVS_LIST.read_text().splitlines()]
    return [words[0] for words in lines if words and not words[0].startswith("#")]


def _base(version: str) -> str:
    for line in ENVS_LIST.read_text().splitlines():
        words = line.split()
        if words and words[0] == version:
            return words[2]
    raise ValueError(f"training-hub {version} is not listed in {ENVS_LIST}")


def hub_env(version: str, root: Path = ENVS_ROOT) -> HubEnv:
    """The environment of ``version``; skips with the set-up's reason where it could not be built.

    Fails (not skips) where neither the environment nor a reason is there: the set-up did not run.
    """
    if version == MAIN_VERSION:
        return HubEnv(version, Path(sys.executable), own_transformers=False)
    python = root / version / "bin" / "python"
    if (root / version / ".kfp-finetune-installed").is_file() and python.exists():
        return HubEnv(version, python, own_transformers=_base(version) == "own")
    reason = root / f"{version}.unavailable"
    if reason.is_file():
        pytest.skip(f"training-hub {version}: the set-up could not build its environment: {reason.read_text().strip()}")
    pytest.fail(f"training-hub {version}: {root / version} is missing; run `bash scripts/setup.sh --test`")


def build_tiny_model_in(env: HubEnv, output_dir: Path) -> Path:
    """The tiny model saved by ``env``'s own transformers (a transformers 5 model does not load under 4.57)."""
    code = "import sys; from pathlib import Path; from pipelines.demo.tiny_model import build_tiny_model; "
    code += "build_tiny_model(Path(sys.argv[1]))"
    subprocess.run(
        [str(env.python), "-c", code, str(output_dir)],
        cwd=REPOSITORY,
        env={"PYTHONPATH": str(REPOSITORY), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
        check=True,
        capture_output=True,
        timeout=180,
    )
    return output_dir
