"""The fast variant of ``benchmarks/follow_requests.py``: <= 6 API requests per 6 poll intervals of a running job."""

import importlib.util
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "follow_requests.py"


def _benchmark():
    spec = importlib.util.spec_from_file_location("follow_requests", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("use_watch", [True, False], ids=["watch", "poll"])
def test_following_a_running_job_keeps_to_one_request_per_interval(use_watch):
    benchmark = _benchmark()
    found = benchmark.measure(use_watch, seconds=3.0, poll_interval=0.5)
    assert benchmark.goal_requests(60, 10) == 6
    assert 1 <= found["requests"] <= benchmark.goal_requests(3.0, 0.5), found  # (a watch lasts >= 1 s)
