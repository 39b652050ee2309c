"""Upload, run and schedule compiled pipelines on a KFP API (v2beta1) through ``kfp_server_api``.

Bad input is a :class:`ValueError` before any request; a refusal or no answer in time a :class:`KfpApiError`. The
bearer token is never printed, logged or put in a message.
"""

from pipelines.kfp_api.arguments import check_arguments, load_arguments, read_pipeline_documents, validate_cron
from pipelines.kfp_api.connection import HOST_ENV, Connection, KfpApiError, check_health, connection_from_options
from pipelines.kfp_api.submit import create_run, make_client, schedule_run, upload_pipeline

__all__ = [
    "HOST_ENV",
    "Connection",
    "KfpApiError",
    "check_arguments",
    "check_health",
    "connection_from_options",
    "create_run",
    "load_arguments",
    "make_client",
    "read_pipeline_documents",
    "schedule_run",
    "upload_pipeline",
    "validate_cron",
]
