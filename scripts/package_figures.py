"""Figures of the package that depend only on the code: the wheel's size and each pipeline's run-time parameters.

Cheap and deterministic, so ``scripts/figures.py`` re-measures them on every check (:func:`figures`): the wheel is
built with ``pip wheel --no-deps --no-build-isolation`` from a copy of the sources (as ``tests/test_wheel.py`` does),
and the parameters are counted from the pipeline functions' compiled specs.

Usage: ``python scripts/package_figures.py [--write-figures]`` from the repository root.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
#: What the wheel is built from (``tests/harness/installed_wheel.py`` copies the same).
SOURCES = ("components", "pipelines", "kfp_finetune", "setup.py", "pyproject.toml", "README.md")


def wheel_bytes() -> int:
    """Bytes of the wheel built from a copy of the sources."""
    with tempfile.TemporaryDirectory(prefix="package-figures-") as scratch:
        source, out = Path(scratch, "source"), Path(scratch, "wheel")
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "*.egg-info")
        for name in SOURCES:
            if (REPO_ROOT / name).is_dir():
                shutil.copytree(REPO_ROOT / name, source / name, ignore=ignore)
            elif (REPO_ROOT / name).is_file():
                source.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO_ROOT / name, source / name)
        pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w"]
        subprocess.run([*pip, str(out), str(source)], cwd=source, check=True, capture_output=True)
        (built,) = out.glob("kfp_finetune-*.whl")
        return built.stat().st_size


def parameter_counts() -> dict[str, int]:
    """Run-time parameters of each pipeline (its compiled root inputs)."""
    from pipelines.compile import pipeline_function
    from pipelines.training.finetuning import PIPELINES

    return {name: len(pipeline_function(name).pipeline_spec.root.input_definitions.parameters) for name in PIPELINES}


#: Core dependencies whose installed size the README states (pinned in ``constraints.txt``).
STATED_DEPENDENCIES = ("tenacity", "msgspec")


def installed_bytes(distribution: str) -> int:
    """Bytes of the files a distribution's wheel installs (its ``RECORD``, compiled ``.pyc`` files left out)."""
    from importlib.metadata import distribution as find

    return sum(file.size or 0 for file in find(distribution).files or ())


def figures(wheel: Path | None = None) -> dict[str, dict[str, Any]]:
    """The wheel's size, the stated dependencies' installed sizes (KiB, rounded) and each pipeline's parameters.

    Args:
        wheel: A wheel built from this tree (``tests/harness/installed_wheel.py``'s); default: build one now.
    """
    from scripts.figures import figure

    size = wheel.stat().st_size if wheel else wheel_bytes()
    found = {"package.wheel": figure(round(size / 1024), "KiB", f"{size / 1024:.0f}")}
    for name in STATED_DEPENDENCIES:
        size = installed_bytes(name)
        found[f"package.{name}.installed"] = figure(round(size / 1024), "KiB", f"{size / 1024:.0f}")
    for name, count in parameter_counts().items():
        found[f"package.{name}.parameters"] = figure(count, "parameters")
    return found


if __name__ == "__main__":
    from scripts.figures import record

    found = figures()
    print(*(f"{name}: {entry['text']} {entry['unit']}" for name, entry in found.items()), sep="\n")
    if "--write-figures" in sys.argv:
        record(found, "scripts/package_figures.py")
