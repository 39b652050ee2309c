"""A job's lifecycle around the follow loop: idempotent submit (a retried task re-attaches), diagnosis, cleanup."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from components._common.retry import GaveUp, call_with_retries
from components.training.finetuning.cluster import diagnosis as diagnosis_module
from components.training.finetuning.cluster.api import Deadline, Retry, failure_text
from components.training.finetuning.cluster.diagnosis import Diagnosis
from components.training.finetuning.cluster.errors import (
    JobApiError,
    JobCancelled,
    JobConflictError,
    JobError,
    JobFailed,
    JobIncomplete,
    NotOurJob,
)
from components.training.finetuning.cluster.follow import find_it, find_job_command, through_outage
from components.training.finetuning.cluster.job_client import CreateRejected, JobClient, NameBeingReleased, uid_of
from components.training.finetuning.cluster.job_kinds import owned_by, queue_name
from components.training.finetuning.cluster.signals import signals_ignored
from components.training.finetuning.cluster.state import JobSettings, JobState

#: Pods whose failed containers' log tails go into a diagnosis.
_MAX_LOGGED_PODS = 2
#: Fields the cluster changes by design (Kueue and the launcher suspend and resume a job).
CHANGED_BY_DESIGN = frozenset({"spec.suspend"})
#: How many lost fields a message names.
_NAMED = 5


def _contains(stored: Any, sent: Any) -> bool:
    """Whether ``stored`` holds everything of ``sent`` (dicts: each key; lists: each item in some item)."""
    if isinstance(sent, Mapping):
        return isinstance(stored, Mapping) and all(k in stored and _contains(stored[k], v) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(stored, list) and all(any(_contains(s, item) for s in stored) for item in sent)
    return stored == sent


def _item_name(item: Any, index: int) -> str:
    return f"[name={item['name']}]" if isinstance(item, Mapping) and isinstance(item.get("name"), str) else f"[{index}]"


def _walk(sent: Any, stored: Any, path: str, lost: list[str]) -> None:
    if path in CHANGED_BY_DESIGN or _contains(stored, sent):
        return
    if isinstance(sent, Mapping) and isinstance(stored, Mapping):
        for key, value in sent.items():
            where = f"{path}.{key}" if path else key
            if key not in stored:
                if where not in CHANGED_BY_DESIGN:
                    lost.append(where)
            else:
                _walk(value, stored[key], where, lost)
        return
    if isinstance(sent, list) and isinstance(stored, list):
        for index, item in enumerate(sent):
            if any(_contains(candidate, item) for candidate in stored):
                continue
            name = item.get("name") if isinstance(item, Mapping) else None
            same = [s for s in stored if isinstance(s, Mapping) and name is not None and s.get("name") == name]
            if not same and name is None and len(stored) == len(sent):
                same = [stored[index]]  # (unnamed items of a list of the same length: compared in order)
            if same:
                _walk(item, same[0], f"{path}{_item_name(item, index)}", lost)
            else:
                lost.append(f"{path}{_item_name(item, index)}")
        return
    lost.append(path)


def lost_fields(sent: Mapping[str, Any], stored: Mapping[str, Any]) -> list[str]:
    """The fields of ``sent``'s ``spec`` and labels that ``stored`` lacks or changed; additions are fine."""
    lost: list[str] = []
    _walk(sent.get("spec") or {}, stored.get("spec"), "spec", lost)
    labels = (sent.get("metadata") or {}).get("labels") or {}
    _walk(labels, (stored.get("metadata") or {}).get("labels"), "metadata.labels", lost)
    return lost


def lost_fields_message(kind: str, where: str, lost: list[str], adopted: bool) -> str:
    """One line: which job lost which fields, why that happens, that it is not followed, what to check."""
    named = ", ".join(lost[:_NAMED]) + (f" and {len(lost) - _NAMED} more" if len(lost) > _NAMED else "")
    how = "the existing job this step would re-attach to lacks" if adopted else "the API server stored it without"
    return (
        f"{kind} {where}: {how} field(s) {named} that this step sends (an API server that ignores "
        "fieldValidation=Strict prunes fields it does not serve, and a mutating admission webhook may remove pod "
        "settings such as the workspace volume): a job without them would not train as asked, so it is not "
        "followed. Check `kubectl get mutatingwebhookconfigurations` and the served API (`kfp-finetune doctor`)"
    )


