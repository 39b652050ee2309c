"""The whole-pipeline runs of ``tests/``, started in the background with the first test of the folder.

``test_demo.py``'s LoRA demo (the guide's kfp, this venv), ``test_kfp_releases.py``'s (the newest kfp,
``.venv-kfp-latest``), ``test_wheel.py``'s (the installed wheel) and ``test_quick_start_local.py``'s Quick Start are
whole pipelines in other interpreters, their steps one after another on one core: started early, they run beside the
in-process tests, and the test that asserts on a run waits for what is left of it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.workers import running_in_a_worker

REPO_ROOT = Path(__file__).resolve().parents[1]
NEWEST_KFP_PYTHON = REPO_ROOT / ".venv-kfp-latest" / "bin" / "python"
#: Rows of the shipped demo dataset the LoRA demos train on: 72 train / 8 held-out, 72 steps instead of 360 (the full
#: run's figures are ``benchmarks/demo_figures.py``'s); LoRA still improves the held-out loss (7.3 -> 3.2).
DEMO_ROWS = 80
_DEMO_TEST = "test_the_demo_pipeline_runs_under_kfp_local_with_the_newest_kfp"


class BackgroundRun:
    """A command run in the background in ``cwd`` (default ``root``); its output goes to ``root/stdout`` and
    ``root/stderr``."""

    def __init__(self, command: list[str], root: Path, env: dict[str, str], cwd: Path | None = None):
        self.root = root
        self.stdout, self.stderr = root / "stdout", root / "stderr"
        with self.stdout.open("w") as out, self.stderr.open("w") as err:
            self.process = subprocess.Popen(command, cwd=cwd or root, env=env, stdout=out, stderr=err, text=True)

    def wait(self, timeout: float = 600) -> subprocess.CompletedProcess:
        """The finished run (killed and failed after ``timeout`` seconds from now)."""
        try:
            returncode = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"{self.process.args} did not end in {timeout}s: {self.stdout.read_text()[-2000:]}")
        return subprocess.CompletedProcess(
            self.process.args, returncode, self.stdout.read_text(), self.stderr.read_text()
        )

    def stop(self) -> None:
        """Kills the run if it still goes (a session that ends early)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class DemoRun(BackgroundRun):
    """``kfp-finetune demo ARGUMENTS`` run by ``python`` (its venv's kfp) in the background, this checkout first on
    ``PYTHONPATH``; ``root/demo`` is its output directory, ``root/system-tmp`` its ``TMPDIR`` (empty after a good run).
    """

    def __init__(self, python: Path, root: Path, arguments: list[str], env: dict[str, str]):
        self.output_dir, self.tmpdir = root / "demo", root / "system-tmp"
        self.modelcar: list[str] = []  # the --modelcar-* arguments among ``arguments``
        self.tmpdir.mkdir()
        command = [str(python), "-m", "pipelines.cli", "demo", *arguments, "--output-dir", str(self.output_dir)]
        super().__init__(command, root, {**env, "PYTHONPATH": str(REPO_ROOT), "TMPDIR": str(self.tmpdir)})


#: The guide's Quick Start (OSFT-minimal, unmodified) under ``kfp.local``: ``root model dataset`` as arguments; what
#: ``tests/harness/fixtures.py``'s ``kfp_local`` sets up, then the guide's parameters.
_QUICK_START = """
import sys
from pathlib import Path

from kfp import local

from pipelines.compile import pipeline_function
from pipelines.local_pipeline import local_pipeline

root, model, dataset = (Path(argument) for argument in sys.argv[1:4])
(root / "kfp-workspace").mkdir()
local.init(
    runner=local.SubprocessRunner(use_venv=False),
    pipeline_root=str(root / "kfp-root"),
    workspace_root=str(root / "kfp-workspace"),
    raise_on_error=True,
)
local_pipeline(pipeline_function("osft-minimal"))(
    phase_01_dataset_man_data_uri=str(dataset),
    phase_01_dataset_opt_subset=60,  # the guide's "subset of the dataset"
    phase_02_train_man_train_model=str(model),
    phase_03_eval_man_eval_tasks=[],  # the held-out split only (benchmarks need downloads)
)
"""


def _first_rows(root: Path, rows: int) -> Path:
    from pipelines.demo.demo_data import DEMO_DATASET_PATH

    dataset = root / "demo_chat.jsonl"
    dataset.write_text("".join(DEMO_DATASET_PATH.read_text().splitlines(keepends=True)[:rows]))
    return dataset


