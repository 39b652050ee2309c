"""The errors of the cluster client layer, for every job kind (the message names the real kind)."""

from __future__ import annotations

from components.training.finetuning.cluster.diagnosis import Diagnosis


class JobError(RuntimeError):
    """Base of the errors of the cluster client layer."""


class JobApiError(JobError):
    """The API rejected a call (an unexpected 4xx), stayed unavailable through every retry, or missed the deadline."""


class JobConflictError(JobError):
    """A job with the deterministic name exists but belongs to another run or task."""


class NotOurJob(JobApiError):
    """A delete or patch carrying our job's uid as precondition was refused: the name now holds another job."""


class JobFailed(JobError):
    """The job failed, timed out or was cancelled; ``diagnosis`` says why."""

    def __init__(self, diagnosis: Diagnosis) -> None:
        super().__init__(diagnosis.text())
        self.diagnosis = diagnosis


class JobCancelled(JobFailed):
    """The task was cancelled (SIGTERM/SIGINT) while the job ran; cleanup has been applied."""


class ApiUnavailable(JobApiError):
    """No answer (or only "try again") through every retry, or before ``deadline``; ``last``: the last failure."""

    def __init__(self, message: str, deadline: object | None, last: str) -> None:
        super().__init__(message)
        self.deadline = deadline
        self.last = last


class ApiOutageTooLong(JobApiError):
    """The API stayed unreachable longer than ``api_outage_tolerance_seconds``; the job was left running."""


class LauncherDisrupted(JobError):
    """SIGTERM came because the launcher pod is evicted, preempted or stopped with its node; the job is left running."""


class JobIncomplete(JobApiError):
    """The stored (or adopted) job lacks fields this step sent: it is not followed; the cleanup policy was applied."""