def manual_command(client: JobClient, policy: str) -> str:
    """The ``kubectl`` command that applies ``policy`` by hand (``keep``: the delete command, for later)."""
    where = f"{client.kind.kind.lower()} {client.name} -n {client.namespace}"
    if policy == "suspend":
        return f"kubectl patch {where} --type=merge -p '{json.dumps(client.kind.suspend_patch(True))}'"
    return f"kubectl delete {where}"


def left_running_note(client: JobClient) -> str:
    """The line that says the job was left running after the launcher's own trouble, and how to find or stop it."""
    return (
        f"{client.kind.kind} {client.namespace}/{client.name} was left running: this step's trouble is no reason to "
        f"stop it. {find_it(client)}"
    )


def append_note(error: BaseException, note: str) -> None:
    """Adds ``note`` to a cluster error's message (``args[0]``); any other error gets it as a traceback note."""
    if isinstance(error, JobError) and error.args and isinstance(error.args[0], str):
        error.args = (f"{error.args[0]}\n{note}", *error.args[1:])
    else:
        error.add_note(note)


def submit(client: JobClient, state: JobState, settings: JobSettings) -> None:
    """Creates the job, or re-attaches to this run/task's existing one; a job still being deleted is waited for."""
    kind, what = client.kind.kind, f"creating {client.kind.kind} {client.namespace}/{client.name}"
    deadline = settings.clock() + max(settings.deadlines.start_timeout_seconds, 60.0)

    while True:
        state.submitted = True  # from the first create on, the job may exist and is this run/task's
        try:
            existing, created = call_with_retries(
                lambda: through_outage(client, state, settings, client.create_or_read, start_timeout_counts=True),
                client.api.policy,
                retryable=lambda error: isinstance(error, NameBeingReleased),
                on_retry=lambda number, delay, error: client.say(f"{what}: {error}; retry {number} in {delay:.1f}s"),
                sleep=settings.sleep,
                clock=settings.clock,
            )
        except GaveUp as gave_up:
            state.submitted = False  # every create was refused: nothing of this run/task to clean up
            raise JobApiError(
                f"{what}: {gave_up.last} on each of {gave_up.attempts} attempts: a {kind} of that name is probably "
                f"being deleted; retry the task later, or check `{find_job_command(client)}`"
            ) from None
        except CreateRejected:
            state.submitted = False  # refused: nothing was created
            raise
        if created:
            state.job, state.uid = existing, uid_of(existing)
            runtime = (client.manifest["spec"].get("runtimeRef") or {}).get("name")
            client.say(f"created in namespace {client.namespace}" + (f" (runtime {runtime})" if runtime else ""))
            refuse_incomplete(client, state, settings, existing, adopted=False)
            return
        if not owned_by(existing, client.labels):
            state.submitted = False  # the name is someone else's job: never clean it up
            theirs = (existing.get("metadata") or {}).get("labels") or {}
            raise JobConflictError(
                f"{kind} {client.namespace}/{client.name} already exists and belongs to another run/task "
                f"(labels {theirs}, expected {client.labels}); delete it or run with another task name"
            )
        if (existing.get("metadata") or {}).get("deletionTimestamp"):
            if settings.clock() > deadline:
                raise JobError(f"{kind} {client.namespace}/{client.name} is still being deleted; retry later")
            client.say(f"a previous attempt's {kind} is being deleted; waiting to create a new one")
            settings.sleep(settings.api.poll_interval_seconds)
            continue
        state.job, state.uid = existing, uid_of(existing)
        refuse_incomplete(client, state, settings, existing, adopted=True)
        reattach(client, state, existing)
        return


