"""Test-suite wide settings: offline hubs, one temporary folder, shared fixtures from ``tests/harness``."""

import atexit
import os
import shutil
import tempfile

import pytest

from tests.harness.workers import running_in_a_worker

# Every temporary file of the suite and of the processes it starts (kfp.local's `mktemp -d` folders, torchrun's
# torchelastic_* folders, pytest's own tmp_path trees) goes under one folder of the system's temporary directory,
# removed when the session ends: a run leaves nothing behind.
SUITE_TMPDIR = tempfile.mkdtemp(prefix="kfp-finetune-tests-")
os.environ["TMPDIR"] = SUITE_TMPDIR
tempfile.tempdir = None  # re-read TMPDIR
atexit.register(shutil.rmtree, SUITE_TMPDIR, ignore_errors=True)

# A Hub call must fail loudly in tests and CI: nothing can be downloaded there.
for _name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ[_name] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The suite compiles offline: `compile`/`upload`/`run`/`doctor` do not ask registries for the images (the image-check
# tests, tests/test_image_check.py, turn it on against registries on 127.0.0.1).
os.environ["KFP_FINETUNE_NO_IMAGE_CHECK"] = "1"

pytest_plugins = [
    "tests.harness.fixtures",
    "tests.harness.compiled",
    "tests.harness.kube",
    "tests.harness.s3",
    "tests.harness.http_server",
    "tests.harness.registry_stub",
    "tests.harness.kfp_api_stub",
    "tests.harness.tcp_proxy",
    "tests.harness.mlflow_server",
    "tests.harness.oci_registry",
    "tests.harness.openai_stub",
    "tests.harness.hub_stub",
    "tests.harness.installed_wheel",
]

#: Session fixtures that make a whole run (a demo, the Training Hub releases, the installed wheel and its venvs, an
#: MLflow server), by the group of tests that share it: under ``pytest-xdist`` (``--dist loadgroup``) a group's tests go
#: to one worker, so each run is made once.
SHARED_RUNS = {
    "hub_runs": "training-hub",
    "lora_demo": "lora-demo",
    "newest_kfp_demo": "newest-kfp-demo",
    "quick_start_run": "quick-start",
    "wheel": "installed-wheel",  # wheel_demo, venv and core_venv are made from it
    "mlflow_server": "mlflow",
}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which appends the group to the test's id
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``pytest-xdist`` (the suite's ``-n``): a test runs on the worker of its file, or of the shared run it uses.

    A file's tests stay together (their module fixtures are made once, and those that bind a fixed port never overlap);
    the tests of one shared run (:data:`SHARED_RUNS`) stay together across files.
    """
    if not running_in_a_worker():
        return
    for item in items:
        shared = next((group for name, group in SHARED_RUNS.items() if name in item.fixturenames), None)
        item.add_marker(pytest.mark.xdist_group(shared or item.path.relative_to(config.rootpath).as_posix()))
