"""Where a test runs: one pytest process, or a ``pytest-xdist`` worker (the suite's ``-n``, see ``pyproject.toml``)."""

import os


def running_in_a_worker() -> bool:
    """Whether this process is a ``pytest-xdist`` worker (whose session holds every item, not only those it runs)."""
    return "PYTEST_XDIST_WORKER" in os.environ
