"""Idempotent registration: registered model -> model version (with lineage) -> model artifact (the serving URI).

Every step is find-then-create and retried as a whole (the README's *Overview* says what is reused and refused).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import re
from collections.abc import Callable
from typing import Any

from .lineage import RunInfo
from .registry_client import RetryPolicy, with_retries
from .registry_endpoint import RegistryEndpoint

#: The custom property that ties a version to the pipeline run that registered it.
RUN_ID_PROPERTY = "pipeline_run_id"
#: Version names the registry UI and URLs handle well.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+\-]{0,252}$")


class VersionConflictError(ValueError):
    """The requested version already exists and points at a different model."""


class VersionTakenError(VersionConflictError):
    """The version name is another run's (it exists with another run's lineage, or was created at the same time).

    Attributes:
        other_run: The pipeline run recorded on the version (``""``: none recorded).
    """

    def __init__(self, message: str, other_run: str) -> None:
        super().__init__(message)
        self.other_run = other_run


#: How many names an auto version tries (``<derived>``, ``<derived>-2``, ...) before giving up.
MAX_AUTO_VERSION_NAMES = 10


@dataclasses.dataclass(frozen=True)
class VersionRequest:
    """What to register: names, serving ``uri``, lineage (``custom_properties``) and the run.

    An empty ``version_name`` reuses this run's version or derives one (:func:`derived_version_name`).
    """

    model_name: str
    version_name: str
    uri: str
    model_format_name: str
    model_format_version: str
    author: str
    description: str
    storage_key: str
    custom_properties: dict[str, Any]
    run: RunInfo


@dataclasses.dataclass(frozen=True)
class ModelRegistryResult:
    """What the ``model_registry`` step did, and what the registry holds now (ids and names "" when not registered).

    Attributes:
        status: ``registered``, ``already_registered``, ``gated_out`` or ``skipped`` (the README's *Outputs*).
        reason: One line saying what happened.
        api_version: The registry API, ``v1`` or ``v1alpha3``.
        endpoint_url: The served endpoint when ``deploy_inference_service`` deployed it, else "".
        smoke_answer: The deployed model's answer to the smoke completion request, else "".
    """

    status: str
    model_id: str = ""
    version_id: str = ""
    artifact_id: str = ""
    version_name: str = ""
    uri: str = ""
    reason: str = ""
    api_version: str = ""
    endpoint_url: str = ""
    smoke_answer: str = ""


def validate_name(value: str, parameter: str) -> str:
    """Checks a model or version name (``[A-Za-z0-9][A-Za-z0-9._:+-]*``, at most 253 chars).

    Raises:
        ValueError: The name is empty or has other characters.
    """
    if not _NAME.match(value):
        raise ValueError(
            f"{parameter}={value!r}: must start with a letter or digit and use only letters, digits and . _ : + - "
            "(at most 253 characters)"
        )
    return value


#: The registered model's name when neither the run nor the model says more.
FALLBACK_MODEL_NAME = "fine-tuned-model"


def default_model_name(algorithm: str, base_model: str) -> str:
    """The model name when ``model_name`` is empty: ``<algorithm>-<base model's last path part>``.

    ``osft`` + ``Qwen/Qwen2.5-1.5B-Instruct`` -> ``osft-Qwen2.5-1.5B-Instruct``; characters the registry does not
    accept become ``-``; :data:`FALLBACK_MODEL_NAME` when neither is known.
    """
    reference = base_model.strip().removeprefix("oci://").split("@")[0].rstrip("/")  # a digest is no name
    tail = reference.rsplit("/", 1)[-1]
    parts = [part for part in (algorithm.strip().lower(), tail) if part]
    name = re.sub(r"[^A-Za-z0-9._:+\-]+", "-", "-".join(parts)).strip("-._:+")[:253]
    return name if _NAME.match(name) else FALLBACK_MODEL_NAME


def check_registration_names(registry_address: str, model_name: str, model_version: str) -> None:
    """The names a run would register under, checked before it starts (an empty one is derived at registration).

    Raises:
        ValueError: A name the registry would refuse (names the parameter and the rule).
    """
    if not registry_address.strip():
        return
    if model_name.strip():
        validate_name(model_name, "model_name")
    if model_version.strip():
        validate_name(model_version, "model_version")


def derived_version_name(run: RunInfo, now: datetime.datetime) -> str:
    """``<UTC yyyymmdd-HHMMSS>-<first 8 characters of the run id>`` (just the timestamp when the run is unknown)."""
    stamp = now.astimezone(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    short = re.sub(r"[^A-Za-z0-9]", "", run.run_id)[:8]
    return f"{stamp}-{short}" if short else stamp


class Registrar:
    """Runs the find-or-create steps against one ``ModelRegistryAPIClient`` (``registry_client.connect``)."""

    def __init__(self, api: Any, endpoint: RegistryEndpoint, policy: RetryPolicy, log: Callable[[str], None]):
        self.api = api
        self.endpoint = endpoint
        self.policy = policy
        self.log = log

    async def _retry(self, step: str, call: Callable[[], Any]) -> Any:
        return await with_retries(step, call, self.endpoint, self.policy, self.log)

    async def _find_or_create(self, find: Callable[[], Any], create: Callable[[], Any]) -> tuple[Any, bool]:
        from mr_openapi.exceptions import ConflictException

        found = await find()
        if found is not None:
            return found, False
        try:
            return await create(), True
        except ConflictException:  # created concurrently or by a try whose answer was lost
            found = await find()
            if found is None:
                raise
            return found, False

    async def ensure_registered_model(self, request: VersionRequest) -> Any:
        """The registered model named ``request.model_name``, created when missing."""
        from model_registry.types import RegisteredModel

        model, created = await self._retry(
            f"find or create registered model {request.model_name!r}",
            lambda: self._find_or_create(
                lambda: self.api.get_registered_model_by_params(request.model_name),
                lambda: self.api.upsert_registered_model(
                    RegisteredModel(
                        name=request.model_name,
                        owner=request.author or None,
                        description=request.description or None,
                    )
                ),
            ),
        )
        self.log(f"{'created' if created else 'found'} registered model {request.model_name!r} (id {model.id})")
        return model

    async def list_versions(self, model_id: str) -> list[Any]:
        """All versions of a registered model (every page)."""
        from model_registry.types import ListOptions

        versions: list[Any] = []
        options = ListOptions(limit=100)
        while True:
            page = await self._retry(
                f"list versions of registered model {model_id}",
                lambda: self.api.get_model_versions(model_id, options),
            )
            versions.extend(page)
            if not options.next_page_token or not page:
                return versions

    async def resolve_version_name(self, request: VersionRequest, model: Any, now: datetime.datetime) -> str:
        """The explicit version name, else this run's existing version, else a new derived name."""
        if request.version_name:
            return request.version_name
        if request.run.run_id:
            for version in await self.list_versions(model.id):
                if (version.custom_properties or {}).get(RUN_ID_PROPERTY) == request.run.run_id:
                    self.log(f"model_version empty: reusing {version.name!r}, registered earlier by this run")
                    return version.name
        name = derived_version_name(request.run, now)
        if not request.run.run_id:
            self.log("warning: the pipeline run id is unknown; a re-run cannot be matched to an earlier registration")
        self.log(f"model_version empty: derived {name!r} from the run")
        return name

    async def attach_artifact(self, request: VersionRequest, version_id: str) -> Any:
        """Links a model artifact with the serving URI to the version (an upsert: safe to repeat)."""
        from model_registry.types import ModelArtifact

        artifact = ModelArtifact(
            name=request.model_name,
            uri=request.uri,
            model_format_name=request.model_format_name,
            model_format_version=request.model_format_version,
            storage_key=request.storage_key or None,
            model_source_kind="kfp",
            model_source_class="pipelinerun",
            model_source_group=request.run.namespace or None,
            model_source_id=request.run.run_id or None,
            model_source_name=request.run.run_name or None,
        )
        return await self._retry(
            f"attach artifact {request.uri} to model version {version_id}",
            lambda: self.api.upsert_model_version_artifact(artifact, version_id),
        )

    async def create_version(self, request: VersionRequest, model: Any, version_name: str) -> Any:
        """The version ``version_name`` of ``model``, created when missing; one found instead must record this run.

        Raises:
            VersionTakenError: Another run created the version at the same time (nothing of it was changed).
        """
        from model_registry.types import ModelVersion

        version, created = await self._retry(
            f"find or create model version {version_name!r}",
            lambda: self._find_or_create(
                lambda: self.api.get_model_version_by_params(model.id, version_name),
                lambda: self.api.upsert_model_version(
                    ModelVersion(
                        name=version_name,
                        author=request.author or None,
                        description=request.description or None,
                        custom_properties=request.custom_properties,
                    ),
                    model.id,
                ),
            ),
        )
        recorded = str((version.custom_properties or {}).get(RUN_ID_PROPERTY) or "")
        if not created and (not request.run.run_id or recorded != request.run.run_id):
            raise VersionTakenError(
                f"model {request.model_name!r} version {version_name!r} (id {version.id}) was created at the same "
                f"time by pipeline run {recorded or '<none recorded>'}, not by this run "
                f"{request.run.run_id or '<unknown>'}: it was left as it is; choose another model_version (or leave it "
                "empty to derive one from the run)",
                recorded,
            )
        return version

    async def register(
        self,
        request: VersionRequest,
        before_create: Callable[[], None] | None = None,
        now: datetime.datetime | None = None,
    ) -> ModelRegistryResult:
        """Registers ``request`` unless it is already there; ``before_create`` (the upload) runs once, only if needed.

        Raises:
            VersionConflictError: The version exists and points at another URI.
            RegistryRequestError: The registry failed or refused (after retries).
        """
        now = now or datetime.datetime.now(datetime.timezone.utc)
        model = await self.ensure_registered_model(request)
        base = validate_name(await self.resolve_version_name(request, model, now), "model_version")
        once = functools.cache(before_create or (lambda: None))  # once, whichever name the version ends up with
        for number in range(1, MAX_AUTO_VERSION_NAMES + 1):
            version_name = base if number == 1 else f"{base}-{number}"
            try:
                return await self._register_as(request, model, version_name, once)
            except VersionTakenError as taken:
                ours = bool(request.run.run_id) and taken.other_run == request.run.run_id
                if request.version_name or ours or number == MAX_AUTO_VERSION_NAMES:
                    raise
                self.log(
                    f"version {version_name!r} is pipeline run {taken.other_run or '<none recorded>'}'s: trying "
                    f"{base}-{number + 1!s}"
                )
        raise AssertionError("unreachable")  # pragma: no cover

    async def _register_as(
        self, request: VersionRequest, model: Any, version_name: str, before_create: Callable[[], None]
    ) -> ModelRegistryResult:
        """Registers ``request`` as ``version_name`` (see :meth:`register`)."""
        existing = await self._retry(
            f"find model version {version_name!r}",
            lambda: self.api.get_model_version_by_params(model.id, version_name),
        )
        if existing is not None:
            artifacts = await self._retry(
                f"list artifacts of model version {existing.id}", lambda: self.api.get_model_artifacts(existing.id)
            )
            same = [a for a in artifacts if a.uri == request.uri]
            recorded = str((existing.custom_properties or {}).get(RUN_ID_PROPERTY) or "")
            if same:
                self.log(f"{request.model_name}:{version_name} is already registered with {request.uri}: nothing to do")
                return ModelRegistryResult(
                    "already_registered", model.id, existing.id, same[0].id, version_name, request.uri
                )
            if artifacts:
                raise VersionTakenError(
                    f"model {request.model_name!r} version {version_name!r} (id {existing.id}) already exists and "
                    f"points at {', '.join(a.uri for a in artifacts)}, not {request.uri}: choose another model_version "
                    "(or leave it empty to derive one from the run)",
                    recorded,
                )
            if not recorded or recorded != request.run.run_id:
                raise VersionTakenError(
                    f"model {request.model_name!r} version {version_name!r} (id {existing.id}) exists without a model "
                    f"artifact and was created by pipeline run {recorded or '<none recorded>'!s}, not by this run "
                    f"{request.run.run_id or '<unknown>'!s}: only the run that created it may complete it. Delete the "
                    "version in the registry, or choose another model_version",
                    recorded,
                )
            self.log(
                f"version {version_name!r} exists without a model artifact (an earlier try of this run stopped): "
                "completing"
            )
        before_create()
        version = existing or await self.create_version(request, model, version_name)
        if existing is None:
            self.log(f"created model version {version_name!r} (id {version.id})")
        artifact = await self.attach_artifact(request, version.id)
        self.log(f"registered {request.model_name}:{version_name} -> {request.uri} (artifact id {artifact.id})")
        return ModelRegistryResult("registered", model.id, version.id, artifact.id, version_name, request.uri)
