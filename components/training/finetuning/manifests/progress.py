"""RHOAI's progress tracking as the job manifest declares it (the ODH controller polls the rank-0 pod's server)."""

from __future__ import annotations

from typing import Any

PROGRESSION_ANNOTATION = "trainer.opendatahub.io/progression-tracking"
METRICS_PORT_ANNOTATION = "trainer.opendatahub.io/metrics-port"
POLL_INTERVAL_ANNOTATION = "trainer.opendatahub.io/metrics-poll-interval"
#: Non-privileged ports only (OpenShift's restricted SCC); the poll interval range of the Kubeflow SDK.
METRICS_PORT_RANGE = (1024, 65535)
POLL_INTERVAL_RANGE = (5, 300)


def progression_annotations(enabled: bool, port: int, poll_interval_seconds: int) -> dict[str, str]:
    """The TrainJob/PyTorchJob annotations that switch on RHOAI's progress tracking (``{}`` when disabled)."""
    if not enabled:
        return {}
    return {
        PROGRESSION_ANNOTATION: "true",
        METRICS_PORT_ANNOTATION: str(port),
        POLL_INTERVAL_ANNOTATION: str(poll_interval_seconds),
    }


def check_settings(port: Any, poll_interval_seconds: Any, source: str = "train_model") -> None:
    """Checks the metrics port and poll interval (``ValueError`` naming the parameter, value and range)."""
    checks = (
        ("training_progress_metrics_port", port, METRICS_PORT_RANGE, "non-privileged, as OpenShift's restricted SCC"),
        ("training_progress_poll_interval_seconds", poll_interval_seconds, POLL_INTERVAL_RANGE, "seconds"),
    )
    for name, value, (low, high), why in checks:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"{source} parameter {name}={value!r}: must be an integer in [{low}, {high}] ({why})")