def refuse_incomplete(
    client: JobClient, state: JobState, settings: JobSettings, stored: dict[str, Any], adopted: bool
) -> None:
    """Raises :class:`JobIncomplete`, after applying the cleanup policy, when ``stored`` lost fields that were sent."""
    lost = lost_fields(client.manifest, stored)
    if not lost:
        return
    message = lost_fields_message(client.kind.kind, f"{client.namespace}/{client.name}", lost, adopted)
    client.say(message)
    with signals_ignored():
        note = clean_up(client, state, settings, cleanup_budget(settings))
    policy = settings.policy.cleanup_policy
    done = {"delete": "deleted", "suspend": "suspended", "keep": "kept"}[policy]
    tail = f"; {note}" if note else f"; it was {done} (cleanup_policy={policy})"
    if policy == "keep" and not note:
        tail += f": `{manual_command(client, 'delete')}` removes it"
    raise JobIncomplete(message + tail)


def reattach(client: JobClient, state: JobState, existing: dict[str, Any]) -> None:
    """Follows this run/task's existing job (a retried KFP task); resumes it when suspended, unless Kueue queues."""
    state.reattached = True
    state.job, state.uid = existing, uid_of(existing)
    created = (existing.get("metadata") or {}).get("creationTimestamp", "earlier")
    client.say(
        f"re-attached to the existing {client.kind.kind} of this run/task (created {created}); no second job created"
    )
    if client.kind.is_suspended(existing):
        queue = queue_name(existing)
        if queue:
            client.say(f"it is suspended and queued in Kueue LocalQueue {queue!r}: leaving its admission to Kueue")
        else:
            client.say("it is suspended: resuming it")
            state.job = client.patch_job(client.kind.suspend_patch(False), "resuming", state.uid)


def diagnose(client: JobClient, state: JobState, settings: JobSettings, outcome: str) -> Diagnosis:
    """Collects conditions, pods, events and failed containers' log tails into a diagnosis (never raises)."""
    job = state.job or {"metadata": {"name": client.name, "namespace": client.namespace}}

    def optional(read: Callable[[], Any], empty: Any) -> Any:  # one failed read leaves the others
        try:
            return read()
        except JobError as error:
            client.say(f"diagnosis is incomplete: {error}")
            return empty

    def read_logs(pods: list[dict[str, Any]]) -> None:  # of containers that exited non-zero or crash-loop
        failed = []  # (pod, container, previous), in pod order
        for pod in pods:
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                now, last = status.get("state") or {}, (status.get("lastState") or {}).get("terminated") or {}
                if (now.get("terminated") or {}).get("exitCode") not in (None, 0):
                    failed.append((pod["metadata"]["name"], status["name"], False))
                elif now.get("waiting") and last.get("exitCode") not in (None, 0):
                    failed.append((pod["metadata"]["name"], status["name"], True))
        for pod, container, previous in failed[:_MAX_LOGGED_PODS]:
            text = client.read_log(pod, container, previous, settings.policy.log_tail_lines)
            if text:
                logs[f"pod {pod}, container {container}"] = text  # (kept when a later read fails)

    pods: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    logs: dict[str, str] = {}
    if outcome != "Cancelled" and not state.replaced_by:  # (another job's pods and events are not ours to report)
        pods = optional(client.list_pods, [])
        events = optional(client.list_events, [])
        optional(lambda: read_logs(pods), None)
    return diagnosis_module.diagnose(
        outcome,
        job,
        pods,
        events,
        logs,
        start_timeout=settings.deadlines.start_timeout_seconds,
        timeout=settings.deadlines.timeout_seconds,
        tail_lines=settings.policy.log_tail_lines,
        kind=client.kind.kind,
    )


def cleanup_budget(settings: JobSettings) -> Deadline:
    """The deadline of a diagnosis or a cleanup: ``cleanup_timeout_seconds`` from now."""
    budget = settings.deadlines.cleanup_timeout_seconds
    return Deadline(settings.clock() + budget, f"cleanup_timeout_seconds={budget:g}")


