"""What each executor of a compiled pipeline runs on and installs when its pod starts.

Read from the compiled YAML (``deploymentSpec.executors``): the image, and the requirements of every
``python3 -m pip install ...`` in the container command (KFP puts the component's ``packages_to_install`` there, then
``kfp`` itself with ``--no-deps``). Used by the tests, ``benchmarks/step_start.py`` and ``scripts/lock.sh`` (not
product code: nothing in ``components/`` or ``pipelines/`` imports it).
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

_PIP_INSTALL = re.compile(r"python3 -m pip install (?P<args>.*?)(?=&&|\n|$)")
#: Distributions that carry CUDA or a GPU compiler: never to be pip-installed when a pod starts.
HEAVY = re.compile(r"^(torch|triton|nvidia-.*)$")


@dataclasses.dataclass(frozen=True)
class PipInstall:
    """One ``pip install`` of an executor: its requirement strings and whether dependencies are skipped."""

    requirements: tuple[str, ...]
    no_deps: bool


@dataclasses.dataclass(frozen=True)
class ExecutorInstall:
    """An executor's image and the ``pip install`` commands it runs at start (empty: it installs nothing)."""

    name: str
    image: str
    installs: tuple[PipInstall, ...]

    @property
    def requirements(self) -> list[str]:
        """Every requirement string installed at start, in command order."""
        return [requirement for install in self.installs for requirement in install.requirements]


def _installs(command: str) -> tuple[PipInstall, ...]:
    found = []
    for match in _PIP_INSTALL.finditer(command):
        words = shlex.split(match.group("args"))
        requirements = tuple(w for w in words if not w.startswith("-"))
        found.append(PipInstall(requirements, "--no-deps" in words))
    return tuple(found)


def executor_installs(pipeline: str | Path | dict[str, Any]) -> dict[str, ExecutorInstall]:
    """The executors of a compiled pipeline (a YAML path, YAML text or its first document), by executor name.

    Raises:
        ValueError: The document has no ``deploymentSpec.executors`` (not a compiled pipeline).
    """
    if isinstance(pipeline, dict):
        spec = pipeline
    else:
        text = Path(pipeline).read_text() if isinstance(pipeline, Path) or "\n" not in pipeline else pipeline
        spec = next(yaml.safe_load_all(text))
    executors = (spec.get("deploymentSpec") or {}).get("executors")
    if not executors:
        raise ValueError("not a compiled pipeline: no deploymentSpec.executors in the first YAML document")
    result = {}
    for name, executor in executors.items():
        container = executor.get("container") or {}
        command = "\n".join(str(part) for part in container.get("command") or [])
        result[name] = ExecutorInstall(name, container.get("image", ""), _installs(command))
    return result


def requirement_name(requirement: str) -> str:
    """The normalised distribution name of a requirement string (``'lm-eval[hf]==0.4.13'`` -> ``lm-eval``)."""
    from packaging.requirements import Requirement

    return re.sub(r"[-_.]+", "-", Requirement(requirement).name).lower()


def step_pins(pipelines: list[Path]) -> dict[str, str]:
    """``{distribution: version}`` of every ``name==version`` the compiled pipelines' steps install at start.

    These pins are the one source of the step images' package versions: ``scripts/lock.sh`` resolves the project's
    lock (``constraints.txt``) under them, so the tests run the versions the pods install.

    Raises:
        ValueError: Two steps pin different versions of one distribution.
    """
    pins: dict[str, str] = {}
    where: dict[str, str] = {}
    for path in pipelines:
        for executor in executor_installs(path).values():
            for requirement in executor.requirements:
                if "==" not in requirement:
                    continue
                name, version = requirement_name(requirement), requirement.split("==", 1)[1].strip()
                if pins.setdefault(name, version) != version:
                    raise ValueError(
                        f"{path.name} {executor.name} pins {name}=={version} but {where[name]} pins "
                        f"{name}=={pins[name]}: one version per package across the steps"
                    )
                where.setdefault(name, f"{path.name} {executor.name}")
    return pins
