"""The watchdog of tests/harness/processes.py: a server's process group does not outlive a killed test process."""

import os
import signal
import subprocess
import sys
import time

from tests.harness.processes import reap_when_gone, stop_watchdog


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_gone(group: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _group_alive(group):
            return True
        time.sleep(0.1)
    return False


def test_a_killed_test_process_takes_its_servers_group_with_it():
    # A stand-in for pytest, and a "server" that forks a worker into its own process group.
    pytest_process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    server_code = "import subprocess, time; subprocess.Popen(['sleep', '120']); time.sleep(120)"
    server = subprocess.Popen([sys.executable, "-c", server_code], start_new_session=True)
    watchdog = reap_when_gone(server.pid, watched=pytest_process.pid)
    try:
        time.sleep(1.0)
        assert _group_alive(server.pid)
        pytest_process.kill()  # SIGKILL: no teardown runs
        pytest_process.wait(timeout=10)
        assert server.wait(timeout=20) == -signal.SIGTERM  # reaped here: it is this process's child
        assert _wait_gone(server.pid, timeout=20), "the server's worker outlived the killed test process"
        assert watchdog.wait(timeout=10) == 0
    finally:
        for process in (pytest_process, server):
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
        if _group_alive(server.pid):
            os.killpg(server.pid, signal.SIGKILL)
        stop_watchdog(watchdog)


def test_the_watchdog_ends_with_the_group_its_fixture_stopped():
    server = subprocess.Popen(["sleep", "120"], start_new_session=True)
    watchdog = reap_when_gone(server.pid)
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=10)
    assert watchdog.wait(timeout=10) == 0  # it noticed by itself; this process is alive
