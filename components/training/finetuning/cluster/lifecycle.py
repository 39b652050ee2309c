"""A job's lifecycle around the follow loop: idempotent submit, diagnosis and cleanup on every exit.

* **Submit**: create; on 409 re-attach when the existing job carries this run/task's labels (a retried KFP task never
  creates a second job; a suspended one is resumed unless Kueue queues it), otherwise fail.
* **Diagnose** on failure/timeout: conditions, pods, events and the failed container's last log lines become one-line
  causes with a remedy (:mod:`.diagnosis`).
* **Clean up** per ``cleanup_policy`` (``delete`` | ``keep`` | ``suspend``), applied on every exit after submission
  by :func:`~.runner.run_job`; best effort, never masking the original error. The pure helpers here word the manual
  fallback: the exact ``kubectl`` command that does
what the policy asked, for a job the API could not be reached to delete or suspend (its GPUs stay allocated until
someone runs it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from components._common.retry import GaveUp, call_with_retries
from components.training.finetuning.cluster import diagnosis as diagnosis_module
from components.training.finetuning.cluster.api import failure_text
from components.training.finetuning.cluster.diagnosis import Diagnosis
from components.training.finetuning.cluster.errors import (
    JobApiError,
    JobCancelled,
    JobConflictError,
    JobError,
    JobFailed,
)
from components.training.finetuning.cluster.job_client import NameBeingReleased
from components.training.finetuning.cluster.job_kinds import owned_by, queue_name
from components.training.finetuning.cluster.signals import signals_ignored

CLEANUP_POLICIES = ("delete", "keep", "suspend")
#: Pods whose failed containers' log tails go into a diagnosis.
_MAX_LOGGED_PODS = 2


def manual_command(kind: str, name: str, namespace: str, policy: str, suspend_patch: Mapping[str, Any]) -> str:
    """The ``kubectl`` command that applies ``policy`` by hand (``keep``: the delete command, for later).

    Args:
        kind: The job's kind (``TrainJob``, ``PyTorchJob``).
        name: Its name.
        namespace: Its namespace.
        policy: ``delete``, ``keep`` or ``suspend``.
        suspend_patch: The merge patch that suspends a job of this kind.

    Returns:
        E.g. ``kubectl delete trainjob tj-1 -n team-a`` or
        ``kubectl patch pytorchjob tj-1 -n team-a --type=merge -p '{"spec": {"runPolicy": {"suspend": true}}}'``.
    """
    if policy == "suspend":
        return f"kubectl patch {kind.lower()} {name} -n {namespace} --type=merge -p '{json.dumps(dict(suspend_patch))}'"
    return f"kubectl delete {kind.lower()} {name} -n {namespace}"


def cleanup_failed_note(kind: str, name: str, namespace: str, policy: str, command: str, failure: str) -> str:
    """The line that says a cleanup could not be done, and the command that does it.

    Args:
        kind: The job's kind.
        name: Its name.
        namespace: Its namespace.
        policy: The cleanup policy that failed.
        command: :func:`manual_command`'s result.
        failure: Why the cleanup failed (one line).

    Returns:
        One line naming the job, the failure and the command.
    """
    doing = "deleted" if policy == "delete" else "suspended"
    return (
        f"{kind} {namespace}/{name} could not be {doing} (cleanup_policy={policy}: {failure}); it may still hold its "
        f"GPUs: run `{command}`"
    )


def append_note(error: BaseException, note: str) -> None:
    """Adds ``note`` to an error's message (``str(error)``) without replacing it; other errors get a traceback note.

    The cluster layer's own errors carry their message in ``args[0]``; for anything else (an unexpected error) the
    note is attached with :meth:`BaseException.add_note`, shown with its traceback.
    """
    if isinstance(error, JobError) and error.args and isinstance(error.args[0], str):
        error.args = (f"{error.args[0]}\n{note}", *error.args[1:])
    else:
        error.add_note(note)


class JobLifecycle:
    """Submit, diagnose and clean up the runner's job (a mixin of :class:`~.runner.JobRun`).

    It works beside :class:`~.job_client.JobRequests` (the requests) and :class:`~.follow.FollowLoop` (the follow).
    """

    def submit(self) -> dict[str, Any]:
        """Creates the job, or re-attaches to this run/task's existing one.

        A 409 for a job that then reads 404 (one being deleted) is retried with backoff by the shared policy, a
        bounded number of times; a job still terminating (``deletionTimestamp``) is waited for until the deadline.
        """
        what = f"creating {self.kind.kind} {self.namespace}/{self.name}"
        deadline = self.settings.clock() + max(self.settings.start_timeout, 60.0)
        while True:
            try:
                existing = call_with_retries(
                    self.create_or_read,
                    self.api.policy,
                    retryable=lambda error: isinstance(error, NameBeingReleased),
                    on_retry=lambda number, delay, error: self.say(f"{what}: {error}; retry {number} in {delay:.1f}s"),
                    sleep=self.settings.sleep,
                    clock=self.settings.clock,
                )
            except GaveUp as gave_up:
                self.submitted = False  # every create was refused: nothing of this run/task to clean up
                raise JobApiError(
                    f"{what}: {gave_up.last} on each of {gave_up.attempts} attempts: a {self.kind.kind} of that name "
                    f"is probably being deleted; retry the task later, or check `kubectl get "
                    f"{self.kind.kind.lower()} {self.name} -n {self.namespace}`"
                ) from None
            if existing is None:
                runtime = (self.manifest["spec"].get("runtimeRef") or {}).get("name")
                self.say(f"created in namespace {self.namespace}" + (f" (runtime {runtime})" if runtime else ""))
                return self.job
            if not owned_by(existing, self.labels):
                self.submitted = False  # the name is someone else's job: never clean it up
                theirs = (existing.get("metadata") or {}).get("labels") or {}
                raise JobConflictError(
                    f"{self.kind.kind} {self.namespace}/{self.name} already exists and belongs to another run/task "
                    f"(labels {theirs}, expected {self.labels}); delete it or run with another task name"
                )
            if (existing.get("metadata") or {}).get("deletionTimestamp"):
                if self.settings.clock() > deadline:
                    raise JobError(f"{self.kind.kind} {self.namespace}/{self.name} is still being deleted; retry later")
                self.say(f"a previous attempt's {self.kind.kind} is being deleted; waiting to create a new one")
                self.settings.sleep(self.settings.poll_interval)
                continue
            return self.reattach(existing)

    def reattach(self, existing: dict[str, Any]) -> dict[str, Any]:
        """Follows this run/task's existing job (a retried KFP task); resumes it when suspended, unless Kueue queues."""
        self.reattached = True
        self.job = existing
        created = (existing.get("metadata") or {}).get("creationTimestamp", "earlier")
        self.say(
            f"re-attached to the existing {self.kind.kind} of this run/task (created {created}); no second job created"
        )
        if self.kind.is_suspended(existing):
            queue = queue_name(existing)
            if queue:
                self.say(f"it is suspended and queued in Kueue LocalQueue {queue!r}: leaving its admission to Kueue")
            else:
                self.say("it is suspended: resuming it")
                self.job = self.patch_job(self.kind.suspend_patch(False), "resuming")
        return self.job

    def diagnose(self, outcome: str) -> Diagnosis:
        """Collects conditions, pods, events and failed containers' log tails into a diagnosis (never raises)."""
        job = self.job or {"metadata": {"name": self.name, "namespace": self.namespace}}
        pods: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        logs: dict[str, str] = {}
        if outcome != "Cancelled":
            try:
                pods = self.list_pods()
                events = self.list_events()
                for pod, container, previous in self.failed_containers(pods)[:_MAX_LOGGED_PODS]:
                    text = self.read_log(pod, container, previous)
                    if text:
                        logs[f"pod {pod}, container {container}"] = text
            except JobError as error:
                self.say(f"diagnosis is incomplete: {error}")
        return diagnosis_module.diagnose(
            outcome,
            job,
            pods,
            events,
            logs,
            start_timeout=self.settings.start_timeout,
            timeout=self.settings.timeout,
            tail_lines=self.settings.log_tail_lines,
            kind=self.kind.kind,
        )

    @staticmethod
    def failed_containers(pods: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
        """(pod, container, previous) of containers that exited non-zero or crash-loop, in pod order."""
        found = []
        for pod in pods:
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                state = status.get("state") or {}
                last = (status.get("lastState") or {}).get("terminated") or {}
                terminated = state.get("terminated") or {}
                name = pod["metadata"]["name"]
                if terminated.get("exitCode") not in (None, 0):
                    found.append((name, status["name"], False))
                elif state.get("waiting") and last.get("exitCode") not in (None, 0):
                    found.append((name, status["name"], True))
        return found

    def clean_up(self) -> str:
        """Applies the cleanup policy, best effort, within ``cleanup_timeout_seconds``.

        Returns:
            ``""``, or when the API could not do it, the note naming the job and the ``kubectl`` command that does.
        """
        command = manual_command(
            self.kind.kind, self.name, self.namespace, self.settings.cleanup_policy, self.kind.suspend_patch(True)
        )
        if self.settings.cleanup_policy == "keep":
            self.say(f"kept (cleanup_policy=keep): `{command}`")
            return ""
        try:
            with self.api.budget(
                self.settings.cleanup_timeout, f"cleanup_timeout_seconds={self.settings.cleanup_timeout:g}"
            ):
                if self.job is None:  # the create's answer never came: clean up only this run/task's job
                    existing = self.get_job()
                    if existing is None or not owned_by(existing, self.labels):
                        return ""
                    self.job = existing
                if self.settings.cleanup_policy == "delete":
                    self.delete_job()
                else:
                    self.patch_job(self.kind.suspend_patch(True), "suspending")
                    self.say("suspended (cleanup_policy=suspend): its pods are removed, the job stays for inspection")
            return ""
        except Exception as error:  # noqa: BLE001 - best effort: a failed cleanup never masks the original error
            text = str(error) if isinstance(error, JobError) else failure_text(error)
            note = cleanup_failed_note(
                self.kind.kind, self.name, self.namespace, self.settings.cleanup_policy, command, text
            )
            self.say(f"WARNING: {note}")
            return note

    def wrap_up(self, outcome: str) -> JobFailed:
        """Diagnoses a failed, timed-out or vanished job and applies the cleanup policy (signals ignored meanwhile)."""
        with signals_ignored():  # a SIGTERM now must not skip the cleanup
            with self.api.budget(
                self.settings.cleanup_timeout, f"cleanup_timeout_seconds={self.settings.cleanup_timeout:g}"
            ):
                found = self.diagnose(outcome)
            self.say(found.text())
            note = self.clean_up() if outcome != "Deleted" else ""
        failure = JobCancelled(found) if outcome == "Cancelled" else JobFailed(found)
        if note:
            append_note(failure, note)
        return failure
