"""Server processes the suite starts never outlive it, even when pytest itself is killed.

A fixture's teardown stops its server; :func:`reap_when_gone` covers what teardown cannot: pytest killed (SIGKILL, a
CI timeout, an OOM kill) leaves a server's process group running, reparented to init and still listening. A small
watchdog process (standard library only, its own session) polls the test process and, once it is gone, sends
SIGTERM and then SIGKILL to the server's process group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

#: The watchdog: ``python -c WATCHDOG <watched pid> <process group to reap>``.
WATCHDOG = """
import os, signal, sys, time
watched, group = int(sys.argv[1]), int(sys.argv[2])
def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
def group_alive():
    try:
        os.killpg(group, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True
while alive(watched) and group_alive():
    time.sleep(0.5)
for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
    if not group_alive():
        break
    os.killpg(group, sig)
    deadline = time.monotonic() + wait
    while group_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
"""


def reap_when_gone(group: int, watched: int | None = None) -> subprocess.Popen:
    """Starts a watchdog that kills process group ``group`` once process ``watched`` (default: this one) is gone.

    It also ends by itself once the group is gone (the fixture stopped it). Stop it with :func:`stop_watchdog`.
    """
    return subprocess.Popen(
        [sys.executable, "-c", WATCHDOG, str(watched or os.getpid()), str(group)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop_watchdog(watchdog: subprocess.Popen) -> None:
    """Ends a watchdog whose group was stopped by its fixture (it would end by itself within half a second)."""
    if watchdog.poll() is None:
        watchdog.send_signal(signal.SIGTERM)
    try:
        watchdog.wait(timeout=5)
    except subprocess.TimeoutExpired:
        watchdog.kill()
        watchdog.wait(timeout=5)
