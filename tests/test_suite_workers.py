"""The suite's split over pytest-xdist workers (``tests/harness/workers.py``): each shared run is made by one worker."""

import ast
from pathlib import Path

import pytest

from tests.harness import workers

REPO_ROOT = Path(__file__).resolve().parents[1]


def _asked_fixtures(path: Path) -> set[str]:
    """The parameter names of every function in a test file (its tests' and its own fixtures' arguments)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return {
        argument.arg
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for argument in node.args.args
    }


def _test_files() -> list[Path]:
    return sorted(
        path
        for folder in ("tests", "components", "pipelines")
        for path in (REPO_ROOT / folder).rglob("test_*.py")
        if ".venv" not in path.parts
    )


def test_every_file_that_asks_for_a_shared_run_is_in_that_runs_group():
    wrong = []
    for path in _test_files():
        relative = path.relative_to(REPO_ROOT).as_posix()
        asked = _asked_fixtures(path)
        for group, fixtures in workers.SHARED_RUN_FIXTURES.items():
            if asked & set(fixtures) and relative not in workers.SHARED_RUN_FILES[group]:
                wrong.append(
                    f"{relative} asks for {sorted(asked & set(fixtures))}: add it to SHARED_RUN_FILES[{group!r}]"
                )
    assert wrong == []


def test_every_listed_file_exists_and_asks_for_its_run():
    for group, paths in workers.SHARED_RUN_FILES.items():
        for relative in paths:
            assert _asked_fixtures(REPO_ROOT / relative) & set(workers.SHARED_RUN_FIXTURES[group]), (group, relative)


def test_the_scheduler_keeps_a_file_and_a_shared_runs_files_together():
    xdist = pytest.importorskip("xdist")
    config = type("Config", (), {"getvalue": lambda self, name: "load"})()
    scheduler = workers.shared_run_scheduler(config, log=None)
    assert scheduler is not None and xdist.__version__
    mlflow = workers.SHARED_RUN_FILES["mlflow"]
    assert scheduler._split_scope(f"{mlflow[0]}::test_a") == scheduler._split_scope(f"{mlflow[1]}::test_b[x]")
    assert scheduler._split_scope("tests/test_cli.py::test_a") == scheduler._split_scope("tests/test_cli.py::test_b")
    assert scheduler._split_scope("tests/test_cli.py::test_a") != scheduler._split_scope("tests/test_docs.py::test_a")
    explicit = type("Config", (), {"getvalue": lambda self, name: "loadfile"})()
    assert workers.shared_run_scheduler(explicit, log=None) is None


def test_slow_scopes_are_known_by_their_marks():
    assert workers.scope_is_slow("tests/test_eval_backend_pipelines.py")
    assert workers.scope_is_slow("training-hub")
    assert not workers.scope_is_slow("tests/test_lock.py")
