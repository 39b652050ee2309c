"""The lock (``constraints.txt``), ``pyproject.toml`` and the installed environment agree.

``scripts/lock.sh`` resolves the set-up, ``scripts/setup.sh`` installs from the lock, and so does the step image
(``Containerfile``: the pods run the lock's versions). These tests fail when any of the three drifts: a pin bumped in
``pyproject.toml`` without refreshing the lock, a lock edited by hand, or a venv older than the lock.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

REPO_ROOT = Path(__file__).resolve().parents[1]
LOCK = REPO_ROOT / "constraints.txt"
#: Removed after the install on purpose (see scripts/setup.sh): a CUDA-only wheel that breaks transformers on CPU torch.
NOT_INSTALLED = {"torchvision"}


def requirement_name(requirement: str) -> str:
    """The normalised distribution name of a requirement string (``'lm-eval[hf]==0.4.13'`` -> ``lm-eval``)."""
    return re.sub(r"[-_.]+", "-", Requirement(requirement).name).lower()


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
    assert not wrong, f"locked vs installed (re-run `bash scripts/setup.sh --test`): {wrong}"
    unlocked = set(installed) - set(lock) - {"kfp-finetune", "pip", "setuptools", "wheel"} - NOT_INSTALLED
    assert not unlocked, f"installed but not in the lock (run scripts/lock.sh): {sorted(unlocked)}"
    assert not NOT_INSTALLED & set(installed), f"{NOT_INSTALLED} must be removed after the install (scripts/setup.sh)"
