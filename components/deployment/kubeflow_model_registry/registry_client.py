"""``model_registry.ModelRegistry`` with the step's deadlines, retries and errors (README: *The registry client*)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from components._common.retry import (
    GaveUp,
    answer_message,
    call_with_retries,
    describe,
    error_chain,
    is_tls_error,
    is_transient,
)
from components._common.retry import RetryPolicy as SharedRetryPolicy

from .registry_endpoint import API_ROOT, API_VERSIONS, CLIENT_API_VERSION, TOKEN_ENV, RegistryEndpoint

T = TypeVar("T")


class RegistryRequestError(RuntimeError):
    """The registry could not be reached or refused a request (after retries where they apply)."""


class RegistryAuthError(RegistryRequestError):
    """The registry answered 401/403: the bearer token is missing, invalid or lacks access."""


@dataclasses.dataclass(frozen=True)
class RetryPolicy(SharedRetryPolicy):
    """Short waits; ``request_timeout_s``: one request, body included; ``deadline_s``: one step, every try and wait."""

    initial_delay_s: float = 0.5
    max_delay_s: float = 8.0
    request_timeout_s: float = 30.0
    deadline_s: float = 120.0


#: What to check when the registry does not answer (the RHOAI guide's *Model Registry Issues: Connection refused*).
UNREACHABLE_REMEDY = (
    "Check that the Model Registry is installed and running, that registry_address and registry_port name its REST "
    "service (the pipelines' phase_04_registry_man_address, which may carry the port as in https://host:8443, and "
    "phase_04_registry_opt_port), and that the namespace's network policies allow connections from the pipeline's "
    "pods"
)


def describe_failure(exc: BaseException, step: str, endpoint: RegistryEndpoint) -> RegistryRequestError:
    """What failed while trying to ``step``, where, and what to do (never the token); 401/403: a RegistryAuthError."""
    import errno

    from mr_openapi.exceptions import ApiException

    where = f"Model Registry at {endpoint.base_url}"
    if isinstance(exc, ApiException) and exc.status in (401, 403):
        verb = "rejected the bearer token" if exc.status == 401 else "denied access for the bearer token"
        return RegistryAuthError(
            f"{where} {verb} (HTTP {exc.status}) while trying to {step}; token source: {endpoint.token_source}. "
            f"Provide a valid token in the secret env var {TOKEN_ENV} or a service account allowed to use the "
            "registry (e.g. a RoleBinding to the registry's user role)."
        )
    if isinstance(exc, ApiException):
        return RegistryRequestError(
            f"{where} answered HTTP {exc.status} {exc.reason or ''} while trying to {step}: {answer_message(exc)}"
        )
    if is_tls_error(exc):
        return RegistryRequestError(
            f"TLS verification of {where} failed while trying to {step}: {exc}. Pass ca_bundle_path with the CA "
            "that signed the registry's certificate (is_secure=False disables verification)."
        )
    answer = _unreadable_answer(exc)
    if answer is not None:
        html = "<html" in answer.lower() or "<!doctype" in answer.lower()
        hint = (
            "an HTML page: a login page of an OAuth proxy or a dashboard route, not the registry's REST service; "
            "check registry_address/registry_port and the bearer token"
            if html
            else "check registry_address/registry_port point at the registry's REST service"
        )
        shown = " ".join(answer.split())[:120]
        return RegistryRequestError(
            f"{where} answered while trying to {step}, but not with the registry's JSON ({type(exc).__name__}: "
            f"{shown!r}): {hint}"
        )
    refused = any(getattr(cause, "errno", None) == errno.ECONNREFUSED for cause in error_chain(exc))
    return RegistryRequestError(
        f"{where} could not be reached while trying to {step}: {'connection refused; ' if refused else ''}"
        f"{type(exc).__name__}: {exc}. {UNREACHABLE_REMEDY}"
    )


def _unreadable_answer(exc: BaseException) -> str | None:
    """The start of an answer the client could not read (not JSON, or JSON of another shape); ``None``: no answer."""
    import json
    import traceback

    if type(exc).__name__ == "ValidationError" and hasattr(exc, "errors"):
        try:
            first = exc.errors()[0]
        except (IndexError, TypeError, ValueError):
            return str(exc).splitlines()[0]
        value = first.get("input")
        return value if isinstance(value, str) else f"{first.get('msg', '')} at {first.get('loc', '')}"
    if isinstance(exc, json.JSONDecodeError):
        return exc.doc or ""
    files = [frame.f_code.co_filename for frame, _ in traceback.walk_tb(exc.__traceback__)]
    in_client = any(part in file for file in files for part in ("/mr_openapi/", "/model_registry/"))
    return f"{exc}" if isinstance(exc, (TypeError, AttributeError, KeyError)) and in_client else None


def _registry_class() -> type:
    """``model_registry.ModelRegistry`` speaking a given API version and sending only the token it is given.

    Its three uses of the client's private API are listed, with their pinning tests, in the README (*The registry
    client*).
    """
    from contextlib import asynccontextmanager

    from model_registry import ModelRegistry
    from model_registry.core import ModelRegistryAPIClient
    from mr_openapi import ApiClient, ModelRegistryServiceApi

    client_prefix = API_ROOT + CLIENT_API_VERSION + "/"

    class ReRootedApiClient(ApiClient):
        def __init__(self, configuration: Any, api_prefix: str):
            super().__init__(configuration)
            self.api_prefix = api_prefix

        def param_serialize(self, *args: Any, **kwargs: Any) -> Any:
            path = kwargs.get("resource_path") or ""
            if path.startswith(client_prefix):
                kwargs["resource_path"] = self.api_prefix + path[len(client_prefix) :]
            return super().param_serialize(*args, **kwargs)

    @dataclasses.dataclass
    class ReRootedAPIClient(ModelRegistryAPIClient):
        api_version: str = CLIENT_API_VERSION

        @asynccontextmanager
        async def get_client(self):
            api_client = ReRootedApiClient(self.config, API_ROOT + self.api_version + "/")
            try:
                yield ModelRegistryServiceApi(api_client)
            finally:
                await api_client.close()

    class Registry(ModelRegistry):
        def __init__(self, *args: Any, api_version: str, **kwargs: Any):
            self.api_version = api_version
            super().__init__(*args, **kwargs)

        def __setattr__(self, name: str, value: Any) -> None:
            if name == "_api" and not isinstance(value, ReRootedAPIClient):  # before the constructor's first call
                value = ReRootedAPIClient(value.config, self.api_version)
            super().__setattr__(name, value)

        @staticmethod
        def _get_user_token(user_token_envvar: str | None = None) -> None:
            return None  # make_endpoint found the token and decided whether it may be sent

        def attach_artifact(self, artifact: Any, version_id: str) -> Any:
            """Adds ``artifact`` to the existing version ``version_id``."""
            return self.async_runner(self._api.upsert_model_version_artifact(artifact, version_id))

    return Registry


class RegistrySession:
    """One registry's client (``registry`` once :meth:`open` connected) and the steps' clock."""

    def __init__(self, endpoint: RegistryEndpoint, policy: RetryPolicy, log: Callable[[str], None]):
        self.endpoint, self.policy, self.log = endpoint, policy, log
        self.registry: Any = None
        self._deadline = math.inf

    def run(self, coroutine: Any) -> Any:
        """The client's ``async_runner``: one request, ended at ``request_timeout_s`` or at the step's deadline."""
        timeout = max(min(self.policy.request_timeout_s, self._deadline - time.monotonic()), 0.1)
        try:
            return asyncio.run(asyncio.wait_for(coroutine, timeout))  # the client opens a session per request
        except TimeoutError:
            raise TimeoutError(f"no complete answer within {timeout:.1f} s") from None

    def call(self, step: str, func: Callable[[], T], *, retry_conflicts: bool = False) -> T:
        """``func()`` (safe to repeat; ``step`` names it), retried while transient (and 409 with ``retry_conflicts``).

        Raises:
            RegistryRequestError: A permanent failure, or transient failures on every try.
            StoreError: Unchanged: the client's "not as asked" (no such model, the version exists).
        """
        from model_registry.exceptions import StoreError
        from mr_openapi.exceptions import ConflictException

        def retryable(exc: BaseException) -> bool:
            return is_transient(exc) or (retry_conflicts and isinstance(exc, ConflictException))

        def on_retry(number: int, delay: float, exc: BaseException) -> None:
            self.log(f"{step}: {describe(exc)}; retry {number}/{self.policy.attempts - 1} in {delay:.1f}s")

        self._deadline = time.monotonic() + self.policy.deadline_s
        try:
            return call_with_retries(func, self.policy, retryable=retryable, on_retry=on_retry, deadline=self._deadline)
        except GaveUp as gave_up:
            why = f" within its {self.policy.deadline_s:g} s deadline" if gave_up.reason == "deadline" else ""
            error = describe_failure(gave_up.last, step, self.endpoint)
            raise type(error)(f"{error} (gave up after {gave_up.attempts} tries{why})") from gave_up.last
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - not transient: re-raised as a clear error
            raise describe_failure(exc, step, self.endpoint) from exc
        finally:
            self._deadline = math.inf

    def open(self, author: str) -> None:
        """Connects in the first API version the registry serves (``v1`` first; the client lists one model).

        Raises:
            RegistryRequestError: The registry is unreachable, refuses the token, or serves neither API version.
        """
        from mr_openapi.exceptions import NotFoundException

        registry_class, endpoint = _registry_class(), self.endpoint

        def connect(api_version: str) -> Any:
            with warnings.catch_warnings():  # "User access token is missing": make_endpoint logged why
                warnings.simplefilter("ignore", UserWarning)
                return registry_class(
                    endpoint.base_url,
                    author=author,
                    is_secure=endpoint.is_secure,
                    user_token=endpoint.token,
                    custom_ca=endpoint.ca_bundle_path or None,
                    log_level=logging.ERROR,  # its port hints; our errors say what to check
                    async_runner=self.run,
                    api_version=api_version,
                )

        for api_version in API_VERSIONS:
            try:
                step = f"list registered models under {API_ROOT}{api_version}"
                self.registry = self.call(step, lambda version=api_version: connect(version))
            except RegistryRequestError as exc:
                if not isinstance(exc.__cause__, NotFoundException):
                    raise
                self.log(f"{endpoint.base_url} has no {API_ROOT}{api_version} API (HTTP 404)")
                continue
            via = f"API {API_ROOT}{api_version}, bearer token: {endpoint.token_source}"
            self.log(f"connected to {endpoint.base_url} ({via})")
            return
        raise RegistryRequestError(
            f"{endpoint.base_url} serves no Model Registry REST API: tried "
            + ", ".join(API_ROOT + v for v in API_VERSIONS)
            + " (all HTTP 404). Check registry_address/registry_port point at the registry's REST service."
        )
