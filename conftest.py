"""Test-suite wide settings: offline hubs, one temporary folder, shared fixtures from ``tests/harness``."""

import atexit
import os
import shutil
import tempfile

import pytest

from tests.harness.workers import shared_run_scheduler

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


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``pytest-xdist``'s scheduler for this suite: whole files, and the files of one shared run, per worker."""
    return shared_run_scheduler(config, log)
