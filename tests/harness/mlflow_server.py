"""A real ``mlflow server`` on 127.0.0.1 for tracking tests: one per test session (its start-up costs ~10-20 s).

Fixture ``mlflow_server``: the test venv's ``mlflow`` CLI with a SQLite store in a session directory, on a free port;
yields the tracking URI once ``/health`` answers; terminates the server's process group at the end (a watchdog does
it if pytest is killed). The job runner is off: its consumer processes would outlive the server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.http_server import free_port
from tests.harness.processes import reap_when_gone, stop_watchdog

STARTUP_TIMEOUT_SECONDS = 120.0
STOP_TIMEOUT_SECONDS = 15.0


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL when anything of it is left after the grace time."""
    for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT_SECONDS), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            process.poll()  # reap the CLI itself, so that only live members keep the group
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The tracking URI of a running ``mlflow server`` (see the module docstring)."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    mlflow_cli = Path(sys.executable).with_name("mlflow")
    command = [
        str(mlflow_cli),
        "server",
        "--backend-store-uri",
        f"sqlite:///{root / 'mlflow.db'}",
        "--artifacts-destination",
        str(root / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    log_path = root / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    watchdog = reap_when_gone(process.pid)  # the server's group dies with pytest, even a killed pytest
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"mlflow server did not become healthy at {url} (exit {process.poll()}): {tail}")
            time.sleep(0.2)
        yield url
    finally:
        _stop(process)
        stop_watchdog(watchdog)
