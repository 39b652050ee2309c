"""The newest kfp's demo run (``test_kfp_releases.py``), started in the background with the first test of ``tests/``.

It is a whole pipeline in another interpreter (``.venv-kfp-latest``), its steps one after another on one core: started
early, it runs beside the in-process tests on the other core, and the test that asserts on it waits for what is left.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
NEWEST_KFP_PYTHON = REPO_ROOT / ".venv-kfp-latest" / "bin" / "python"
#: Rows of the shipped demo dataset the run trains on: 72 train / 8 held-out, 72 steps instead of 360 (the full run and
#: its figures are ``tests/test_demo.py``'s); LoRA still improves the held-out loss (7.3 -> 3.2).
DEMO_ROWS = 80
_DEMO_TEST = "test_the_demo_pipeline_runs_under_kfp_local_with_the_newest_kfp"


class DemoRun:
    """``kfp-finetune demo --algorithm lora`` on the first ``DEMO_ROWS`` demo rows, run by the newest kfp's Python."""

    def __init__(self, root: Path):
        from pipelines.demo.demo_data import DEMO_DATASET_PATH

        self.root, self.output_dir = root, root / "demo"
        dataset = root / "demo_chat.jsonl"
        dataset.write_text("".join(DEMO_DATASET_PATH.read_text().splitlines(keepends=True)[:DEMO_ROWS]))
        command = [str(NEWEST_KFP_PYTHON), "-m", "pipelines.cli", "demo", "--algorithm", "lora"]
        command += ["--dataset-uri", str(dataset), "--output-dir", str(self.output_dir)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("KFP_FINETUNE_")}
        env["PYTHONPATH"] = str(REPO_ROOT)
        self.stdout, self.stderr = root / "stdout", root / "stderr"
        with self.stdout.open("w") as out, self.stderr.open("w") as err:
            self.process = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=err, text=True)

    def wait(self, timeout: float = 600) -> subprocess.CompletedProcess:
        """The finished run (killed and failed after ``timeout`` seconds from now)."""
        try:
            returncode = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"the newest kfp's demo did not end in {timeout}s: {self.stdout.read_text()[-2000:]}")
        return subprocess.CompletedProcess(
            self.process.args, returncode, self.stdout.read_text(), self.stderr.read_text()
        )


@pytest.fixture(scope="session")
def newest_kfp_demo(tmp_path_factory):
    """The session's :class:`DemoRun` (fails where ``.venv-kfp-latest`` is missing)."""
    if not NEWEST_KFP_PYTHON.exists():
        pytest.fail(f"{NEWEST_KFP_PYTHON} is missing: run `bash scripts/setup.sh` (it builds the newest kfp's venv)")
    run = DemoRun(tmp_path_factory.mktemp("newest-kfp-demo"))
    yield run
    if run.process.poll() is None:
        run.process.kill()
        run.process.wait()


@pytest.fixture(scope="session", autouse=True)
def _newest_kfp_demo_starts_early(request):
    """Where the session runs the newest kfp's demo test, the run starts with the first test of this folder."""
    if NEWEST_KFP_PYTHON.exists() and any(item.name == _DEMO_TEST for item in request.session.items):
        request.getfixturevalue("newest_kfp_demo")
