"""Counts the Kubernetes API requests ``train_model`` makes while following a running job (goal: <= 6 per minute).

Usage: ``python benchmarks/follow_requests.py [--seconds 60] [--poll-interval 10]``. For each follow mode (watch, poll)
it runs :func:`~components.training.finetuning.cluster.runner.run_job` with the component's defaults against kmock's
Kubernetes API on 127.0.0.1: the job's pod is running from the start and the job completes after ``--seconds``. It
prints the requests made in steady state (the ``--seconds`` after the pods were seen running, before the job
completes) and their rate per minute, next to the goal.
"""

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: The goal of the reliability issue: at most this many API requests per minute per followed job in steady state.
GOAL_PER_MINUTE = 6
#: The poll interval the goal is stated for (the component's default); shorter runs scale the goal with the interval.
DEFAULT_POLL_INTERVAL = 10.0


def goal_requests(seconds: float, poll_interval: float) -> float:
    """The most requests the goal allows in ``seconds`` of following, scaled to ``poll_interval``."""
    return GOAL_PER_MINUTE * seconds / 60 * DEFAULT_POLL_INTERVAL / poll_interval


def measure(use_watch: bool, seconds: float, poll_interval: float) -> dict:
    """Follows one running job for ``seconds``; returns the steady-state request count and rate."""
    from components.training.finetuning.manifests.pytorchjob import build_pytorchjob
    from tests.harness.kube import condition, make_pytorchjob_pod, running_kube_api
    from tests.harness.requests import job_spec, run_job

    spec = job_spec(
        run_id="bench-follow", task_name="train-model", namespace="bench", command=["true"], image="example/trainer:1"
    )
    manifest = build_pytorchjob(spec)
    name = manifest["metadata"]["name"]
    with running_kube_api() as kube_api:
        kube_api.put_pod(make_pytorchjob_pod("bench", name))
        window: list[int] = []  # the request count when the steady state starts, and ``seconds`` later

        def operator() -> None:
            kube_api.wait_for(lambda: kube_api.objects("pytorchjobs", "bench"), timeout=30)
            # Steady state starts once the client has seen the pods running (its pod listing is answered).
            kube_api.wait_for(lambda: any(r.plural == "pods" for r in kube_api.requests), timeout=30)
            window.append(len(kube_api.requests))
            time.sleep(seconds)
            window.append(len(kube_api.requests))  # before the job completes: the run's last request is not counted
            kube_api.set_pytorchjob_status("bench", name, {"conditions": [condition("Succeeded")]})

        thread = threading.Thread(target=operator, daemon=True)
        thread.start()
        began = time.monotonic()
        run_job(
            kube_api.api_client,
            manifest,
            start_timeout_seconds=seconds * 2,
            timeout_seconds=seconds * 3,
            poll_interval_seconds=poll_interval,
            use_watch=use_watch,
            log=lambda line: None,
        )
        elapsed = time.monotonic() - began
        thread.join(timeout=10)
        steady = kube_api.requests[window[0] : window[1]]
    per_minute = len(steady) / seconds * 60
    return {"requests": len(steady), "seconds": seconds, "per_minute": per_minute, "elapsed": elapsed}


def main() -> None:
    """Measures both follow modes and prints the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the job runs (steady state)")
    parser.add_argument("--poll-interval", type=float, default=10.0, help="poll_interval_seconds (component default)")
    parser.add_argument("--write-figures", action="store_true", help="record the figures in docs/figures.json")
    options = parser.parse_args()
    counts = []
    for mode, use_watch in (("watch", True), ("poll", False)):
        found = measure(use_watch, options.seconds, options.poll_interval)
        counts.append(found["requests"])
        goal = goal_requests(options.seconds, options.poll_interval)
        verdict = "met" if found["requests"] <= goal else "NOT met"
        print(
            f"{mode}: {found['requests']} API requests in {found['seconds']:g} s of following a running job "
            f"(poll_interval_seconds={options.poll_interval:g}) = {found['per_minute']:.1f} per minute; "
            f"goal <= {goal:g} requests ({GOAL_PER_MINUTE}/min at {DEFAULT_POLL_INTERVAL:g} s): {verdict}"
        )
    if options.write_figures:
        from scripts.figures import figure, record

        text = f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)} to {max(counts)}"
        record(
            {"follow.requests": figure(counts, "requests", text, seconds=options.seconds)},
            "benchmarks/follow_requests.py",
        )


if __name__ == "__main__":
    main()
