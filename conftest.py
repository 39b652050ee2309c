"""Test-suite wide settings: offline hubs, no run-time pip installs, shared fixtures from ``tests/harness``."""

import os

# A Hub call must fail loudly in tests and CI: nothing can be downloaded there.
for _name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ[_name] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# kfp.local runs tasks in this (complete) environment: compile components that install nothing at run time.
os.environ["KFP_FINETUNE_INSTALL_PACKAGES"] = "0"

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
]
