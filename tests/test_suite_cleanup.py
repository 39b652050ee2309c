"""A test session leaves no temporary files behind: not its own, nor those of the processes it starts."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

SESSION = """
import subprocess, tempfile
from pathlib import Path

def test_makes_temporary_files(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    Path(tempfile.mkdtemp(prefix="torchelastic_")).joinpath("f").write_text("y")
    made = subprocess.run(["mktemp", "-d"], capture_output=True, text=True, check=True).stdout.strip()
    Path(made, "ephemeral_component.py").write_text("z")
"""


def test_a_session_leaves_its_temporary_directory_as_it_found_it(tmp_path):
    outer = tmp_path / "system-tmp"
    outer.mkdir()
    (tmp_path / "test_session.py").write_text(SESSION)
    env = {**os.environ, "TMPDIR": str(outer), "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider", "test_session.py"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(outer.iterdir()) == []


def test_this_session_works_in_its_own_temporary_directory():
    assert Path(tempfile.gettempdir()).name.startswith("kfp-finetune-tests-")
    assert os.environ["TMPDIR"] == tempfile.gettempdir()