@pytest.fixture(scope="session")
def newest_kfp_demo(tmp_path_factory):
    """The newest kfp's LoRA demo on the first ``DEMO_ROWS`` rows (fails where ``.venv-kfp-latest`` is missing)."""
    if not NEWEST_KFP_PYTHON.exists():
        pytest.fail(f"{NEWEST_KFP_PYTHON} is missing: run `bash scripts/setup.sh --test` (it builds it)")
    root = tmp_path_factory.mktemp("newest-kfp-demo")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KFP_FINETUNE_")}
    arguments = ["--algorithm", "lora", "--dataset-uri", str(_first_rows(root, DEMO_ROWS))]
    run = DemoRun(NEWEST_KFP_PYTHON, root, arguments, env)
    yield run
    run.stop()


@pytest.fixture(scope="session")
def lora_demo(request, tmp_path_factory):
    """The guide's kfp's LoRA demo on the first ``DEMO_ROWS`` rows, publishing a modelcar where ``docker-registry``
    and olot are here (:attr:`DemoRun.modelcar` holds those arguments, empty without them)."""
    import importlib.util

    from tests.harness.oci_registry import missing_tools, write_image_layout

    root = tmp_path_factory.mktemp("lora-demo")
    modelcar: list[str] = []
    if not missing_tools() and importlib.util.find_spec("olot") is not None:
        registry = request.getfixturevalue("oci_registry")
        write_image_layout(root / "base", [{"bin/sh": b"#!/bin/true\n"}], "1", history=True)
        registry.push(root / "base", "1", "base/demo:1")
        modelcar = ["--modelcar-uri", f"oci://{registry.host}/demo/tiny:1"]
        modelcar += ["--modelcar-base-image", f"{registry.host}/base/demo:1"]
    arguments = ["--algorithm", "lora", "--dataset-uri", str(_first_rows(root, DEMO_ROWS)), *modelcar]
    run = DemoRun(Path(sys.executable), root, arguments, dict(os.environ))
    run.modelcar = modelcar
    yield run
    run.stop()


@pytest.fixture(scope="session")
def quick_start_run(tmp_path_factory, tiny_model_dir):
    """The Quick Start on a machine without a cluster (no ``KUBERNETES_*`` address): a :class:`BackgroundRun`."""
    from pipelines.demo.demo_data import DEMO_DATASET_PATH

    root = tmp_path_factory.mktemp("quick-start")
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVER_URL")}
    env.update(PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1")
    command = [sys.executable, "-c", _QUICK_START, str(root), str(tiny_model_dir), str(DEMO_DATASET_PATH)]
    run = BackgroundRun(command, root, env)
    yield run
    run.stop()


@pytest.fixture(scope="session")
def wheel_demo(tmp_path_factory, venv, user_project):
    """``kfp-finetune demo`` of the installed wheel, run in the user's project as a user runs it: a
    :class:`BackgroundRun` (``tests/harness/installed_wheel.py`` builds the wheel and its venv)."""
    from tests.harness.installed_wheel import user_environment

    command = [str(venv / "bin" / "kfp-finetune"), "demo"]
    run = BackgroundRun(command, tmp_path_factory.mktemp("wheel-demo"), user_environment(), cwd=user_project)
    yield run
    run.stop()


_EARLY = {
    "test_unmodified_osft_minimal_runs_under_kfp_local_with_the_local_launcher": "quick_start_run",
    "test_lora_demo_tells_a_short_story_and_improves_on_the_base_model": "lora_demo",
    _DEMO_TEST: "newest_kfp_demo",
    "test_kfp_finetune_demo_runs_from_the_installed_wheel": "wheel_demo",
}


@pytest.fixture(scope="session", autouse=True)
def _demos_start_early(request):
    """Where the session runs a demo test, its run starts with the first test of this folder (in a single process; a
    ``pytest-xdist`` worker starts it when its test asks, the other worker running tests beside it)."""
    if running_in_a_worker():
        return
    names = {item.name for item in request.session.items}
    for test, fixture in _EARLY.items():
        if test in names and (fixture != "newest_kfp_demo" or NEWEST_KFP_PYTHON.exists()):
            try:
                request.getfixturevalue(fixture)
            except (Exception, pytest.fail.Exception):
                pass  # a run that cannot start (the wheel does not build, say) fails its own tests, not all of them
