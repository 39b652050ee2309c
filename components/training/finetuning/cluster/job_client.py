"""The requests about one job (stateless); every create and patch is ``fieldValidation=Strict`` (no silent pruning)."""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import urllib3
from kubernetes import watch
from kubernetes.client import ApiException

from components.training.finetuning.cluster.api import Api, Deadline, Retry, api_message
from components.training.finetuning.cluster.api import rejected as _rejected
from components.training.finetuning.cluster.api import status_of as _status
from components.training.finetuning.cluster.errors import JobApiError, NotOurJob
from components.training.finetuning.cluster.job_kinds import JOB_KINDS, JobKind
from components.training.finetuning.manifests.api_generations import manifest_api

#: The ``fieldValidation`` of every create and patch.
FIELD_VALIDATION = "Strict"
_UNKNOWN_FIELD = re.compile(r'unknown field \\?"([^"\\]+)\\?"')


def uid_of(job: Mapping[str, Any] | None) -> str:
    """A job's ``metadata.uid`` (``""``: none known): what tells our job from another one under the same name."""
    return str(((job or {}).get("metadata") or {}).get("uid") or "")


class NameBeingReleased(Exception):
    """Create answered 409 but the job reads 404: the name is held by a job being deleted (retried with backoff)."""


class UnreadableWatchEvent(Exception):
    """A watch line the client could not read (not JSON, or an ERROR event without its fields): the job is re-read."""


class CreateRejected(JobApiError):
    """The API refused the create with a final answer (not 409): nothing was created."""


class FieldsRejected(CreateRejected):
    """The Strict create was refused for ``fields`` the served API does not know (as the server names them)."""

    def __init__(self, message: str, fields: list[str]) -> None:
        super().__init__(message)
        self.fields = fields


def _refused(what: str, error: Exception, manifest: Mapping[str, Any], create: bool) -> JobApiError:
    """The error of a refused create or patch: :class:`FieldsRejected` for unknown fields, else the API's message."""
    fields = list(dict.fromkeys(_UNKNOWN_FIELD.findall(api_message(error)))) if _status(error) in (400, 422) else []
    if fields:
        message = (
            f"{what} was rejected by the Kubernetes API (fieldValidation={FIELD_VALIDATION}): it does not serve "
            f"field(s) {', '.join(fields)} of the {manifest_api(manifest)} this step wrote, so nothing was stored. The "
            "cluster serves another API generation: `kfp-finetune doctor` names the one it serves"
        )
        return FieldsRejected(message, fields) if create else JobApiError(message)
    return CreateRejected(str(_rejected(what, error))) if create else _rejected(what, error)


