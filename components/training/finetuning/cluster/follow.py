"""Following a submitted job: watch (or poll) until it completes, fails, vanishes or a timeout expires.

One watch request per ``poll_interval_seconds`` window (reconnect when it ends or drops, relist on 410 Gone) or one
GET per window; progress lines from the trainer status or the metrics file; the start timeout (pods not running, from
Kueue admission) and the total timeout; a job a user suspends (pauses) is waited for and followed again once resumed,
the pause counting against the total timeout only with ``timeout_counts_paused_time``.

:class:`FollowLoop` is mixed into the runner (:mod:`.runner`), which provides the job requests
(:class:`.job_client.JobRequests`), ``settings`` (:class:`.runner.FollowSettings`) and the run's state.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from components._common.retry import is_transient
from components.training.finetuning.cluster import diagnosis as diagnosis_module
from components.training.finetuning.cluster.api import api_message, failure_text
from components.training.finetuning.cluster.api import rejected as _rejected
from components.training.finetuning.cluster.api import status_of as _status
from components.training.finetuning.cluster.errors import JobApiError
from components.training.finetuning.cluster.job_kinds import queue_name
from components.training.finetuning.cluster.progress import format_duration, progress_line
from components.training.finetuning.pod import progress_server


class FollowLoop:
    """The follow loop of the runner's job (a mixin; see the module docstring)."""

    # -- follow --------------------------------------------------------------------------------------------------------
    def follow(self) -> str:
        """Follows the job until it completes, fails, is deleted or a timeout expires; returns the outcome."""
        assert self.job is not None
        while True:
            phase = self.kind.phase(self.job)
            if phase in ("Complete", "Failed"):
                self.report(phase)
                return phase
            paused = self.note_pause(phase)
            if not self.started:
                self.observe_queue()
                self.started = self.check_started(phase)
            self.report("Running" if self.started and phase == "Pending" else phase)
            elapsed = self.settings.clock() - self.started_at - self.paused_seconds()
            start_elapsed = self.settings.clock() - self.start_clock_at
            if self.settings.timeout and elapsed >= self.settings.timeout:
                return "Timeout"
            if not self.started and self.settings.start_timeout and start_elapsed >= self.settings.start_timeout:
                return "StartTimeout"
            window = self.settings.poll_interval
            clock_stopped = (
                paused and not self.settings.timeout_counts_paused_time
            )  # no deadline comes closer while paused
            for limit, spent in (
                (self.settings.timeout, elapsed),
                (0 if self.started else self.settings.start_timeout, start_elapsed),
            ):
                if limit and not clock_stopped:
                    window = min(window, max(limit - spent, 0.001))
            job = self.wait_for_change(window)
            if job is None:
                return "Deleted"
            self.job = job

    def observe_queue(self) -> None:
        """Logs a Kueue-queued job's state when it changes; while Kueue holds it suspended the start timeout waits."""
        queue = queue_name(self.job or {})
        if not queue:
            return
        suspended = self.kind.is_suspended(self.job or {})
        if suspended:
            self.start_clock_at = self.settings.clock()  # start_timeout_seconds counts from admission
        state = "suspended" if suspended else "admitted"
        if state != self.queue_state:
            self.queue_state = state
            waiting = "suspended, waiting for Kueue to admit it (start_timeout_seconds counts from admission)"
            self.say(f"Kueue LocalQueue {queue!r}: " + (waiting if suspended else "admitted"))

    # -- pause (a user suspends the running job, e.g. from the OpenShift AI dashboard) ---------------------------------
    def note_pause(self, phase: str) -> bool:
        """Whether a started job is paused now; logs when a pause begins and ends (one line each)."""
        paused = self.started and (phase == "Suspended" or self.kind.is_suspended(self.job or {}))
        now = self.settings.clock()
        if paused and self.paused_since is None:
            self.paused_since = now
            counted = "counts" if self.settings.timeout_counts_paused_time else "does not count"
            self.say(
                "paused: the job was suspended (its pods stop after a just-in-time checkpoint); waiting for it to be "
                f"resumed (the pause {counted} against timeout_seconds)"
            )
        elif not paused and self.paused_since is not None:
            self.paused_total += now - self.paused_since
            self.say(f"resumed after a pause of {format_duration(now - self.paused_since)}: following the resumed run")
            self.paused_since = None
        return paused

    def paused_seconds(self) -> float:
        """Time spent paused that does not count against ``timeout_seconds`` (0 when pauses count)."""
        if self.settings.timeout_counts_paused_time:
            return 0.0
        ongoing = self.settings.clock() - self.paused_since if self.paused_since is not None else 0.0
        return self.paused_total + ongoing

    def check_started(self, phase: str) -> bool:
        """Whether training has started (a pod running); logs pod problems once each while waiting."""
        if phase == "Running" or self.metrics.poll():
            return True
        pods = self.list_pods()
        for pod in pods:
            for cause in diagnosis_module.pod_causes(pod):
                if cause.line() not in self.reported:
                    self.reported.add(cause.line())
                    self.say(f"waiting: {cause.line()}")
        for pod in pods:
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded") or any(
                "running" in (status.get("state") or {}) for status in statuses
            ):
                return True
        return False

    def report(self, phase: str) -> None:
        """Logs a progress line when it changed."""
        line = progress_line(phase, progress_server.trainer_status(self.job), self.metrics.poll())
        if line != self.last_line:
            self.last_line = line
            self.say(line)

    def wait_for_change(self, window: float) -> dict[str, Any] | None:
        """Waits up to ``window`` seconds (one watch request, or one sleep + GET); returns the job's newest state."""
        if not self.settings.use_watch:
            self.settings.sleep(window)
            return self.get_job()
        return self.watch_window(window)

    def watch_window(self, window: float) -> dict[str, Any] | None:
        """One watch request of about ``window`` seconds; returns early only on completion, failure or deletion."""
        import urllib3
        from kubernetes import watch
        from kubernetes.client import ApiException

        assert self.job is not None
        kwargs: dict[str, Any] = {
            "field_selector": f"metadata.name={self.name}",
            "timeout_seconds": max(1, math.ceil(window)),
            "_request_timeout": self.api.request_timeout(window + min(5.0, window)),
        }
        version = (self.job.get("metadata") or {}).get("resourceVersion")
        if version:
            kwargs["resource_version"] = version
        began = self.settings.clock()
        job = self.job
        answered: list[bool] = []

        @functools.wraps(self.api.custom.list_namespaced_custom_object)
        def list_call(*args: Any, **call_kwargs: Any) -> Any:
            response = self.api.custom.list_namespaced_custom_object(*args, **call_kwargs)
            answered.append(True)  # the API answered: a read timeout from now on only ends the window
            return response

        stream = watch.Watch().stream(
            list_call,
            self.kind.group,
            self.kind.version,
            self.namespace,
            self.kind.plural,
            **kwargs,
        )
        try:
            for event in stream:
                obj = event.get("raw_object") or {}
                if event.get("type") == "BOOKMARK" or (obj.get("metadata") or {}).get("name") != self.name:
                    continue
                if event.get("type") == "DELETED":
                    return None
                job = obj
                if self.kind.phase(job) in ("Complete", "Failed"):
                    return job
            self.watch_failures = 0
        except ApiException as error:
            if _status(error) == 410:
                self.say("watch expired (410 Gone): relisting")
                return self.get_job()
            if not is_transient(error):
                raise _rejected(f"watching the {self.kind.kind}", error) from None
            self.watch_retry(api_message(error))
        except (urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.ProtocolError) as error:
            if not answered:  # connected, but the API never answered
                self.watch_retry(failure_text(error))
            # else: the window ended on the client side, or the connection dropped: reconnect next time
        except (urllib3.exceptions.HTTPError, OSError) as error:
            self.watch_retry(f"{type(error).__name__}: {error}")
        finally:
            stream.close()
        spent = self.settings.clock() - began
        if spent < window / 2:
            self.settings.sleep(window - spent)  # the watch ended early (dropped): keep to one request per window
        return job

    def watch_retry(self, failure: str) -> None:
        """Counts a failed watch request; gives up after ``attempts`` in a row."""
        self.watch_failures += 1
        if self.watch_failures >= self.settings.attempts:
            raise JobApiError(
                f"watching {self.kind.kind} {self.name}: failed {self.watch_failures} times, last: {failure}"
            )
        self.say(f"watch failed ({failure}); reconnecting")
