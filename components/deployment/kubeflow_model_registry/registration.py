"""Idempotent registration (find-then-register, README: *Overview*): registered model -> version -> artifact."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import re
from collections.abc import Callable
from typing import Any

from .lineage import RunInfo
from .registry_client import RegistrySession
from .request import VersionOptions

#: The custom property that ties a version to the pipeline run that registered it.
RUN_ID_PROPERTY = "pipeline_run_id"
#: Version names the registry UI and URLs handle well.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+\-]{0,252}$")


class VersionConflictError(ValueError):
    """The version exists and is another run's (``other_run``: the run recorded on it) or points elsewhere."""

    def __init__(self, message: str, other_run: str) -> None:
        super().__init__(message)
        self.other_run = other_run


#: How many names an auto version tries (``<derived>``, ``<derived>-2``, ...) before giving up.
MAX_AUTO_VERSION_NAMES = 10


@dataclasses.dataclass(frozen=True)
class VersionRequest:
    """What to register: the version options under the resolved ``model_name``, the serving ``uri``, the lineage."""

    options: VersionOptions
    model_name: str
    uri: str
    custom_properties: dict[str, Any]
    run: RunInfo


@dataclasses.dataclass(frozen=True)
class ModelRegistryResult:
    """What the step did (``status``: README *Outputs*) and what the registry holds now ("" when not done)."""

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
    """``<algorithm>-<base model's last path part>`` (``osft-Qwen2.5-1.5B-Instruct``), other characters as ``-``."""
    reference = base_model.strip().removeprefix("oci://").split("@")[0].rstrip("/")  # a digest is no name
    tail = reference.rsplit("/", 1)[-1]
    parts = [part for part in (algorithm.strip().lower(), tail) if part]
    name = re.sub(r"[^A-Za-z0-9._:+\-]+", "-", "-".join(parts)).strip("-._:+")[:253]
    return name if _NAME.match(name) else FALLBACK_MODEL_NAME


def check_registration_names(registry_address: str, model_name: str, model_version: str) -> None:
    """The names a run would register under, checked before it starts (an empty one is derived).

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


def _recorded_run(version: Any) -> str:
    """The pipeline run recorded on a model version (``""``: none)."""
    return str((version.custom_properties or {}).get(RUN_ID_PROPERTY) or "")


#: The end of a refusal whose fix is another name.
_CHOOSE_ANOTHER = "choose another model_version (or leave it empty to derive one from the run)"


def _taken(request: VersionRequest, version: Any, what: str, fix: str = _CHOOSE_ANOTHER) -> VersionConflictError:
    """The refusal of ``version`` (``what`` it is; ``{runs}``: which run made it, and this run)."""
    recorded = _recorded_run(version)
    runs = f"pipeline run {recorded or '<none recorded>'}, not by this run {request.run.run_id or '<unknown>'}"
    where = f"model {request.model_name!r} version {version.name!r} (id {version.id})"
    return VersionConflictError(f"{where} {what.replace('{runs}', runs)}: {fix}", recorded)


def _artifact_fields(request: VersionRequest) -> dict[str, Any]:
    """The model artifact's fields besides its name and URI: format, storage key, and the run as its source."""
    return dict(
        model_format_name=request.options.model_format_name,
        model_format_version=request.options.model_format_version,
        storage_key=request.options.storage_key or None,
        model_source_kind="kfp",
        model_source_class="pipelinerun",
        model_source_group=request.run.namespace or None,
        model_source_id=request.run.run_id or None,
        model_source_name=request.run.run_name or None,
    )


