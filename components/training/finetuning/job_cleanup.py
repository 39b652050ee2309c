"""What ``cleanup_policy`` does to a job after its run, and what to tell the user when the API cannot do it.

The policy (``delete`` | ``keep`` | ``suspend``) is applied on every exit after submission by
:func:`~.kube.run_trainjob`; the pure helpers here word the manual fallback: the exact ``kubectl`` command that does
what the policy asked, for a job the API could not be reached to delete or suspend (its GPUs stay allocated until
someone runs it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

CLEANUP_POLICIES = ("delete", "keep", "suspend")


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
    from components.training.finetuning.cluster_requests import TrainJobError

    if isinstance(error, TrainJobError) and error.args and isinstance(error.args[0], str):
        error.args = (f"{error.args[0]}\n{note}", *error.args[1:])
    else:
        error.add_note(note)
