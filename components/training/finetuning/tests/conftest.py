"""The Training Hub tests' shared runs (:mod:`hub_runs`): one train split and one runner for the session."""

from __future__ import annotations

import pytest

from components.training.finetuning.tests.hub_runs import HUB_TEST_FILES, HubRuns, write_train_split
from tests.harness.training_hub_envs import MAIN_VERSION
from tests.harness.workers import running_in_a_worker


@pytest.fixture(scope="session")
def hub_train_file(tmp_path_factory) -> tuple:
    """The dataset step's train split of the demo data, one file for every release: ``(path, rows)``."""
    return write_train_split(tmp_path_factory.mktemp("hub-data"))


@pytest.fixture(scope="session")
def hub_runs(tmp_path_factory, tiny_model_dir, hub_train_file):
    """The session's :class:`~hub_runs.HubRuns`; MLflow is asked for where a release lacks it (``FACTS``)."""
    from components.training.finetuning.tests.test_training_hub_versions import FACTS

    mlflow_asked = {version: not facts["mlflow"] for version, facts in FACTS.items()}
    runner = HubRuns(tmp_path_factory.mktemp("hub-runs"), hub_train_file[0], tiny_model_dir, mlflow_asked)
    yield runner
    runner.close()


@pytest.fixture(scope="session", autouse=True)
def _training_hub_runs_start_early(request):
    """Where the session runs a Training Hub test, its runs start with the first test of this folder (not in a
    ``pytest-xdist`` worker: there the test that asks starts them)."""
    if running_in_a_worker():
        return
    files = {item.path.name for item in request.session.items} & HUB_TEST_FILES
    if not files:
        return
    from components.training.finetuning.tests.test_training_hub_versions import VERSIONS

    runner = request.getfixturevalue("hub_runs")
    releases = VERSIONS if "test_training_hub_versions.py" in files else []
    for version in (MAIN_VERSION, *releases):  # the order the test files ask for them
        try:
            runner.start([version])
        except (pytest.skip.Exception, pytest.fail.Exception):
            pass  # the set-up did not build it: its tests say so when they ask
