"""The requests about one job: create (or read on 409), read, list its pods and events, read logs, patch, delete.

:class:`JobRequests` is mixed into the runner (:mod:`.runner`), which provides ``api`` (:class:`.api.Api`),
``kind`` (:class:`.job_kinds.JobKind`), ``manifest``, ``name``, ``namespace``, ``settings``, ``job``, ``submitted``
and ``say``. Every call goes through :class:`.api.Api` (timeouts, retries, deadline); a refusal becomes a
:class:`.errors.JobApiError` naming the job's real kind.
"""

from __future__ import annotations

import json
from typing import Any

from components.training.finetuning.cluster.api import rejected as _rejected
from components.training.finetuning.cluster.api import status_of as _status
from components.training.finetuning.cluster.job_kinds import selector_matches


class NameBeingReleased(Exception):
    """Create answered 409 but the job reads 404: the name is held by a job being deleted (retried with backoff)."""


class JobRequests:
    """The API requests about the runner's job (a mixin; see the module docstring)."""

    def create_or_read(self) -> dict[str, Any] | None:
        """Creates the job (``None``: created, now in ``self.job``) or, on 409, reads the existing one.

        Raises:
            NameBeingReleased: 409, then 404: the name is held by a job being deleted.
        """
        from kubernetes.client import ApiException

        what = f"creating {self.kind.kind} {self.namespace}/{self.name}"
        self.submitted = True
        try:
            self.job = self.api.call(
                what,
                self.api.custom.create_namespaced_custom_object,
                self.kind.group,
                self.kind.version,
                self.namespace,
                self.kind.plural,
                dict(self.manifest),
            )
            return None
        except ApiException as error:
            if _status(error) != 409:
                self.submitted = False  # refused: nothing was created
                raise _rejected(what, error) from None
        existing = self.get_job()
        if existing is None:
            raise NameBeingReleased("HTTP 409 AlreadyExists, then HTTP 404 reading it")
        return existing

    # -- reading -------------------------------------------------------------------------------------------------------
    def get_job(self) -> dict[str, Any] | None:
        """The job now, or None when it does not exist."""
        from kubernetes.client import ApiException

        what = f"reading {self.kind.kind} {self.namespace}/{self.name}"
        try:
            return self.api.call(
                what,
                self.api.custom.get_namespaced_custom_object,
                self.kind.group,
                self.kind.version,
                self.namespace,
                self.kind.plural,
                self.name,
            )
        except ApiException as error:
            if _status(error) == 404:
                return None
            raise _rejected(what, error) from None

    def list_pods(self) -> list[dict[str, Any]]:
        """The job's pods (JobSet, or the Training Operator, labels them with the job's name)."""
        from kubernetes.client import ApiException

        what = f"listing pods of {self.kind.kind} {self.name}"
        selector = self.kind.pod_selector(self.name)
        try:
            result = self.api.call(
                what,
                self.api.core.list_namespaced_pod,
                self.namespace,
                label_selector=selector,
                _preload_content=False,
            )
        except ApiException as error:
            raise _rejected(what, error) from None
        items = json.loads(result.data).get("items") or []
        return [pod for pod in items if selector_matches(selector, (pod.get("metadata") or {}).get("labels") or {})]

    def list_events(self) -> list[dict[str, Any]]:
        """Events about the job and what it owns (JobSet, Jobs, pods: their names start with the job's)."""
        from kubernetes.client import ApiException

        what = f"listing events of {self.kind.kind} {self.name}"
        try:
            result = self.api.call(what, self.api.core.list_namespaced_event, self.namespace, _preload_content=False)
        except ApiException as error:
            raise _rejected(what, error) from None
        items = json.loads(result.data).get("items") or []
        mine = []
        for event in items:
            involved = str((event.get("involvedObject") or {}).get("name", ""))
            if involved == self.name or involved.startswith(f"{self.name}-"):
                mine.append(event)
        return mine

    def read_log(self, pod: str, container: str, previous: bool) -> str:
        """The last lines of a container's log (``""`` when there is none)."""
        from kubernetes.client import ApiException

        try:
            return self.api.call(
                f"reading log of {pod}/{container}",
                self.api.core.read_namespaced_pod_log,
                pod,
                self.namespace,
                container=container,
                tail_lines=self.settings.log_tail_lines,
                previous=previous,
            )
        except ApiException:
            return ""

    # -- writing -------------------------------------------------------------------------------------------------------
    def patch_job(self, body: dict[str, Any], doing: str) -> dict[str, Any]:
        """Merge-patches the job (``doing``: what for, named in errors)."""
        from kubernetes.client import ApiException

        what = f"{doing} {self.kind.kind} {self.namespace}/{self.name}"
        try:
            return self.api.call(
                what,
                self.api.custom.patch_namespaced_custom_object,
                self.kind.group,
                self.kind.version,
                self.namespace,
                self.kind.plural,
                self.name,
                body,
            )
        except ApiException as error:
            raise _rejected(what, error) from None

    def delete_job(self) -> bool:
        """Deletes the job and (in the background, by owner references) what it owns."""
        from kubernetes.client import ApiException

        what = f"deleting {self.kind.kind} {self.namespace}/{self.name}"
        try:
            self.api.call(
                what,
                self.api.custom.delete_namespaced_custom_object,
                self.kind.group,
                self.kind.version,
                self.namespace,
                self.kind.plural,
                self.name,
                propagation_policy="Background",
            )
        except ApiException as error:
            if _status(error) == 404:
                return False
            raise _rejected(what, error) from None
        self.say(f"deleted (with {self.kind.children})")
        return True
