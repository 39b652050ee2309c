"""The KFP API's services, through ``kfp_server_api`` (the generated v2beta1 client ``kfp.Client`` is built on).

:class:`KfpServer` is the handful of calls ``kfp-finetune upload|run|schedule`` make, each with the connection's
``(connect, read)`` timeout (see :mod:`.connection`), sent as ``kfp.Client`` sends them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pipelines.kfp_api.arguments import read_pipeline_documents
from pipelines.kfp_api.connection import Connection, api_configuration, check_health

if TYPE_CHECKING:
    import kfp_server_api


def pipeline_spec_body(package_path: str) -> dict:
    """The ``pipeline_spec`` of a run (or recurring run) of a compiled pipeline YAML, as ``kfp.Client`` sends it.

    The first YAML document is the pipeline spec, the others (merged) the platform spec; both pass through their
    protobuf messages (``kfp_pipeline_spec``) so the JSON has the API's field names and value forms.
    """
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    documents = read_pipeline_documents(package_path)
    pipeline_spec = json_format.ParseDict(documents[0], pipeline_spec_pb2.PipelineSpec())
    platform: dict = {}
    for document in documents[1:]:
        platform.update(document)
    platform_spec = json_format.ParseDict(platform, pipeline_spec_pb2.PlatformSpec())
    if platform_spec == pipeline_spec_pb2.PlatformSpec():
        return json_format.MessageToDict(pipeline_spec)
    return {
        "pipeline_spec": json_format.MessageToDict(pipeline_spec),
        "platform_spec": json_format.MessageToDict(platform_spec),
    }


def name_filter(display_name: str) -> str:
    """A v2beta1 list filter matching one display name."""
    return json.dumps({"predicates": [{"operation": "EQUALS", "key": "display_name", "stringValue": display_name}]})


class KfpServer:
    """The KFP API calls of upload, run and schedule; every request has ``connection.request_timeout``.

    Args:
        connection: The connection (its namespace is sent where the API takes one).
        configuration: Its ``kfp_server_api.Configuration`` (token, TLS, one try per request).
    """

    def __init__(self, connection: Connection, configuration: kfp_server_api.Configuration) -> None:
        import kfp_server_api

        self.connection = connection
        self.timeout = connection.request_timeout
        self.api_client = kfp_server_api.ApiClient(configuration)
        self.pipelines = kfp_server_api.PipelineServiceApi(self.api_client)
        self.uploads = kfp_server_api.PipelineUploadServiceApi(self.api_client)
        self.experiments = kfp_server_api.ExperimentServiceApi(self.api_client)
        self.runs = kfp_server_api.RunServiceApi(self.api_client)
        self.recurring_runs = kfp_server_api.RecurringRunServiceApi(self.api_client)

    def close(self) -> None:
        """Releases the connection pool."""
        self.api_client.close()

    def _namespace(self) -> dict[str, str]:
        return {"namespace": self.connection.namespace} if self.connection.namespace else {}

    def list_pipelines(self, display_name: str, page_size: int) -> Any:
        """Pipelines with this display name (in the connection's namespace)."""
        return self.pipelines.pipeline_service_list_pipelines(
            page_size=page_size, filter=name_filter(display_name), _request_timeout=self.timeout, **self._namespace()
        )

    def list_pipeline_versions(self, pipeline_id: str, page_size: int, sort_by: str) -> Any:
        """Versions of a pipeline."""
        return self.pipelines.pipeline_service_list_pipeline_versions(
            pipeline_id, page_size=page_size, sort_by=sort_by, _request_timeout=self.timeout
        )

    def upload_pipeline(self, package_path: str, display_name: str, description: str) -> Any:
        """Uploads a new pipeline (``POST /apis/v2beta1/pipelines/upload``)."""
        extra = {"description": description} if description else {}
        return self.uploads.upload_pipeline(
            package_path, name=display_name, _request_timeout=self.timeout, **extra, **self._namespace()
        )

    def upload_pipeline_version(self, package_path: str, version_name: str, pipeline_id: str, description: str) -> Any:
        """Uploads a new version of a pipeline (``POST /apis/v2beta1/pipelines/upload_version``)."""
        extra = {"description": description} if description else {}
        return self.uploads.upload_pipeline_version(
            package_path, name=version_name, pipelineid=pipeline_id, _request_timeout=self.timeout, **extra
        )

    def get_or_create_experiment(self, display_name: str) -> Any:
        """The experiment with this display name, created when there is none."""
        import kfp_server_api

        found = self.experiments.experiment_service_list_experiments(
            filter=name_filter(display_name), _request_timeout=self.timeout, **self._namespace()
        )
        if found.experiments:
            return found.experiments[0]
        namespace = self.connection.namespace or None
        experiment = kfp_server_api.V2beta1Experiment(display_name=display_name, namespace=namespace)
        return self.experiments.experiment_service_create_experiment(experiment, _request_timeout=self.timeout)

    def create_run(self, experiment_id: str, display_name: str, package_path: str, arguments: dict) -> Any:
        """Starts a run of a compiled pipeline."""
        import kfp_server_api

        run = kfp_server_api.V2beta1Run(
            experiment_id=experiment_id,
            display_name=display_name,
            pipeline_spec=pipeline_spec_body(package_path),
            runtime_config=kfp_server_api.V2beta1RuntimeConfig(parameters=arguments),
        )
        return self.runs.run_service_create_run(run, _request_timeout=self.timeout)

    def create_recurring_run(
        self,
        experiment_id: str,
        display_name: str,
        package_path: str,
        arguments: dict,
        trigger: dict,
        max_concurrency: int,
        enabled: bool,
        no_catchup: bool,
    ) -> Any:
        """Creates a recurring run; ``trigger`` is ``{"cron": expr}`` or ``{"interval_second": seconds}``."""
        import kfp_server_api

        if "cron" in trigger:
            schedule = kfp_server_api.V2beta1Trigger(cron_schedule=kfp_server_api.V2beta1CronSchedule(**trigger))
        else:
            schedule = kfp_server_api.V2beta1Trigger(
                periodic_schedule=kfp_server_api.V2beta1PeriodicSchedule(**trigger)
            )
        mode = kfp_server_api.RecurringRunMode.ENABLE if enabled else kfp_server_api.RecurringRunMode.DISABLE
        recurring_run = kfp_server_api.V2beta1RecurringRun(
            experiment_id=experiment_id,
            display_name=display_name,
            mode=mode,
            pipeline_spec=pipeline_spec_body(package_path),
            runtime_config=kfp_server_api.V2beta1RuntimeConfig(parameters=arguments),
            trigger=schedule,
            max_concurrency=max_concurrency,
            no_catchup=no_catchup,
        )
        return self.recurring_runs.recurring_run_service_create_recurring_run(
            recurring_run, _request_timeout=self.timeout
        )


def make_client(connection: Connection) -> KfpServer:
    """The KFP API's services for a connection (:class:`~.server.KfpServer`), after one health check of the API.

    The health check fails fast where the host is unreachable, refuses the token or answers with an HTML page (a
    dashboard or login page at the wrong URL).

    Args:
        connection: Host, bearer token, TLS settings, namespace and timeout.

    Returns:
        The services; every request they send carries the bearer token, the TLS settings and the timeout.

    Raises:
        KfpApiError: The API cannot be reached (connection or TLS failure) or does not answer as a KFP API.
    """
    check_health(connection)
    return KfpServer(connection, api_configuration(connection))