def delete_job(client: JobClient, state: JobState, settings: JobSettings, deadline: Deadline) -> bool:
    """Deletes this run's job (by its uid) within ``deadline`` (``delete_on_success``); another job: ``False``."""
    try:
        return client.bounded(deadline).delete_job(state.uid, Retry(settings.api.outage_policy, deadline=deadline))
    except NotOurJob as error:
        client.say(str(error))
        return False


def clean_up(
    client: JobClient, state: JobState, settings: JobSettings, deadline: Deadline, wait_for_job: bool = False
) -> str:
    """Applies the cleanup policy, best effort, retrying until ``deadline``.

    Without a uid the job is looked up by name and labels, with ``wait_for_job`` until ``deadline``.

    Returns:
        ``""``, or when the API could not do it, the note naming the job and the ``kubectl`` command that does.
    """
    policy = settings.policy.cleanup_policy
    kind = client.kind
    command = manual_command(client, policy)
    if policy == "keep":
        client.say(f"kept (cleanup_policy=keep): `{command}`")
        return ""
    bounded, retry = client.bounded(deadline), Retry(settings.api.outage_policy, deadline=deadline)
    try:
        if not state.uid:  # the create's answer never came: clean up only this run/task's job
            existing = find_own_job(bounded, settings, deadline, retry, wait_for_job)
            if existing is None:
                return ""
            state.job, state.uid = existing, uid_of(existing)
        if policy == "delete":
            bounded.delete_job(state.uid, retry)
        else:
            bounded.patch_job(kind.suspend_patch(True), "suspending", state.uid, retry)
            client.say("suspended (cleanup_policy=suspend): its pods are removed, the job stays for inspection")
        return ""
    except NotOurJob as error:  # our job is gone and another holds the name: nothing of ours is left to clean up
        client.say(str(error))
        return ""
    except Exception as error:  # noqa: BLE001 - best effort: a failed cleanup never masks the original error
        doing = "deleted" if policy == "delete" else "suspended"
        note = (
            f"{kind.kind} {client.namespace}/{client.name} could not be {doing} (cleanup_policy={policy}: "
            f"{failure_text(error)}); it may still hold its GPUs: run `{command}`"
        )
        client.say(f"WARNING: {note}")
        return note


def find_own_job(
    client: JobClient, settings: JobSettings, deadline: Deadline, retry: Retry, wait: bool
) -> dict[str, Any] | None:
    """This run/task's job under the name (its labels), looked for once or, with ``wait``, until ``deadline``."""
    while True:
        existing = client.get_job(retry)
        if existing is not None and owned_by(existing, client.labels) and uid_of(existing):
            return existing
        pause = min(settings.api.poll_interval_seconds, 0.5)
        if not wait or settings.clock() + pause > deadline.at:
            return None
        settings.sleep(pause)


def wrap_up(client: JobClient, state: JobState, settings: JobSettings, outcome: str) -> JobFailed:
    """Diagnoses a failed, timed-out, cancelled or vanished job and applies the cleanup policy (signals ignored)."""
    with signals_ignored():  # a SIGTERM now must not skip the cleanup
        if outcome == "Cancelled":
            budget = settings.deadlines.cancel_timeout_seconds
            reason = f"the {budget:g} s left of the pod's termination grace period after SIGTERM"
            began = settings.clock() if state.cancelled_at is None else state.cancelled_at
            deadline = Deadline(began + budget, reason)
            found = diagnose(client, state, settings, outcome)  # (no request: the job was not at fault)
        else:
            found = diagnose(client.bounded(cleanup_budget(settings)), state, settings, outcome)
            deadline = cleanup_budget(settings)
        client.say(found.text())
        waiting = outcome == "Cancelled" and not state.uid  # cancelled while the create was in flight
        note = clean_up(client, state, settings, deadline, wait_for_job=waiting) if outcome != "Deleted" else ""
    failure = JobCancelled(found) if outcome == "Cancelled" else JobFailed(found)
    if state.replaced_by:
        append_note(
            failure,
            f"{client.kind.kind} {client.namespace}/{client.name} now holds another job (uid {state.replaced_by}), "
            f"not this run's (uid {state.uid}): it was neither followed nor deleted",
        )
    if note:
        append_note(failure, note)
    return failure
