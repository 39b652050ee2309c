"""The code base is ruff-clean (E, W, F, I, D with Google docstrings, 120 columns; config in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_is_clean():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
