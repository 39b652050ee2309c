"""The guide's kfp (2.15.2, the suite's own) and the newest (2.17.x, ``.venv-kfp-latest``) both import every
component, compile the pipelines and run the demo pipeline under ``kfp.local``.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import DEMO_ROWS
from tests.harness.compiled import CONTAINER_SPEC_LIMIT_BYTES, GRPO_PIPELINES, container_spec_sizes

REPO_ROOT = Path(__file__).resolve().parents[1]
LATEST_PYTHON = REPO_ROOT / ".venv-kfp-latest" / "bin" / "python"
GUIDE_KFP = "2.15.2"
LATEST_KFP = "2.17.3"
PYTHONS = {LATEST_KFP: LATEST_PYTHON}

_IMPORT_AND_COMPILE = """
import sys
from pathlib import Path

import kfp
from kfp.kubernetes import __version__ as kubernetes_version

from components.data_processing.dataset_download import dataset_download
from components.deployment.kubeflow_model_registry import model_registry
from components.evaluation.lm_eval import lm_eval
from components.training.finetuning import train_model
from pipelines.compile import compile_named
from pipelines.training.finetuning import PIPELINES

assert all(c.component_spec.name for c in (dataset_download, train_model, lm_eval, model_registry))
for name in PIPELINES:
    compile_named(name, Path(sys.argv[1]) / f"{name}.yaml")
print(kfp.__version__, kubernetes_version)
"""


def _python(version: str) -> Path:
    python = PYTHONS[version]
    if not python.exists():
        pytest.fail(f"{python} is missing: run `bash scripts/setup.sh --test` (it builds the kfp {version} venv)")
    return python


def _run(python: Path, args: list[str], cwd: Path, timeout: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KFP_FINETUNE_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run([str(python), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _assert_six_pipelines_of(version: str, paths: list[Path]) -> None:
    """The eight YAMLs were compiled by kfp ``version``, each with its tasks, each container spec <= 16 KiB."""
    assert len(paths) == 8, paths
    for path in paths:
        documents = list(yaml.safe_load_all(path.read_text()))
        assert documents[0]["sdkVersion"] == f"kfp-{version}"
        tasks = set(documents[0]["root"]["dag"]["tasks"])
        evaluations = set() if path.stem in GRPO_PIPELINES else {"lm-eval", "lm-eval-2"}
        assert tasks == {"dataset-download", "train-model", "model-registry", *evaluations}, path
        sizes = container_spec_sizes(documents[0])
        assert len(sizes) == len(tasks) and max(sizes.values()) <= CONTAINER_SPEC_LIMIT_BYTES, (path.name, sizes)


def test_components_import_and_the_six_pipelines_compile_with_the_guides_kfp(shipped_pipeline_yamls):
    """The session's ``kfp-finetune compile --all`` (a fresh process) is the compile under test."""
    import kfp
    from kfp.kubernetes import __version__ as kubernetes_version

    from components.data_processing.dataset_download import dataset_download
    from components.deployment.kubeflow_model_registry import model_registry
    from components.evaluation.lm_eval import lm_eval
    from components.training.finetuning import train_model

    assert (kfp.__version__, kubernetes_version) == (GUIDE_KFP, GUIDE_KFP)  # kfp and kfp-kubernetes of that release
    assert all(c.component_spec.name for c in (dataset_download, train_model, lm_eval, model_registry))
    _assert_six_pipelines_of(GUIDE_KFP, sorted(shipped_pipeline_yamls.values()))


def test_components_import_and_the_six_pipelines_compile_with_the_newest_kfp(tmp_path):
    run = _run(_python(LATEST_KFP), ["-c", _IMPORT_AND_COMPILE, str(tmp_path)], REPO_ROOT, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == [LATEST_KFP, LATEST_KFP]  # kfp and kfp-kubernetes of that release
    _assert_six_pipelines_of(LATEST_KFP, sorted(tmp_path.glob("*.yaml")))


@pytest.mark.slow
def test_the_demo_pipeline_runs_under_kfp_local_with_the_newest_kfp(newest_kfp_demo):
    """``kfp-finetune demo --algorithm lora`` with kfp 2.17.x on the first ``DEMO_ROWS`` rows."""
    run = newest_kfp_demo.wait()
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
    story = run.stdout
    assert f"{DEMO_ROWS} valid rows, 0 rejected" in story, story
    for task in ("dataset-download", "lm-eval", "train-model", "lm-eval-2", "model-registry"):
        assert re.search(rf"^\[[1-5]/5\] {task} done in ", story, re.MULTILINE), story
    assert "held-out loss" in story and "improved" in story
    # Learning, not any tiny drop: LoRA takes the held-out loss from ~7.3 to ~3.2 on these rows (a learning rate
    # of 1e-9 also prints "improved").
    base, trained = map(float, re.search(r"held-out loss ([\d.]+) -> ([\d.]+) ", story).groups())
    assert trained < 0.7 * base, (base, trained)
    assert "did NOT improve" not in story and "Traceback" not in (newest_kfp_demo.output_dir / "demo.log").read_text()