class Registrar:
    """Registers :class:`VersionRequest` s with the client of a connected :class:`~.registry_client.RegistrySession`."""

    def __init__(self, session: RegistrySession, log: Callable[[str], None]):
        self.session, self.registry, self.log = session, session.registry, log

    def _find_version(self, model_name: str, version_name: str) -> Any:
        """The version, ``None`` when it or its registered model does not exist."""
        from model_registry.exceptions import StoreError

        try:
            step = f"find model version {version_name!r}"
            return self.session.call(step, lambda: self.registry.get_model_version(model_name, version_name))
        except StoreError:  # no registered model of that name
            return None

    def resolve_version_name(self, request: VersionRequest, model: Any, now: datetime.datetime) -> str:
        """The explicit version name, else this run's existing version, else a new derived name."""
        if request.options.model_version:
            return request.options.model_version
        if request.run.run_id and model is not None:
            versions = self.session.call(
                f"list versions of registered model {request.model_name!r}",
                lambda: list(self.registry.get_model_versions(request.model_name)),
            )
            for version in versions:
                if _recorded_run(version) == request.run.run_id:
                    self.log(f"model_version empty: reusing {version.name!r}, registered earlier by this run")
                    return version.name
        name = derived_version_name(request.run, now)
        if not request.run.run_id:
            self.log("warning: the pipeline run id is unknown; a re-run cannot be matched to an earlier registration")
        self.log(f"model_version empty: derived {name!r} from the run")
        return name

    def register(
        self,
        request: VersionRequest,
        before_create: Callable[[], None] | None = None,
        now: datetime.datetime | None = None,
    ) -> ModelRegistryResult:
        """Registers ``request`` unless it is already there; ``before_create`` (the upload) runs once, only if needed.

        Raises:
            VersionConflictError: The version exists and points at another URI, or is another run's.
            RegistryRequestError: The registry failed or refused (after retries).
        """
        name, registry = request.model_name, self.registry
        now = now or datetime.datetime.now(datetime.timezone.utc)
        model = self.session.call(f"find registered model {name!r}", lambda: registry.get_registered_model(name))
        base = validate_name(self.resolve_version_name(request, model, now), "model_version")
        once = functools.cache(before_create or (lambda: None))  # once, whichever name the version ends up with
        for number in range(1, MAX_AUTO_VERSION_NAMES + 1):
            version_name = base if number == 1 else f"{base}-{number}"
            try:
                status = self._register_as(request, version_name, once)
                break
            except VersionConflictError as taken:
                ours = bool(request.run.run_id) and taken.other_run == request.run.run_id
                if request.options.model_version or ours or number == MAX_AUTO_VERSION_NAMES:
                    raise
                self.log(
                    f"version {version_name!r} is pipeline run {taken.other_run or '<none recorded>'}'s: trying "
                    f"{base}-{number + 1!s}"
                )
        model_now, version, artifact = self.session.call(
            f"read back {name}:{version_name}",
            lambda: (
                registry.get_registered_model(name),
                registry.get_model_version(name, version_name),
                registry.get_model_artifact(name, version_name),
            ),
        )
        description = request.options.description
        if model is None and description and not model_now.description:  # a new registered model
            model_now.description = description
            self.session.call(f"describe registered model {name!r}", lambda: registry.update(model_now))
        return ModelRegistryResult(status, model_now.id, version.id, artifact.id, version_name, request.uri)

    def _register_as(self, request: VersionRequest, version_name: str, before_create: Callable[[], None]) -> str:
        """Registers ``request`` as ``version_name``: ``registered`` or ``already_registered`` (see :meth:`register`).

        Raises:
            VersionConflictError: The version is another run's, or points at another URI.
        """
        from model_registry.exceptions import StoreError
        from model_registry.types import ModelArtifact

        name, run_id = request.model_name, request.run.run_id
        version, created = self._find_version(name, version_name), False
        if version is None:
            before_create()
            try:
                self.session.call(
                    f"register {name}:{version_name}",
                    lambda: self.registry.register_model(
                        name,
                        request.uri,
                        version=version_name,
                        author=request.options.author or None,
                        owner=request.options.author or None,
                        version_description=request.options.description or None,
                        metadata=request.custom_properties,
                        **_artifact_fields(request),
                    ),
                    retry_conflicts=True,  # created at the same time: the next try finds it
                )
                self.log(f"registered {name}:{version_name} -> {request.uri}")
                return "registered"
            except StoreError:  # it exists now: another run's, made at the same time, or this run's (a lost answer)
                version = self._find_version(name, version_name)
                if version is None:
                    raise
                if not run_id or _recorded_run(version) != run_id:
                    raise _taken(request, version, "was created at the same time by {runs}: it was left as it is")
                created = True
        step = f"find the model artifact of {name}:{version_name}"
        artifact = self.session.call(step, lambda: self.registry.get_model_artifact(name, version_name))
        if artifact is not None and artifact.uri == request.uri:
            if not created:
                self.log(f"{name}:{version_name} is already registered with {request.uri}: nothing to do")
            return "registered" if created else "already_registered"
        if artifact is not None:
            raise _taken(request, version, f"already exists and points at {artifact.uri}, not {request.uri}")
        if not created and (not run_id or _recorded_run(version) != run_id):
            raise _taken(
                request,
                version,
                "exists without a model artifact and was created by {runs}",
                "only the run that created it may complete it. Delete the version in the registry, or choose another "
                "model_version",
            )
        self.log(
            f"version {version_name!r} exists without a model artifact (an earlier try of this run stopped): completing"
        )
        before_create()
        artifact = ModelArtifact(name=name, uri=request.uri, **_artifact_fields(request))
        step = f"attach artifact {request.uri} to model version {version.id}"
        self.session.call(step, lambda: self.registry.attach_artifact(artifact, version.id))
        self.log(f"registered {name}:{version_name} -> {request.uri}")
        return "registered"
