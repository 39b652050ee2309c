"""Where a test runs: one pytest process, or a ``pytest-xdist`` worker (the suite's ``-n``, see ``pyproject.toml``)."""

import os
from pathlib import Path


def running_in_a_worker() -> bool:
    """Whether this process is a ``pytest-xdist`` worker (whose session holds every item, not only those it runs)."""
    return "PYTEST_XDIST_WORKER" in os.environ


#: The files whose tests share a session fixture that makes a whole run (the Training Hub releases' pod runs, a demo,
#: the installed wheel and its venvs, an MLflow server), by that run: under ``pytest-xdist`` each group of files goes to
#: one worker, so each run is made once. Every other file is its own group (its module fixtures made once, and its tests
#: that bind a fixed port never overlapping). ``tests/test_suite_workers.py`` checks this table against the fixtures
#: each file asks for (:data:`SHARED_RUN_FIXTURES`).
SHARED_RUN_FILES = {
    "training-hub": (
        "components/training/finetuning/tests/test_training_hub_data.py",
        "components/training/finetuning/tests/test_training_hub_versions.py",
    ),
    "installed-wheel": ("tests/test_wheel.py", "tests/test_core_install.py", "tests/test_figures.py"),
    "mlflow": (
        "components/training/finetuning/tests/test_progress_server.py",
        "components/training/finetuning/tests/test_tracking.py",
        "components/training/finetuning/tests/test_training_component.py",
        "components/training/finetuning/tests/test_transformers_backend.py",
    ),
}
#: The session fixtures behind :data:`SHARED_RUN_FILES`, by group (those made from one another share it).
SHARED_RUN_FIXTURES = {
    "training-hub": ("hub_runs", "hub_train_file"),
    "installed-wheel": ("wheel", "venv", "core_venv", "wheel_demo", "user_project"),
    "mlflow": ("mlflow_server",),
}
_GROUP_OF_FILE = {path: group for group, paths in SHARED_RUN_FILES.items() for path in paths}


def scope_is_slow(scope: str) -> bool:
    """Whether a scheduling scope (a test file, or a shared run's group of files) holds a ``slow``-marked test: such
    scopes are handed out first, so that the longest ones (whole pipelines, demos) do not end the session alone."""
    root = Path(__file__).resolve().parents[2]
    paths = SHARED_RUN_FILES.get(scope, (scope,))
    return any("mark.slow" in (root / path).read_text() for path in paths if (root / path).is_file())


def shared_run_scheduler(config, log):
    """The suite's ``pytest-xdist`` scheduler (``conftest.py``): whole files, and the files of one shared run
    (:data:`SHARED_RUN_FILES`), per worker; ``None`` (xdist's own) for an explicit ``--dist``.

    Not ``--dist loadgroup`` with marks: on pytest 9.2 xdist 3.8's loadgroup silently stops grouping (its node-id
    suffix no longer takes, pytest-dev/pytest-xdist#1386), so the grouping is the scope of ``--dist loadscope``'s
    scheduler, the extension point xdist's own ``loadfile`` uses.
    """
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedRunScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return _GROUP_OF_FILE.get(path, path)

        def _assign_work_unit(self, node) -> None:
            if not getattr(self, "_slow_first", False):  # the first assignment: the whole queue is known
                self._slow_first = True
                for scope in reversed([scope for scope in self.workqueue if scope_is_slow(scope)]):
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return SharedRunScheduling(config, log)
