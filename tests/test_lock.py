"""The lock (``constraints.txt``), the step images' install lists and the installed environment agree.

``scripts/lock.sh`` resolves the set-up under the pins of the compiled pipelines' steps (one source: each component's
``packages=`` list), and ``scripts/setup.sh`` installs from the lock. These tests fail when any of the three drifts: a
component pin bumped without refreshing the lock, a lock edited by hand, or a venv older than the lock.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from pipelines.training.finetuning import PIPELINES
from tests.harness.executors import requirement_name, step_pins

REPO_ROOT = Path(__file__).resolve().parents[1]
LOCK = REPO_ROOT / "constraints.txt"
#: Removed after the install on purpose (see scripts/setup.sh): a CUDA-only wheel that breaks transformers on CPU torch.
NOT_INSTALLED = {"torchvision"}


def lock_pins() -> dict[str, str]:
    """``{normalised distribution: version}`` of the lock; every line must be an exact ``name==version``."""
    pins = {}
    for number, line in enumerate(LOCK.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)", line.strip())
        assert match, f"constraints.txt:{number}: {line!r} is not an exact name==version pin"
        name = requirement_name(match.group(1))
        assert name not in pins, f"constraints.txt:{number}: {name} is pinned twice"
        pins[name] = match.group(2)
    return pins


def test_the_lock_pins_every_step_install_at_the_steps_version(shipped_pipeline_yamls):
    steps = step_pins([shipped_pipeline_yamls[name] for name in PIPELINES])
    lock = lock_pins()
    assert steps, "no step pins found in the compiled pipelines"
    drift = {name: (version, lock.get(name)) for name, version in steps.items() if lock.get(name) != version}
    assert not drift, f"step pin vs lock (refresh with `bash scripts/lock.sh`): {drift}"


def test_the_lock_agrees_with_the_exact_pins_of_pyproject():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for requirements in project["optional-dependencies"].values():
        declared += requirements
    lock = lock_pins()
    for line in declared:
        requirement = Requirement(line)
        if requirement.name == project["name"]:  # an extra that includes another (kfp-finetune[steps])
            continue
        name = requirement_name(requirement.name)
        assert name in lock, f"pyproject.toml requires {line!r}; the lock has no {name} (run scripts/lock.sh)"
        assert requirement.specifier.contains(lock[name], prereleases=True), f"{line!r} vs lock {name}=={lock[name]}"


def test_the_installed_environment_is_the_lock():
    """A venv set up from this checkout has exactly the locked versions (the same set-up a week later, too)."""
    installed = {requirement_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    lock = lock_pins()
    wrong = {}
    for name, version in lock.items():
        have = installed.get(name)
        if have is None or have.split("+")[0] != version:
            wrong[name] = (version, have)
    assert not wrong, f"locked vs installed (re-run `bash scripts/setup.sh`): {wrong}"
    unlocked = set(installed) - set(lock) - {"kfp-finetune", "pip", "setuptools", "wheel"} - NOT_INSTALLED
    assert not unlocked, f"installed but not in the lock (run scripts/lock.sh): {sorted(unlocked)}"
    assert not NOT_INSTALLED & set(installed), f"{NOT_INSTALLED} must be removed after the install (scripts/setup.sh)"
