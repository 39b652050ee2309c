"""Upload, run and schedule compiled pipelines on a Kubeflow Pipelines API (v2beta1) through ``kfp_server_api``.

The ``kfp-finetune upload|run|schedule`` commands are thin argparse wrappers of this package:

* :mod:`.connection`: :func:`connection_from_options` turns flags and environment (``KFP_HOST``, ``KFP_TOKEN``) into a
  :class:`Connection`; every request has a ``(connect, read)`` timeout and is tried once.
* :mod:`.server`: :func:`make_client` builds the API's services from a connection after a health check
  (:class:`~.server.KfpServer`: ``kfp_server_api``'s generated classes).
* :mod:`.arguments`: :func:`load_arguments` merges ``--param KEY=VALUE`` flags over a YAML/JSON parameters file;
  :func:`check_arguments` checks them against the compiled pipeline.
* :mod:`.cron`: :func:`validate_cron` (``croniter``).
* :mod:`.submit`: :func:`upload_pipeline`, :func:`create_run` and :func:`schedule_run` do the work and return the new
  ids.

Bad input is refused before any request is sent (:class:`ValueError` naming the rule, the value and where it came
from); a refusal by the API server, or no answer in time, becomes a :class:`KfpApiError`. The bearer token is never
printed, logged or put in an error message.
"""

from pipelines.kfp_api.arguments import PACKAGE_SUFFIXES, check_arguments, load_arguments, read_pipeline_spec
from pipelines.kfp_api.connection import (
    CONNECT_TIMEOUT_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    HEALTH_ACTION,
    HOST_ENV,
    TOKEN_ENV,
    Connection,
    KfpApiError,
    api_errors,
    check_health,
    connection_from_options,
)
from pipelines.kfp_api.cron import validate_cron
from pipelines.kfp_api.server import client_session, make_client
from pipelines.kfp_api.submit import (
    DEFAULT_EXPERIMENT,
    MAX_CONCURRENCY_RANGE,
    create_run,
    default_version_name,
    ensure_experiment,
    find_pipeline_id,
    schedule_run,
    upload_pipeline,
)

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "DEFAULT_EXPERIMENT",
    "DEFAULT_TIMEOUT_SECONDS",
    "HEALTH_ACTION",
    "HOST_ENV",
    "MAX_CONCURRENCY_RANGE",
    "PACKAGE_SUFFIXES",
    "TOKEN_ENV",
    "Connection",
    "KfpApiError",
    "api_errors",
    "check_arguments",
    "check_health",
    "client_session",
    "connection_from_options",
    "create_run",
    "default_version_name",
    "ensure_experiment",
    "find_pipeline_id",
    "load_arguments",
    "make_client",
    "read_pipeline_spec",
    "schedule_run",
    "upload_pipeline",
    "validate_cron",
]
