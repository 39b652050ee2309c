"""The KFP API's services, through ``kfp_server_api`` (the generated v2beta1 client ``kfp.Client`` is built on)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

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
    """The KFP API services upload, run and schedule call; each call passes :attr:`timeout` and :attr:`namespace`.

    Args:
        connection: The connection (its namespace is sent where the API takes one).
        configuration: Its ``kfp_server_api.Configuration`` (token, TLS, one try per request).
    """

    def __init__(self, connection: Connection, configuration: kfp_server_api.Configuration) -> None:
        import kfp_server_api

        self.connection = connection
        self.timeout = connection.request_timeout
        self.namespace = {"namespace": connection.namespace} if connection.namespace else {}
        self.api_client = kfp_server_api.ApiClient(configuration)
        self.pipelines = kfp_server_api.PipelineServiceApi(self.api_client)
        self.uploads = kfp_server_api.PipelineUploadServiceApi(self.api_client)
        self.experiments = kfp_server_api.ExperimentServiceApi(self.api_client)
        self.runs = kfp_server_api.RunServiceApi(self.api_client)
        self.recurring_runs = kfp_server_api.RecurringRunServiceApi(self.api_client)

    def close(self) -> None:
        """Releases the connection pool."""
        self.api_client.close()


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
