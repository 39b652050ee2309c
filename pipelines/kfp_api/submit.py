"""Upload, run and schedule a compiled pipeline (``kfp-finetune upload|run|schedule``); input is checked first."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kfp_server_api

from pipelines.kfp_api.arguments import check_arguments, read_pipeline_documents, validate_cron
from pipelines.kfp_api.connection import LOGGER, Connection, KfpApiError, api_configuration, api_errors, check_health

DEFAULT_EXPERIMENT = "Default"
MAX_CONCURRENCY_RANGE = (1, 10)  # what the KFP API server accepts for a recurring run


class KfpServer:
    """The v2beta1 services of ``kfp_server_api`` that upload, run and schedule use, on one connection."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.namespace = {"namespace": connection.namespace} if connection.namespace else {}
        self.api_client = kfp_server_api.ApiClient(api_configuration(connection))
        self.pipelines = kfp_server_api.PipelineServiceApi(self.api_client)
        self.uploads = kfp_server_api.PipelineUploadServiceApi(self.api_client)
        self.experiments = kfp_server_api.ExperimentServiceApi(self.api_client)
        self.runs = kfp_server_api.RunServiceApi(self.api_client)
        self.recurring_runs = kfp_server_api.RecurringRunServiceApi(self.api_client)

    def call(self, action: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``method(...)`` with the request timeout; a failure is a :class:`KfpApiError` naming ``action``."""
        with api_errors(self.connection, action):
            return method(*args, _request_timeout=self.connection.request_timeout, **kwargs)

    def returned_id(self, resource_id: str | None, what: str) -> str:
        """The id the API returned for ``what``; a missing one means the host is not (only) a KFP API."""
        if not resource_id:
            raise KfpApiError(
                f"KFP API at {self.connection.host} returned no id for {what}: is --host the pipelines API route?"
            )
        return resource_id

    def close(self) -> None:
        """Releases the connection pool."""
        self.api_client.close()


def make_client(connection: Connection) -> KfpServer:
    """The KFP API's services after one health check; a :class:`KfpApiError` when it is not a reachable KFP API."""
    check_health(connection)
    return KfpServer(connection)


def pipeline_spec_body(package_path: str) -> dict:
    """The ``pipeline_spec`` of a run of a compiled pipeline YAML, as ``kfp.Client`` sends it."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    documents = read_pipeline_documents(package_path)
    pipeline_spec = json_format.MessageToDict(json_format.ParseDict(documents[0], pipeline_spec_pb2.PipelineSpec()))
    platform: dict = {}
    for document in documents[1:]:
        platform.update(document)
    platform_spec = json_format.ParseDict(platform, pipeline_spec_pb2.PlatformSpec())
    if platform_spec == pipeline_spec_pb2.PlatformSpec():
        return pipeline_spec
    return {"pipeline_spec": pipeline_spec, "platform_spec": json_format.MessageToDict(platform_spec)}


def name_filter(display_name: str) -> str:
    """A v2beta1 list filter matching one display name."""
    return json.dumps({"predicates": [{"operation": "EQUALS", "key": "display_name", "stringValue": display_name}]})


def _stamped(name: str) -> str:
    """``<name> <UTC time>``: the default name of a run, and the start of a version's."""
    return f"{name} {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S}"


def upload_pipeline(
    connection: Connection, package_path: str, pipeline_name: str, description: str = "", version_name: str = ""
) -> dict:
    """Uploads a compiled pipeline, or a new version of the pipeline of that name; returns the ids and version name.

    ``version_name`` defaults to ``<pipeline> <UTC time> <sha256 prefix>``; a new pipeline's first version is named
    by the server. A :class:`ValueError` on bad input, a :class:`KfpApiError` when the API refuses (409: name exists).
    """
    read_pipeline_documents(package_path)
    pipeline_name = _required_name(pipeline_name, "pipeline name (--name)")
    described = {"description": description} if description else {}
    with contextlib.closing(make_client(connection)) as client:
        listing = client.call(
            f"look up pipeline {pipeline_name!r}",
            client.pipelines.pipeline_service_list_pipelines,
            page_size=2,
            filter=name_filter(pipeline_name),
            **client.namespace,
        )
        found = listing.pipelines or []
        if len(found) > 1:
            raise KfpApiError(f"KFP API at {connection.host}: more than one pipeline is named {pipeline_name!r}")
        if not found:
            return _upload_new_pipeline(client, package_path, pipeline_name, described, version_name)
        version_name = version_name.strip() or (
            f"{_stamped(pipeline_name)} {hashlib.sha256(Path(package_path).read_bytes()).hexdigest()[:8]}"
        )
        version = client.call(
            f"upload version {version_name!r} of pipeline {pipeline_name!r}",
            client.uploads.upload_pipeline_version,
            package_path,
            name=version_name,
            pipelineid=found[0].pipeline_id,
            **described,
        )
        version_id = client.returned_id(version.pipeline_version_id, f"version {version_name!r}")
    return {"pipeline_id": found[0].pipeline_id, "version_id": version_id, "version_name": version_name}


def _upload_new_pipeline(client: KfpServer, package_path: str, name: str, described: dict, version_name: str) -> dict:
    """Uploads a new pipeline and finds the version the server created with it."""
    pipeline = client.call(
        f"upload pipeline {name!r}",
        client.uploads.upload_pipeline,
        package_path,
        name=name,
        **described,
        **client.namespace,
    )
    pipeline_id = client.returned_id(pipeline.pipeline_id, f"pipeline {name!r}")
    versions = client.call(
        f"list the versions of pipeline {name!r}",
        client.pipelines.pipeline_service_list_pipeline_versions,
        pipeline_id,
        page_size=1,
        sort_by="created_at desc",
    )
    if not versions.pipeline_versions:
        raise KfpApiError(f"KFP API at {client.connection.host}: pipeline {name!r} was uploaded without a version")
    version = versions.pipeline_versions[0]
    if version_name and version_name != version.display_name:
        LOGGER.warning(
            "pipeline %r is new: its first version is named %r by the server; --version applies to later uploads",
            name,
            version.display_name,
        )
    version_id = client.returned_id(version.pipeline_version_id, f"the first version of {name!r}")
    return {"pipeline_id": pipeline_id, "version_id": version_id, "version_name": version.display_name}


def create_run(
    connection: Connection,
    package_path: str,
    arguments: dict,
    run_name: str = "",
    experiment_name: str = DEFAULT_EXPERIMENT,
) -> dict:
    """Starts one run (default name ``<pipeline> <UTC time>``) in an experiment, created when missing.

    Returns ``{"run_id", "experiment_id"}``; a :class:`ValueError` on bad input (package, arguments, names), a
    :class:`KfpApiError` when the API refuses or does not answer.
    """
    spec = read_pipeline_documents(package_path)[0]
    check_arguments(spec, arguments, package_path)
    experiment_name = _required_name(experiment_name, "experiment name (--experiment)")
    run_name = run_name.strip() or _stamped(spec["pipelineInfo"].get("name", "pipeline"))
    with contextlib.closing(make_client(connection)) as client:
        experiment_id = ensure_experiment(client, experiment_name)
        run = kfp_server_api.V2beta1Run(
            experiment_id=experiment_id,
            display_name=run_name,
            pipeline_spec=pipeline_spec_body(package_path),
            runtime_config=kfp_server_api.V2beta1RuntimeConfig(parameters=arguments),
        )
        run = client.call(f"create run {run_name!r}", client.runs.run_service_create_run, run)
        return {"run_id": client.returned_id(run.run_id, f"run {run_name!r}"), "experiment_id": experiment_id}


def schedule_run(
    connection: Connection,
    package_path: str,
    arguments: dict,
    job_name: str,
    experiment_name: str = DEFAULT_EXPERIMENT,
    cron: str = "",
    interval_seconds: int | None = None,
    max_concurrency: int = 1,
    enabled: bool = True,
    no_catchup: bool = True,
) -> dict:
    """Creates a recurring run on a ``cron`` schedule (:func:`~.arguments.validate_cron`) or every ``interval_seconds``.

    ``max_concurrency``: its runs at once (1-10); ``no_catchup``: a paused schedule does not backfill. Returns
    ``{"recurring_run_id", "experiment_id"}``; a :class:`ValueError` on bad input, a :class:`KfpApiError` when the
    API refuses or does not answer.
    """
    cron = validate_cron(cron) if cron.strip() else ""
    if interval_seconds is not None and not _whole(interval_seconds, 1):
        raise ValueError(f"interval {interval_seconds!r} (--interval) must be a positive whole number of seconds")
    if bool(cron) == (interval_seconds is not None):
        given = "both" if cron else "neither"
        raise ValueError(f"a schedule needs exactly one of --cron EXPR or --interval SECONDS; {given} was given")
    low, high = MAX_CONCURRENCY_RANGE
    if not _whole(max_concurrency, low, high):
        raise ValueError(
            f"max concurrency {max_concurrency!r} must be a whole number from {low} to {high} (KFP's limit)"
        )
    job_name = _required_name(job_name, "recurring run name (--name)")
    experiment_name = _required_name(experiment_name, "experiment name (--experiment)")
    check_arguments(read_pipeline_documents(package_path)[0], arguments, package_path)
    if cron:
        trigger = kfp_server_api.V2beta1Trigger(cron_schedule=kfp_server_api.V2beta1CronSchedule(cron=cron))
    else:
        periodic = kfp_server_api.V2beta1PeriodicSchedule(interval_second=interval_seconds)
        trigger = kfp_server_api.V2beta1Trigger(periodic_schedule=periodic)
    with contextlib.closing(make_client(connection)) as client:
        recurring_run = kfp_server_api.V2beta1RecurringRun(
            experiment_id=ensure_experiment(client, experiment_name),
            display_name=job_name,
            mode=kfp_server_api.RecurringRunMode.ENABLE if enabled else kfp_server_api.RecurringRunMode.DISABLE,
            pipeline_spec=pipeline_spec_body(package_path),
            runtime_config=kfp_server_api.V2beta1RuntimeConfig(parameters=arguments),
            trigger=trigger,
            max_concurrency=max_concurrency,
            no_catchup=no_catchup,
        )
        created = client.call(
            f"create recurring run {job_name!r}",
            client.recurring_runs.recurring_run_service_create_recurring_run,
            recurring_run,
        )
        recurring_run_id = client.returned_id(created.recurring_run_id, f"recurring run {job_name!r}")
    return {"recurring_run_id": recurring_run_id, "experiment_id": recurring_run.experiment_id}


def ensure_experiment(client: KfpServer, experiment_name: str) -> str:
    """The id of the experiment with this name (in the connection's namespace), created when there is none."""
    action = f"get or create experiment {experiment_name!r}"
    experiments = client.experiments
    by_name = {"filter": name_filter(experiment_name), **client.namespace}
    found = client.call(action, experiments.experiment_service_list_experiments, **by_name)
    if found.experiments:
        experiment = found.experiments[0]
    else:
        new = kfp_server_api.V2beta1Experiment(
            display_name=experiment_name, namespace=client.connection.namespace or None
        )
        experiment = client.call(action, experiments.experiment_service_create_experiment, new)
    return client.returned_id(experiment.experiment_id, f"experiment {experiment_name!r}")


def _whole(value: Any, low: int, high: float = float("inf")) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _required_name(value: str, what: str) -> str:
    if not value or not value.strip():
        raise ValueError(f"the {what} is empty")
    return value.strip()