@dataclasses.dataclass(frozen=True)
class WatchResult:
    """What one watch window saw: the job's newest state (``None``: unchanged), or that it was deleted or expired."""

    job: dict[str, Any] | None = None
    deleted: bool = False
    expired: bool = False
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class JobClient:
    """The API requests about one job (its manifest's labels identify this run/task; ``say`` logs about it)."""

    api: Api
    manifest: Mapping[str, Any]
    say: Callable[[str], None]

    @property
    def kind(self) -> JobKind:
        """What differs for this job's kind."""
        return JOB_KINDS[self.manifest["kind"]]

    @property
    def name(self) -> str:
        """The job's name."""
        return self.manifest["metadata"]["name"]

    @property
    def namespace(self) -> str:
        """The job's namespace."""
        return self.manifest["metadata"]["namespace"]

    @property
    def labels(self) -> dict[str, str]:
        """This run/task's ownership labels (an existing job carrying them is ours)."""
        return dict(self.manifest["metadata"].get("labels") or {})

    def _custom(self, what: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """Calls ``CustomObjectsApi.<method>`` for this job's kind and namespace (``args`` follow the plural)."""
        call = getattr(self.api.custom, method)
        kind = self.kind
        return self.api.call(what, call, kind.group, kind.version, self.namespace, kind.plural, *args, **kwargs)

    def bounded(self, deadline: Deadline) -> JobClient:
        """A copy whose requests never outlive ``deadline`` (e.g. a cleanup budget)."""
        return dataclasses.replace(self, api=self.api.bounded(deadline))

    def create_or_read(self, retry: Retry | None = None) -> tuple[dict[str, Any], bool]:
        """Creates the job or, on 409, reads the existing one: ``(job, created)``.

        Raises:
            NameBeingReleased: 409, then 404: the name is held by a job being deleted.
            CreateRejected: A final answer; :class:`FieldsRejected` for fields the served API does not know.
        """
        what = f"creating {self.kind.kind} {self.namespace}/{self.name}"
        try:
            created = self._custom(
                what,
                "create_namespaced_custom_object",
                dict(self.manifest),
                field_validation=FIELD_VALIDATION,
                retry=retry,
            )
            return created, True
        except ApiException as error:
            if _status(error) != 409:
                raise _refused(what, error, self.manifest, create=True) from None
        existing = self.get_job(retry)
        if existing is None:
            raise NameBeingReleased("HTTP 409 AlreadyExists, then HTTP 404 reading it")
        return existing, False

    # -- reading -------------------------------------------------------------------------------------------------------
    def get_job(self, retry: Retry | None = None) -> dict[str, Any] | None:
        """The job now, or None when it does not exist."""
        what = f"reading {self.kind.kind} {self.namespace}/{self.name}"
        try:
            return self._custom(what, "get_namespaced_custom_object", self.name, retry=retry)
        except ApiException as error:
            if _status(error) == 404:
                return None
            raise _rejected(what, error) from None

    def watch(self, window: float, resource_version: str, retry: Retry | None = None) -> WatchResult:
        """One watch request of about ``window`` seconds from ``resource_version``; ends early on a final phase.

        A read timeout after the API answered only ends the window; 410 Gone is returned as ``expired``.
        """
        what = f"watching {self.kind.kind} {self.namespace}/{self.name}"
        try:
            return self.api.call(
                what,
                self._watch_once,
                window,
                resource_version,
                _request_timeout=self.api.request_timeout(window + min(5.0, window), deadline=retry and retry.deadline),
                retry=retry,
            )
        except ApiException as error:
            if _status(error) == 410:
                return WatchResult(expired=True, reason="watch expired (410 Gone)")
            raise _rejected(what, error) from None
        except UnreadableWatchEvent as error:
            return WatchResult(expired=True, reason=f"{what}: the API sent an unreadable event ({error})")

    def _watch_once(self, window: float, resource_version: str, _request_timeout: Any) -> WatchResult:
        kwargs: dict[str, Any] = {
            "field_selector": f"metadata.name={self.name}",
            "timeout_seconds": max(1, math.ceil(window)),
            "_request_timeout": _request_timeout,
        }
        if resource_version:
            kwargs["resource_version"] = resource_version
        answered: list[bool] = []

        @functools.wraps(self.api.custom.list_namespaced_custom_object)
        def list_call(*args: Any, **call_kwargs: Any) -> Any:
            response = self.api.custom.list_namespaced_custom_object(*args, **call_kwargs)
            answered.append(True)  # the API answered: a read timeout from now on only ends the window
            return response

        stream = watch.Watch().stream(
            list_call, self.kind.group, self.kind.version, self.namespace, self.kind.plural, **kwargs
        )
        job = None
        try:
            for event in stream:
                obj = event.get("raw_object") or {}
                if event.get("type") == "BOOKMARK" or (obj.get("metadata") or {}).get("name") != self.name:
                    continue
                if event.get("type") == "DELETED":
                    return WatchResult(deleted=True)
                job = obj
                if self.kind.phase(job) in ("Complete", "Failed"):
                    break
        except (urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.ProtocolError):
            if not answered:  # connected, but the API never answered: a transient failure
                raise
            # else: the window ended on the client side, or the connection dropped: reconnect next time
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            # The official client's parsing of the stream: a line that is not JSON (JSONDecodeError), an ERROR event
            # without code/reason/message (KeyError), an event without an object: not a reason to end the step.
            raise UnreadableWatchEvent(f"{type(error).__name__}: {str(error)[:200]}") from None
        finally:
            stream.close()
        return WatchResult(job=job)

    def _core_list(self, what: str, method: str, **kwargs: Any) -> list[dict[str, Any]]:
        """The items of ``CoreV1Api.<method>`` in the job's namespace, as JSON."""
        try:
            return self.api.read_json(what, getattr(self.api.core, method), self.namespace, **kwargs).get("items") or []
        except ApiException as error:
            raise _rejected(what, error) from None

    def list_pods(self, retry: Retry | None = None) -> list[dict[str, Any]]:
        """The job's pods (JobSet, or the Training Operator, labels them with the job's name)."""
        return self._core_list(
            f"listing pods of {self.kind.kind} {self.name}",
            "list_namespaced_pod",
            label_selector=self.kind.pod_selector(self.name),
            retry=retry,
        )

    def list_events(self) -> list[dict[str, Any]]:
        """Events about the job and what it owns (JobSet, Jobs, pods: their names start with the job's)."""
        items = self._core_list(f"listing events of {self.kind.kind} {self.name}", "list_namespaced_event")
        involved = [str((event.get("involvedObject") or {}).get("name", "")) for event in items]
        return [event for event, name in zip(items, involved) if name == self.name or name.startswith(f"{self.name}-")]

    def read_log(self, pod: str, container: str, previous: bool, tail_lines: int) -> str:
        """The last lines of a container's log (``""`` when there is none)."""
        try:
            return self.api.call(
                f"reading log of {pod}/{container}",
                self.api.core.read_namespaced_pod_log,
                pod,
                self.namespace,
                container=container,
                tail_lines=tail_lines,
                previous=previous,
            )
        except ApiException:
            return ""

    # -- writing -------------------------------------------------------------------------------------------------------
    def patch_job(self, body: dict[str, Any], doing: str, uid: str, retry: Retry | None = None) -> dict[str, Any]:
        """Merge-patches the job while it is the one with ``uid`` (a precondition; ``doing``: named in errors).

        Raises:
            NotOurJob: The job under the name has another uid (nothing was changed).
        """
        what = f"{doing} {self.kind.kind} {self.namespace}/{self.name}"
        guarded = {**body, "metadata": {**(body.get("metadata") or {}), "uid": uid}} if uid else body
        try:
            return self._custom(
                what,
                "patch_namespaced_custom_object",
                self.name,
                guarded,
                field_validation=FIELD_VALIDATION,
                retry=retry,
            )
        except ApiException as error:
            if uid and _status(error) in (409, 422) and "uid" in str(getattr(error, "body", "") or "").lower():
                raise self._not_ours(what, uid) from None
            raise _refused(what, error, self.manifest, create=False) from None

    def delete_job(self, uid: str, retry: Retry | None = None) -> bool:
        """Deletes the job with ``uid`` (a precondition; else :class:`NotOurJob`) and what it owns; ``False``: gone."""
        what = f"deleting {self.kind.kind} {self.namespace}/{self.name}"
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid else None
        try:
            self._custom(
                what,
                "delete_namespaced_custom_object",
                self.name,
                propagation_policy="Background",
                body=options,
                retry=retry,
            )
        except ApiException as error:
            if _status(error) == 404:
                return False
            if uid and _status(error) == 409:
                raise self._not_ours(what, uid) from None
            raise _rejected(what, error) from None
        self.say(f"deleted (with {self.kind.children})")
        return True

    def _not_ours(self, what: str, uid: str) -> NotOurJob:
        return NotOurJob(
            f"{what}: refused, as asked, because {self.namespace}/{self.name} is no longer this run's job (uid {uid}): "
            "another job took the name; it was left untouched"
        )
