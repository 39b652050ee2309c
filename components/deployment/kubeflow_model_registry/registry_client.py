"""The requests to a Model Registry: API version detection, retries, errors that say what to do.

Requests go through the ``model-registry`` Python client's API layer (``model_registry.core.ModelRegistryAPIClient``,
generated from the registry's OpenAPI spec). Clients >= 0.3.12 speak ``/api/model_registry/v1``; registries older
than that serve the same operations under ``/api/model_registry/v1alpha3`` only. :func:`connect` probes ``v1`` first,
falls back to ``v1alpha3`` when the server has no ``v1`` API, and reports which one it used.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from components._common.retry import (
    GaveUp,
    answer_message,
    call_with_retries_async,
    describe,
    error_chain,
    is_tls_error,
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
    """The shared retry policy (:mod:`components._common.retry`) with the registry's short waits, and its deadlines.

    Attributes:
        request_timeout_s: The most one request may take, its answer's body included.
        deadline_s: The most one step may take (every try and wait): a registry that never answers ends it then.
    """

    initial_delay_s: float = 0.5
    max_delay_s: float = 8.0
    request_timeout_s: float = 30.0
    deadline_s: float = 120.0


def describe_failure(exc: BaseException, step: str, endpoint: RegistryEndpoint) -> RegistryRequestError:
    """What failed while trying to ``step``, where, and what to do (never the token).

    Returns:
        A :class:`RegistryAuthError` for 401/403, a :class:`RegistryRequestError` otherwise.
    """
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
    refused = "connection refused; " if _connection_refused(exc) else ""
    return RegistryRequestError(
        f"{where} could not be reached while trying to {step}: {refused}{type(exc).__name__}: {exc}. "
        f"{UNREACHABLE_REMEDY}"
    )


#: What to check when the registry does not answer (the RHOAI guide's *Model Registry Issues: Connection refused*).
UNREACHABLE_REMEDY = (
    "Check that the Model Registry is installed and running, that registry_address and registry_port name its REST "
    "service (the pipelines' phase_04_registry_man_address, which may carry the port as in https://host:8443, and "
    "phase_04_registry_opt_port), and that the namespace's network policies allow connections from the pipeline's "
    "pods"
)


def _connection_refused(exc: BaseException) -> bool:
    """Whether the connection was refused (nothing listens at the address and port), through the exception's causes."""
    import errno

    return any(getattr(cause, "errno", None) == errno.ECONNREFUSED for cause in error_chain(exc))


def _unreadable_answer(exc: BaseException) -> str | None:
    """The start of an answer the client could not read (not JSON, or JSON of another shape); ``None``: no answer.

    pydantic's ``ValidationError`` (JSON of the wrong shape, or an HTML page read as a string), ``JSONDecodeError``
    (a body that is not JSON) and the ``TypeError``/``AttributeError`` of a generated model fed something else mean
    the server answered, but not as the registry does.
    """
    import json

    if type(exc).__name__ == "ValidationError" and hasattr(exc, "errors"):
        try:
            first = exc.errors()[0]
        except (IndexError, TypeError, ValueError):
            return str(exc).splitlines()[0]
        value = first.get("input")
        return value if isinstance(value, str) else f"{first.get('msg', '')} at {first.get('loc', '')}"
    if isinstance(exc, json.JSONDecodeError):
        return exc.doc or ""
    if isinstance(exc, (TypeError, AttributeError, KeyError)) and _raised_in_client(exc):
        return f"{exc}"
    return None


def _raised_in_client(exc: BaseException) -> bool:
    """Whether ``exc`` was raised in the registry client's generated code (reading an answer), not in ours."""
    import traceback

    files = [frame.f_code.co_filename for frame, _ in traceback.walk_tb(exc.__traceback__)]
    return any(part in file for file in files for part in ("/mr_openapi/", "/model_registry/"))


