"""The RHOAI guide's compile environment has only ``kfp`` and ``kfp-kubernetes``: the pipelines compile there.

Each runs in a child interpreter where every distribution outside kfp's dependency closure cannot be imported.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

REPO_ROOT = Path(__file__).resolve().parents[1]
FACTS = yaml.safe_load((REPO_ROOT / "tests/specs/guide/rhoai_guide_facts.yaml").read_text())
PIPELINES = sorted(path.parent.name for path in (REPO_ROOT / "pipelines/training").glob("*/pipeline.py"))
_CHILD = """
import json, runpy, sys
for name in json.loads(sys.argv[1]):
    sys.modules[name] = None  # "import name" raises ImportError, as where the package is not installed
runpy.run_path(sys.argv[2], run_name="__main__")
"""


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def kfp_closure() -> frozenset[str]:
    """The distributions ``pip install kfp kfp-kubernetes`` installs (normalised names), from the installed metadata."""
    wanted, seen = ["kfp", "kfp-kubernetes"], set()
    while wanted:
        name = _normalise(wanted.pop())
        if name in seen:
            continue
        seen.add(name)
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                wanted.append(requirement.name)
    return frozenset(seen)


@functools.cache
def blocked_modules() -> list[str]:
    """Top-level modules of installed distributions the guide's venv would not have (the project's own excepted)."""
    closure = kfp_closure()
    allowed = {"components", "pipelines", "tests"}
    blocked = set()
    for module, distributions in metadata.packages_distributions().items():
        if any(_normalise(d) in closure for d in distributions):
            allowed.add(module)
        elif not module.startswith("_") or module in ("_yaml",):
            blocked.add(module)
    return sorted(blocked - allowed - set(sys.stdlib_module_names))


def _run(script: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "HOME": str(cwd)}
    command = [sys.executable, "-c", _CHILD, json.dumps(blocked_modules()), str(script)]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_block_list_is_what_the_guides_venv_lacks():
    blocked = blocked_modules()
    for module in (
        "msgspec",
        "torch",
        "transformers",
        "tenacity",
        "boto3",
        "lm_eval",
        "model_registry",
        "training_hub",
    ):
        assert module in blocked, module
    for module in ("kfp", "yaml", "google", "kubernetes", "requests"):
        assert module not in blocked, module


@pytest.mark.parametrize("name", PIPELINES)
def test_each_pipeline_compiles_with_only_kfp_installed(name, tmp_path, shipped_pipeline_yamls):
    copy = tmp_path / name / "pipeline.py"  # a copy, so the clone's own pipeline.yaml is not rewritten
    copy.parent.mkdir()
    shutil.copyfile(REPO_ROOT / "pipelines/training" / name / "pipeline.py", copy)
    run = _run(copy, tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    # beside the module, the same YAML `kfp-finetune compile` writes in the complete environment
    assert str(copy.with_name("pipeline.yaml")) in run.stdout
    compiled = copy.with_name("pipeline.yaml").read_text()
    assert compiled == shipped_pipeline_yamls[name.replace("_", "-")].read_text()


def test_the_guides_snippet_compiles_with_only_kfp_installed(tmp_path):
    from tests.test_guide import with_declared_workspace

    script = tmp_path / "my_pipeline.py"
    output = tmp_path / "my_pipeline.yaml"
    script.write_text(
        with_declared_workspace(FACTS["custom_pipeline_snippet"])
        + f"\n\nfrom kfp import compiler\ncompiler.Compiler().compile(my_pipeline, {str(output)!r})\n"
    )
    run = _run(script, tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "train-model" in output.read_text()
