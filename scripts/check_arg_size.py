"""Checks that no single argument of any compiled component exceeds the limit (default 96 KiB).

Linux rejects one ``execve`` argument over 128 KiB (``MAX_ARG_STRLEN``); a lightweight component's whole Python
source, embedded code included, is one argument. Usage: ``python scripts/check_arg_size.py [YAML ...]``; with no
files it compiles the six pipelines with default settings into a temporary directory and checks those. Exit code 1
lists the offenders.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import yaml

#: 32 KiB under Linux's 128 KiB (``MAX_ARG_STRLEN``): a component whose code outgrows it runs on the project's step
#: image instead (as ``train_model`` does: ``benchmarks/component_delivery.py``, ``docs/architecture.md``).
LIMIT_BYTES = 96 * 1024
REPO_ROOT = Path(__file__).resolve().parents[1]


def container_arguments(spec: dict) -> Iterator[tuple[str, str]]:
    """Yields ``(executor name, argument)`` for every command and args entry of a compiled pipeline/component."""
    for name, executor in spec.get("deploymentSpec", {}).get("executors", {}).items():
        container = executor.get("container", {})
        for argument in [*container.get("command", []), *container.get("args", [])]:
            yield name, str(argument)


def oversized_arguments(path: Path, limit: int = LIMIT_BYTES) -> list[str]:
    """Describes every argument in ``path`` larger than ``limit`` bytes (UTF-8)."""
    problems = []
    for document in yaml.safe_load_all(path.read_text()):
        for executor, argument in container_arguments(document or {}):
            size = len(argument.encode())
            if size >= limit:
                problems.append(f"{path}: {executor}: an argument of {size} bytes (limit {limit})")
    return problems


def largest_argument(path: Path) -> int:
    """Size in bytes of the largest argument in ``path``."""
    sizes = [len(a.encode()) for d in yaml.safe_load_all(path.read_text()) for _, a in container_arguments(d or {})]
    return max(sizes, default=0)


def compile_all(output_dir: Path) -> list[Path]:
    """The six pipelines compiled with default settings into ``output_dir``."""
    sys.path.insert(0, str(REPO_ROOT))
    from pipelines.compile import compile_named
    from pipelines.training.finetuning import PIPELINES

    return [compile_named(name, output_dir / f"{name}.yaml") for name in PIPELINES]


def main(paths: list[str]) -> int:
    """Checks ``paths`` (default: the six pipelines, compiled now with default settings) and prints the result."""
    files = [Path(p) for p in paths] or compile_all(Path(tempfile.mkdtemp(prefix="check-arg-size-")))
    if not files:
        print("no compiled YAML found", file=sys.stderr)
        return 1
    problems = [problem for path in files for problem in oversized_arguments(path)]
    for path in files:
        print(f"{path}: largest argument {largest_argument(path)} bytes")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