async def with_retries(
    step: str,
    call: Callable[[], Awaitable[T]],
    endpoint: RegistryEndpoint,
    policy: RetryPolicy,
    log: Callable[[str], None],
) -> T:
    """Runs ``call`` (a fresh coroutine each try) and retries it with backoff while it fails transiently.

    ``call`` must be safe to repeat: callers pass idempotent find-or-create steps, so a create whose answer got lost
    is found on the next try instead of being made twice. ``step`` says what it does in log lines and errors.

    Raises:
        RegistryRequestError: A permanent failure, or transient failures on every try.
    """

    def on_retry(number: int, delay: float, exc: BaseException) -> None:
        log(f"{step}: transient failure ({describe(exc)}); retry {number}/{policy.attempts - 1} in {delay:.1f}s")

    deadline = time.monotonic() + policy.deadline_s

    async def attempt() -> T:  # each try within its request timeout, and none past the step's deadline
        timeout = max(min(policy.request_timeout_s, deadline - time.monotonic()), 0.1)
        try:
            return await asyncio.wait_for(call(), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"no complete answer within {timeout:.1f} s") from None

    try:
        return await call_with_retries_async(attempt, policy, on_retry=on_retry, deadline=deadline)
    except GaveUp as gave_up:
        error = describe_failure(gave_up.last, step, endpoint)
        why = f"within its {policy.deadline_s:g} s deadline" if gave_up.reason == "deadline" else ""
        raise RegistryRequestError(
            f"{error} (gave up after {gave_up.attempts} tries{' ' + why if why else ''})"
        ) from gave_up.last
    except Exception as exc:  # noqa: BLE001 - not transient: re-raised as a clear error
        raise describe_failure(exc, step, endpoint) from exc


# --------------------------------------------------------------------------------------------------------------------
# The client, speaking v1 or v1alpha3
# --------------------------------------------------------------------------------------------------------------------


def _versioned_api_class():
    """A ``ModelRegistryAPIClient`` whose generated ``/api/model_registry/v1/...`` paths can be re-rooted."""
    from contextlib import asynccontextmanager

    from model_registry.core import ModelRegistryAPIClient
    from mr_openapi import ApiClient, ModelRegistryServiceApi

    client_prefix = API_ROOT + CLIENT_API_VERSION + "/"

    class _ReRootedApiClient(ApiClient):
        def __init__(self, configuration: Any, api_prefix: str):
            super().__init__(configuration)
            self.api_prefix = api_prefix

        def param_serialize(self, *args: Any, **kwargs: Any) -> Any:
            path = kwargs.get("resource_path")
            if path and path.startswith(client_prefix):
                kwargs["resource_path"] = self.api_prefix + path[len(client_prefix) :]
            return super().param_serialize(*args, **kwargs)

    @dataclasses.dataclass
    class VersionedRegistryAPI(ModelRegistryAPIClient):
        """One HTTP session for all calls (the stock client opens one, with a fresh TLS context, per call)."""

        api_version: str = CLIENT_API_VERSION
        _api_client: Any = None

        @asynccontextmanager
        async def get_client(self):
            if self._api_client is None:
                self._api_client = _ReRootedApiClient(self.config, API_ROOT + self.api_version + "/")
            yield ModelRegistryServiceApi(self._api_client)

        async def close(self) -> None:
            """Closes the HTTP session."""
            if self._api_client is not None:
                await self._api_client.close()
                self._api_client = None

    return VersionedRegistryAPI


def make_api(endpoint: RegistryEndpoint, api_version: str) -> Any:
    """A ``model_registry.core.ModelRegistryAPIClient`` for ``endpoint`` speaking ``api_version`` (``v1``...)."""
    api_class = _versioned_api_class()
    if endpoint.is_secure:
        api = api_class.secure_connection(
            endpoint.base_url, user_token=endpoint.token, custom_ca=endpoint.ca_bundle_path or None
        )
    else:
        api = api_class.insecure_connection(endpoint.base_url, 0, endpoint.token)
    api.api_version = api_version
    return api


async def connect(endpoint: RegistryEndpoint, policy: RetryPolicy, log: Callable[[str], None]) -> tuple[Any, str]:
    """Finds the API version the registry speaks (``v1`` first) with one cheap list call.

    Returns:
        ``(api client, api version)``; close the client with ``await api.close()``.

    Raises:
        RegistryRequestError: The registry is unreachable, refuses the token, or serves neither API version.
    """
    from model_registry.types import ListOptions
    from mr_openapi.exceptions import NotFoundException

    for api_version in API_VERSIONS:
        api = make_api(endpoint, api_version)
        try:
            await with_retries(
                f"list registered models under {API_ROOT}{api_version}",
                lambda api=api: api.get_registered_models(ListOptions(limit=1)),
                endpoint,
                policy,
                log,
            )
        except RegistryRequestError as exc:
            await api.close()
            if isinstance(exc.__cause__, NotFoundException):
                log(f"{endpoint.base_url} has no {API_ROOT}{api_version} API (HTTP 404)")
                continue
            raise
        log(f"connected to {endpoint.base_url} (API {API_ROOT}{api_version}, bearer token: {endpoint.token_source})")
        return api, api_version
    raise RegistryRequestError(
        f"{endpoint.base_url} serves no Model Registry REST API: tried "
        + ", ".join(API_ROOT + v for v in API_VERSIONS)
        + " (all HTTP 404). Check registry_address/registry_port point at the registry's REST service."
    )
